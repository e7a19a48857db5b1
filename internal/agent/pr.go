package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
)

// openPullRequests commits the changes of every successful repository on
// the task's branch and opens a pull request through the forge.
// Repositories without changes stay skipped; a report-mode run never gets
// here.
func (r *runner) openPullRequests(ctx context.Context) error {
	pr := r.m.PullRequest
	branch := protocol.BranchName(pr.BranchPrefix, r.m.TaskID)
	message := pr.Title
	if strings.TrimSpace(pr.Body) != "" {
		message += "\n\n" + pr.Body
	}
	author := git.Identity{Name: r.m.GitConfig.UserName, Email: r.m.GitConfig.UserEmail}
	var todo []*unit
	for _, u := range r.units {
		if !u.broken && u.res.Status == "success" && len(u.res.Diffs) > 0 {
			todo = append(todo, u)
		}
	}
	// Each repository's push and pull request are round trips to the
	// forge: a group's go Manifest.Parallel at once.
	r.each(ctx, todo, func(u *unit) {
		r.setStep("pushing", fmt.Sprintf("pushing %s to %s", branch, u.repo.Name))
		info, err := r.openPullRequest(ctx, u, branch, message, author)
		if ctx.Err() != nil {
			return
		}
		r.resultMu.Lock()
		switch {
		case errors.Is(err, git.ErrNoChanges):
			u.res.Status = "skipped"
		case err != nil:
			u.res.Status = "failed"
			u.res.Error = r.redact(err.Error())
		default:
			u.res.PullRequest = info
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

func (r *runner) openPullRequest(ctx context.Context, u *unit, branch, message string, author git.Identity) (*protocol.PullRequestInfo, error) {
	if err := r.intact(u); err != nil {
		return nil, err
	}
	// The commit is of the tree collected: what the result showed, and
	// what an approval approved.
	commit, err := r.g.CommitTree(ctx, u.dir, git.TreeCommit{Tree: u.tree, Parent: u.base, Message: message, Author: author})
	if err != nil {
		return nil, fmt.Errorf("commit on %s: %w", branch, err)
	}
	pr := r.m.PullRequest
	got, err := r.forge.CreatePullRequest(ctx, forge.PullRequestRequest{
		Repository: u.repo.URL,
		Dir:        u.dir,
		Base:       u.baseBranch,
		Head:       branch,
		Commit:     commit,
		Title:      pr.Title,
		Body:       pr.Body,
		Labels:     pr.Labels,
		Reviewers:  pr.Reviewers,
		Draft:      pr.Draft,
	})
	if err != nil {
		return nil, fmt.Errorf("open pull request for %s: %w", branch, err)
	}
	tree := u.tree
	if got.Commit != "" && got.Commit != commit {
		// The forge proposes a commit other than the one made here: say
		// its tree (none when unknown), which the worker compares with
		// the approved one.
		tree = ""
		if out, err := r.g.Run(ctx, u.dir, "rev-parse", "--verify", "--quiet", got.Commit+"^{tree}"); err == nil {
			tree = strings.TrimSpace(out)
		}
		commit = got.Commit
	}
	return &protocol.PullRequestInfo{URL: got.URL, Number: got.Number, Branch: got.Branch, Commit: commit, Tree: tree}, nil
}
