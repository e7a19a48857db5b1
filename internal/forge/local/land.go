package local

import (
	"context"
	"fmt"
	"strings"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
)

var _ forge.Lander = (*Forge)(nil)

// MergePullRequest merges the branch pr.Branch into the base its record
// names with a merge commit (the local forge has no squash or rebase:
// a branch counts as merged once its commit is on the base), provided
// the branch is still at o.Head when that is set and the base has not
// moved while merging. A branch already on its base is merged.
func (f *Forge) MergePullRequest(ctx context.Context, pr forge.PullRequestRef, o forge.MergeOptions) error {
	if o.Method != "" && o.Method != forge.MergeCommit {
		return fmt.Errorf("merge %s: %w: the local forge merges with a merge commit only, not %s", pr.Branch, forge.ErrNotMergeable, o.Method)
	}
	r, err := f.read(ctx, pr.Repository, pr.Branch)
	if err != nil {
		return err
	}
	defer r.s.Close()
	if r.head == "" {
		return fmt.Errorf("merge %s: %w: the branch is gone", pr.Branch, forge.ErrNotMergeable)
	}
	if o.Head != "" && r.head != o.Head {
		return fmt.Errorf("merge %s: %w: it is at %s, not %s", pr.Branch, forge.ErrHeadMoved, r.head, o.Head)
	}
	merged, err := r.s.IsAncestor(ctx, "refs/head", "refs/base")
	if err != nil {
		return err
	}
	if !merged {
		out, err := r.s.Run(ctx, "merge-tree", "--write-tree", "--no-messages", "refs/base", "refs/head")
		if err != nil {
			if exitStatus(err) == 1 {
				return fmt.Errorf("merge %s into %s: %w: they conflict", pr.Branch, r.rec.Base, forge.ErrNotMergeable)
			}
			return err
		}
		tree := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
		msg := fmt.Sprintf("Merge branch %s\n\n%s\n", pr.Branch, r.rec.Title)
		commit, err := r.s.CommitTree(ctx, tree, msg, f.Author, r.base, r.head)
		if err != nil {
			return err
		}
		// The base moves only from where it was read.
		if err := r.s.Push(ctx, pr.Repository, git.RefUpdate{Src: commit, Dst: "refs/heads/" + r.rec.Base, Lease: true, Expect: r.base}); err != nil {
			return fmt.Errorf("merge %s into %s: %w", pr.Branch, r.rec.Base, err)
		}
	}
	if o.DeleteBranch {
		return f.deleteBranch(ctx, r, pr)
	}
	return nil
}

// ClosePullRequestAs closes pr: on the local forge, deletes its branch
// (a branch gone unmerged is closed), whatever deleteBranch says; there
// are no comments to leave. A branch already gone is closed.
func (f *Forge) ClosePullRequestAs(ctx context.Context, pr forge.PullRequestRef, comment string, deleteBranch bool) error {
	r, err := f.read(ctx, pr.Repository, pr.Branch)
	if err != nil {
		return err
	}
	defer r.s.Close()
	if r.head == "" {
		return nil
	}
	return f.deleteBranch(ctx, r, pr)
}

// deleteBranch deletes pr's branch, provided it is still where r read
// it.
func (f *Forge) deleteBranch(ctx context.Context, r *proposal, pr forge.PullRequestRef) error {
	if r.head == "" {
		return nil
	}
	if err := r.s.Push(ctx, pr.Repository, git.RefUpdate{Dst: "refs/heads/" + pr.Branch, Lease: true, Expect: r.head}); err != nil {
		return fmt.Errorf("delete branch %s: %w", pr.Branch, err)
	}
	return nil
}
