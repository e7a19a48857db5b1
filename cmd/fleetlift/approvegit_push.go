package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/approval/userrepo"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// deliver pushes the commit, proposes it, or says how to push it.
func (d *gitDecision) deliver(ctx context.Context, repo *userrepo.Clone, cfg *spec.Config, dest destination, records []approval.Draft, where string) error {
	watched := "the watched branch"
	if cfg != nil {
		watched = cfg.Watch.Branch
	}
	switch {
	case d.flags.push:
		if err := repo.Push(ctx, dest.remote, dest.ref); err != nil {
			return fmt.Errorf("push %s to %s: %w (the commit is made: bring in what the remote has, e.g. git pull --rebase, and push again)", where, dest.remote, err)
		}
		fmt.Fprintf(d.out, "pushed to %s %s\n", dest.remote, strings.TrimPrefix(dest.ref, "refs/heads/"))
		if cfg != nil && dest.ref != "refs/heads/"+watched {
			d.notef("the reconciler reads records on %s: they apply once they are there", watched)
		}
	case d.flags.pullRequest:
		pr, err := d.propose(ctx, repo, dest, records)
		if err != nil {
			return err
		}
		fmt.Fprintf(d.out, "pull request %s (%s into %s): the records apply once it is merged\n", pr.URL, dest.branch, dest.base)
	default:
		fmt.Fprintf(d.out, "the records apply once they are on %s of the campaigns repository: push them (git -C %s push), or run again with --push or --pull-request\n", watched, repo.Dir())
	}
	return nil
}

// cloneConfig is the repository config in the clone's work tree, or nil
// when there is none or it is invalid, and then why, as a suffix for a
// message.
func cloneConfig(ctx context.Context, repo *userrepo.Clone) (*spec.Config, string) {
	const validate = " (`fleetlift validate` says why)"
	pool, err := spec.NewSelfPool()
	if err != nil {
		return nil, validate
	}
	defer pool.Close()
	cfg, _, problems, err := desired.Config(ctx, &spec.Loader{Eval: pool}, os.DirFS(repo.Dir()))
	switch {
	case err == nil && cfg != nil:
		return cfg, ""
	case err != nil || len(problems) == 0:
		return nil, validate
	}
	return nil, ": " + spec.Errors(problems).Error()
}

// destination is where the commit goes: the remote and ref to push to,
// and for a pull request its branches and forge.
type destination struct {
	remote string
	ref    string
	// For --pull-request:
	url    string
	branch string
	base   string
	forge  forge.Forge
}

// upstream is where --push goes: the current branch's upstream.
func upstream(ctx context.Context, repo *userrepo.Clone) (destination, error) {
	branch, err := repo.CurrentBranch(ctx)
	if err != nil {
		return destination{}, errors.New("--push pushes the current branch, and HEAD is detached: switch to a branch")
	}
	remote := repo.ConfigValue(ctx, "branch."+branch+".remote")
	merge := repo.ConfigValue(ctx, "branch."+branch+".merge")
	if remote == "" || merge == "" || remote == "." {
		return destination{}, fmt.Errorf("--push: branch %s has no upstream on a remote (git branch --set-upstream-to REMOTE/BRANCH)", branch)
	}
	return destination{remote: remote, ref: merge}, nil
}

// proposal is where --pull-request goes: a branch of its own on the
// current branch's remote (else origin), proposed against the watched
// branch on the forge the config selects among the operator's.
func proposal(ctx context.Context, repo *userrepo.Clone, cfg *spec.Config, why string, forges *forgeFlags, drafts []approval.Draft) (destination, error) {
	if cfg == nil {
		return destination{}, fmt.Errorf("--pull-request needs the forge from the campaigns repository's config, and %s has no valid fleetlift.yaml%s", repo.Dir(), why)
	}
	fs, err := forges.setup(cfg)
	if err != nil {
		return destination{}, fmt.Errorf("--pull-request: %w", err)
	}
	if fs.Hub == nil {
		return destination{}, fmt.Errorf("--pull-request needs a forge with pull requests (forge.type github or gitea), and the config says %s: commit to %s with --push", cfg.Forge.Type, cfg.Watch.Branch)
	}
	remote := "origin"
	if b, err := repo.CurrentBranch(ctx); err == nil {
		if r := repo.ConfigValue(ctx, "branch."+b+".remote"); r != "" && r != "." {
			remote = r
		}
	}
	url, err := repo.RemoteURL(ctx, remote)
	if err != nil {
		return destination{}, fmt.Errorf("--pull-request: the campaigns repository's remote: %w", err)
	}
	branch := approval.ProposalBranch(drafts)
	return destination{remote: remote, ref: "refs/heads/" + branch, url: url,
		branch: branch, base: cfg.Watch.Branch, forge: fs.Hub}, nil
}

// propose pushes HEAD to the proposal branch and opens (or finds) its
// pull request.
func (d *gitDecision) propose(ctx context.Context, repo *userrepo.Clone, dest destination, drafts []approval.Draft) (*forge.PullRequest, error) {
	if err := repo.Push(ctx, dest.remote, dest.ref); err != nil {
		return nil, fmt.Errorf("push %s to %s: %w", dest.branch, dest.remote, err)
	}
	var body strings.Builder
	fmt.Fprintf(&body, "Approval records for results awaiting approval, written by `fleetlift %s --git`:\n\n", d.action)
	for _, r := range drafts {
		fmt.Fprintf(&body, "- `%s`: %s `%s` (`%s`) by @%s\n", r.File, r.Action, r.Target, r.ResultDigest, r.By)
	}
	fmt.Fprintf(&body, "\nMerging this into `%s` hands them to the waiting runs. The reconciler credits a record to the commit that brought it onto `%s`, "+
		"and counts it only when that commit is by the record's approver: %s, merge this yourself (or rebase-merge it).\n", dest.base, dest.base, drafts[0].By)
	pr, err := dest.forge.CreatePullRequest(ctx, forge.PullRequestRequest{
		Repository: dest.url, Base: dest.base, Head: dest.branch,
		Title: approval.CommitSubject(drafts), Body: body.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("the branch %s is pushed, but: %w", dest.branch, err)
	}
	return pr, nil
}
