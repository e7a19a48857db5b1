package github

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
)

var _ forge.Lander = (*Forge)(nil)

// closeMarker starts the comment ClosePullRequestAs leaves, so that a
// retried close edits it rather than commenting twice.
const closeMarker = "<!-- fleetlift:closed -->"

// MergePullRequest merges pull request pr.Number as o says, provided its
// head is still o.Head (when set). A merge whose answer was lost, sent
// again, finds the pull request merged and succeeds.
func (f *Forge) MergePullRequest(ctx context.Context, pr forge.PullRequestRef, o forge.MergeOptions) error {
	r, err := f.repository(pr.Repository)
	if err != nil {
		return err
	}
	method := o.Method
	if method == "" {
		method = forge.MergeCommit
	}
	if f.dialect.MergePull != nil {
		err = f.dialect.MergePull(ctx, f.api, r.owner, r.name, pr.Number, method, o.Head, o.DeleteBranch)
	} else {
		body := map[string]string{"merge_method": method}
		if o.Head != "" {
			body["sha"] = o.Head
		}
		_, err = f.api.Do(ctx, http.MethodPut, r.path("pulls", strconv.Itoa(pr.Number), "merge"), body, nil)
	}
	if err != nil {
		var p pull
		if _, gerr := f.api.Do(ctx, http.MethodGet, r.path("pulls", strconv.Itoa(pr.Number)), nil, &p); gerr == nil && p.state() == forge.StateMerged {
			// Merged by the attempt whose answer was lost, or by
			// someone else meanwhile: merged either way.
			err = nil
		} else {
			switch statusOf(err) {
			case http.StatusMethodNotAllowed, http.StatusUnprocessableEntity:
				err = fmt.Errorf("%w: %w", forge.ErrNotMergeable, err)
			case http.StatusConflict:
				err = fmt.Errorf("%w: %w", forge.ErrHeadMoved, err)
			}
			return f.fail(err, "merge pull request %d of %s", pr.Number, r)
		}
	}
	f.log.Info("merged pull request", "forge", f.name, "repository", r.String(), "number", pr.Number, "method", method)
	if o.DeleteBranch && f.dialect.MergePull == nil {
		return f.deleteBranch(ctx, r, pr.Branch)
	}
	return nil
}

// ClosePullRequestAs comments comment on pull request pr.Number (one
// comment however often it is called), closes it and deletes its branch
// when deleteBranch is set.
func (f *Forge) ClosePullRequestAs(ctx context.Context, pr forge.PullRequestRef, comment string, deleteBranch bool) error {
	if comment != "" {
		if err := f.UpsertComment(ctx, pr.Repository, pr.Number, closeMarker, closeMarker+"\n"+comment); err != nil {
			return err
		}
	}
	if err := f.ClosePullRequest(ctx, pr.Repository, pr.Number); err != nil {
		return err
	}
	if !deleteBranch {
		return nil
	}
	r, err := f.repository(pr.Repository)
	if err != nil {
		return err
	}
	return f.deleteBranch(ctx, r, pr.Branch)
}

// deleteBranch deletes branch of r; one already gone is deleted.
func (f *Forge) deleteBranch(ctx context.Context, r ownerRepo, branch string) error {
	if err := git.CheckBranch(branch); err != nil {
		return err
	}
	path := r.path(append([]string{"git", "refs", "heads"}, strings.Split(branch, "/")...)...)
	if f.dialect.BranchPath != nil {
		path = f.dialect.BranchPath(r.owner, r.name, branch)
	}
	// Deleting what is gone changes nothing: safe to send again.
	if _, err := f.api.Do(Idempotent(ctx), http.MethodDelete, path, nil, nil); err != nil && !IsNotFound(err) && statusOf(err) != http.StatusUnprocessableEntity {
		return f.fail(err, "delete branch %s of %s", branch, r)
	}
	f.log.Info("deleted branch", "forge", f.name, "repository", r.String(), "branch", branch)
	return nil
}
