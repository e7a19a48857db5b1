package reconcile

import (
	"context"
	"fmt"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// History tells who last changed files of the campaigns repository.
type History interface {
	LastChanges(ctx context.Context, rev string, paths []string) (map[string]source.Change, error)
}

// Approvers reads the approval policy of the campaigns repository at a
// revision, as desired.ApproversAt does: a nil policy and why when nobody
// could approve there.
type Approvers interface {
	ApproversAt(ctx context.Context, sha string) (p *approval.Policy, why string, err error)
}

// RepoApprovers reads approval policies from a campaigns repository.
type RepoApprovers struct {
	Repo   *source.Repo
	Loader *spec.Loader
}

// ApproversAt reads the policy at sha.
func (a RepoApprovers) ApproversAt(ctx context.Context, sha string) (*approval.Policy, string, error) {
	root, err := a.Repo.FS(ctx, sha, "")
	if err != nil {
		return nil, "", err
	}
	return desired.ApproversAt(ctx, a.Loader, root)
}

// GateApprovals passes the revision's committed approval records through
// the approval gate (approval.Policy.GateCommits): a record counts only
// when the commit that last changed it is its approver's, the approver
// may approve the campaign's definition, and an approve by the author of
// the definition's latest change is not alone. Who may approve is what
// the watched branch said before that commit (the approver rules and
// CODEOWNERS at its first parent), never what the commit itself, or one
// after it, says: one push cannot add an approver and that approver's
// approvals together. Records that do not count move to
// rev.Desired.Refused with the reason. isMember answers team questions;
// nil when there is no forge to ask.
func GateApprovals(ctx context.Context, h History, at Approvers, rev *desired.Revision, isMember approval.IsMember) error {
	records := rev.Desired.Approvals
	if len(records) == 0 {
		return nil
	}
	rev.Desired.Approvals = nil
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
	defs := map[string]approval.DefinitionChange{}
	for id, f := range defFiles {
		defs[id] = approval.DefinitionChange{File: f, Author: who(changes[f]).Author}
	}
	// The records, by the revision whose policy judges them: the parent
	// of the commit that last changed each.
	type group struct {
		policy    *approval.Policy
		why       string
		committed []approval.CommittedRecord
	}
	groups := map[string]*group{}
	var order []string
	for _, r := range records {
		c := changes[r.File]
		g, ok := groups[c.Parent]
		if !ok {
			g = &group{}
			switch {
			case c.Parent == "":
				g.why = fmt.Sprintf("nobody may approve in commit %s: it has no parent, so no approver rules came before it", short(c.Hash))
			default:
				p, why, err := at.ApproversAt(ctx, c.Parent)
				if err != nil {
					return fmt.Errorf("read who could approve before commit %s: %w", short(c.Hash), err)
				}
				g.policy = p
				if p == nil {
					g.why = fmt.Sprintf("nobody may approve in commit %s: before it (at %s) %s", short(c.Hash), short(c.Parent), why)
				}
			}
			groups[c.Parent] = g
			order = append(order, c.Parent)
		}
		g.committed = append(g.committed, approval.CommittedRecord{Record: r, Commit: who(c)})
	}
	verdicts := map[string]approval.Verdict{} // by record file
	for _, parent := range order {
		g := groups[parent]
		if g.policy == nil {
			for _, c := range g.committed {
				verdicts[c.Record.File] = approval.Verdict{Record: c.Record, Reason: g.why}
			}
			continue
		}
		vs, err := g.policy.GateCommits(ctx, g.committed, defs, isMember)
		if err != nil {
			return err
		}
		for _, v := range vs {
			verdicts[v.Record.File] = v
		}
	}
	for _, r := range records {
		v := verdicts[r.File]
		if v.Allowed {
			rev.Desired.Approvals = append(rev.Desired.Approvals, v.Record)
		} else {
			rev.Desired.Refused = append(rev.Desired.Refused, plan.Refusal{Record: v.Record, Reason: v.Reason})
		}
	}
	return nil
}
