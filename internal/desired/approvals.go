package desired

import (
	"context"
	"fmt"
	"slices"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// record is the approval record a file holds, as the plan takes it.
func record(a spec.Approval) approval.Record {
	return approval.Record{
		File: a.File, Target: a.Target, ResultDigest: a.ResultDigest, Generation: a.Generation, By: a.By,
		Action: approval.Action(a.Action), Prompt: a.Prompt,
	}
}

// CheckDrafts loads the files drafts encode as Read loads approval
// records, and makes sure each is valid and reads back as its draft: the
// same record, with the same comment.
func CheckDrafts(ctx context.Context, loader *spec.Loader, drafts []approval.Draft) error {
	fsys := fstest.MapFS{}
	for _, d := range drafts {
		fsys[d.File] = &fstest.MapFile{Data: d.Encode(), Mode: 0o644}
	}
	res, err := loader.LoadApprovals(ctx, fsys, ApprovalsDir)
	if err != nil {
		return fmt.Errorf("check the records: %w", err)
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("the record would be refused: %w", err)
	}
	for _, d := range drafts {
		i := slices.IndexFunc(res.Approvals, func(a spec.Approval) bool { return a.File == d.File })
		if i < 0 {
			return fmt.Errorf("%s does not read back as written", d.File)
		}
		a := res.Approvals[i]
		if a.Version != 1 || a.Kind != spec.KindApproval || (approval.Draft{Record: record(a), Comment: a.Comment}) != d {
			return fmt.Errorf("%s does not read back as written", d.File)
		}
	}
	return nil
}
