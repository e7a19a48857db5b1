package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
)

// leaveChanges leaves the change of every successful repository for the
// worker to propose (protocol.BundleFile): a commit of the tree collected
// on the commit cloned. The agent holds no forge credentials and pushes
// nothing; the worker checks each bundle against what was approved and
// makes the commit, the push and the pull request itself. Repositories
// without changes stay as they are; a report-mode run never gets here.
func (r *runner) leaveChanges(ctx context.Context) error {
	message := r.m.PullRequest.CommitMessage()
	author := git.Identity{Name: r.m.GitConfig.UserName, Email: r.m.GitConfig.UserEmail}
	var todo []*unit
	for _, u := range r.units {
		if !u.broken && u.res.Status == "success" && len(u.res.Diffs) > 0 {
			todo = append(todo, u)
		}
	}
	r.each(ctx, todo, func(u *unit) {
		r.setStep("collecting", "leaving the change in "+u.repo.Name+" for the worker")
		err := r.leaveChange(ctx, u, message, author)
		if ctx.Err() != nil {
			return
		}
		r.resultMu.Lock()
		if err != nil {
			u.res.Status = "failed"
			u.res.Error = r.redact(err.Error())
		} else {
			u.res.Base = u.base
		}
		r.resultMu.Unlock()
		r.progressed(1)
		r.writeResultQuietly()
	})
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// leaveChange writes u's bundle: the tree collected (what the result
// showed, and what an approval approved) committed on u.base.
func (r *runner) leaveChange(ctx context.Context, u *unit, message string, author git.Identity) error {
	if err := r.intact(u); err != nil {
		return err
	}
	commit, err := r.g.CommitTree(ctx, u.dir, git.TreeCommit{Tree: u.tree, Parent: u.base, Message: message, Author: author})
	if err != nil {
		return fmt.Errorf("commit the change: %w", err)
	}
	dest := filepath.Join(r.ws, protocol.Dir, protocol.BundleFile(u.repo.Name))
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return fmt.Errorf("leave the change: %w", err)
	}
	// Written beside and renamed: the worker never reads half a bundle.
	tmp := dest + ".tmp"
	if err := r.g.Bundle(ctx, u.dir, tmp, protocol.BundleRef, commit, u.base); err != nil {
		return fmt.Errorf("bundle the change: %w", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("leave the change: %w", err)
	}
	return nil
}
