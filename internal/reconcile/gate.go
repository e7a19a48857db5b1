package reconcile

import (
	"context"
	"fmt"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/source"
)

// History tells who last changed files of the campaigns repository.
type History interface {
	LastChanges(ctx context.Context, rev string, paths []string) (map[string]source.Change, error)
}

// GateApprovals passes the revision's committed approval records through
// the approval gate (approval.Policy.GateCommits): a record counts only
// when the commit that last changed it is its approver's, the approver
// may approve the campaign's definition, and an approve by the author of
// the definition's latest change is not alone. Records that do not count
// move to rev.Desired.Refused with the reason. isMember answers team
// questions; nil when there is no forge to ask.
func GateApprovals(ctx context.Context, h History, rev *desired.Revision, isMember approval.IsMember) error {
	records := rev.Desired.Approvals
	if len(records) == 0 {
		return nil
	}
	rev.Desired.Approvals = nil
	if rev.Approvers == nil {
		for _, r := range records {
			rev.Desired.Refused = append(rev.Desired.Refused, plan.Refusal{Record: r,
				Reason: "nobody may approve: the repository has no valid fleetlift.yaml with approvers"})
		}
		return nil
	}
	defFiles := map[string]string{}
	for _, d := range rev.Desired.Definitions {
		if _, ok := defFiles[d.ID]; !ok {
			defFiles[d.ID] = d.File
		}
	}
	var paths []string
	for _, r := range records {
		paths = append(paths, r.File)
	}
	for _, f := range defFiles {
		paths = append(paths, f)
	}
	changes, err := h.LastChanges(ctx, rev.SHA, paths)
	if err != nil {
		return fmt.Errorf("read who approved: %w", err)
	}
	who := func(c source.Change) approval.Commit {
		return approval.Commit{Hash: c.Hash,
			Author:    approval.Identity{Name: c.AuthorName, Email: c.AuthorEmail},
			Committer: approval.Identity{Name: c.CommitterName, Email: c.CommitterEmail}}
	}
	committed := make([]approval.CommittedRecord, len(records))
	for i, r := range records {
		committed[i] = approval.CommittedRecord{Record: r, Commit: who(changes[r.File])}
	}
	defs := map[string]approval.DefinitionChange{}
	for id, f := range defFiles {
		defs[id] = approval.DefinitionChange{File: f, Author: who(changes[f]).Author}
	}
	verdicts, err := rev.Approvers.GateCommits(ctx, committed, defs, isMember)
	if err != nil {
		return err
	}
	for _, v := range verdicts {
		if v.Allowed {
			rev.Desired.Approvals = append(rev.Desired.Approvals, v.Record)
		} else {
			rev.Desired.Refused = append(rev.Desired.Refused, plan.Refusal{Record: v.Record, Reason: v.Reason})
		}
	}
	return nil
}
