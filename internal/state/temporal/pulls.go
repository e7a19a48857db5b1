package temporal

import (
	"context"
	"errors"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Followed is what the follower of the pull requests of workflow source
// (status.FollowerID) knows: its state while it follows them, its result
// once it ended; nil when there is none (a run recorded before runs were
// followed, or one that opens no pull requests).
func (r *Reader) Followed(ctx context.Context, source string) (*status.PullRequests, error) {
	id := status.FollowerID(source)
	d, err := r.Client.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", id, err)
	}
	var prs status.PullRequests
	switch d.WorkflowExecutionInfo.Status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		v, err := r.ask(ctx, id, "", status.QueryPullRequests)
		if err != nil {
			return nil, fmt.Errorf("query %s (is a worker running?): %w", id, err)
		}
		if err := v.Get(&prs); err != nil {
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		if err := r.Client.GetWorkflow(ctx, id, "").Get(ctx, &prs); err != nil {
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
	default:
		// Terminated or failed: what it knew went with it; the run's
		// own record stands.
		return nil, nil
	}
	return &prs, nil
}

// setFollowers records whose followers follow the pull requests of run
// runID (withPullRequests).
func (r *Reader) setFollowers(runID string, sources []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.followers == nil {
		r.followers = map[string][]string{}
	}
	r.followers[runID] = sources
}

// withPullRequests sets, on each repository of c with a pull request,
// what the followers of its run (or of its pages) last read of it.
func (r *Reader) withPullRequests(ctx context.Context, c *state.Campaign) {
	r.mu.Lock()
	sources := r.followers[c.RunID]
	r.mu.Unlock()
	if len(sources) == 0 || !slices.ContainsFunc(c.Repos, func(p state.Repo) bool { return p.PullRequestURL != "" }) {
		return
	}
	read := r.followedByURL(ctx, sources)
	for i := range c.Repos {
		repo := &c.Repos[i]
		p, ok := read[repo.PullRequestURL]
		if repo.PullRequestURL == "" || !ok {
			continue
		}
		repo.PullRequest = PullRequestOf(p)
		if p.State != "" {
			repo.PullRequestState = state.PullRequestState(p.State)
		}
	}
}

// followedByURL are the pull requests the followers of sources have
// read, by URL. A follower that cannot be read now (no worker answers
// its query) is left out: its pull requests show as their run opened
// them, as a running run's phase stays known when its query goes
// unanswered.
func (r *Reader) followedByURL(ctx context.Context, sources []string) map[string]status.FollowedPR {
	read := make([]*status.PullRequests, len(sources))
	atOnce(len(sources), func(i int) {
		if prs, err := r.Followed(ctx, sources[i]); err == nil {
			read[i] = prs
		}
	})
	out := map[string]status.FollowedPR{}
	for _, prs := range read {
		if prs == nil {
			continue
		}
		for _, p := range prs.PRs {
			if !p.CheckedAt.IsZero() {
				out[p.URL] = p
			}
		}
	}
	return out
}

// PullRequests are the pull requests run opened, each with what its
// follower last read of it; one not read yet is as the run opened it.
func (r *Reader) PullRequests(ctx context.Context, run *status.Run) []status.FollowedPR {
	opened := run.Opened()
	if len(opened) == 0 {
		return nil
	}
	read := r.followedByURL(ctx, run.Followers())
	for i, p := range opened {
		if f, ok := read[p.URL]; ok {
			f.Unit, f.Repo, f.PullRequestInfo = p.Unit, p.Repo, p.PullRequestInfo
			opened[i] = f
		}
	}
	return opened
}

// PullRequestOf is the state's record of followed pull request p.
func PullRequestOf(p status.FollowedPR) *state.PullRequestStatus {
	out := &state.PullRequestStatus{
		Number: p.Number, Draft: p.Draft, Head: p.Head, Base: p.Base, Mergeable: p.Mergeable, Review: p.Review,
		Checks: p.Checks, FailedChecks: p.FailedChecks, Labels: p.Labels, Foreign: p.Foreign, CheckedAt: p.CheckedAt, Error: p.Error,
		Done: p.Done, DoneNote: p.DoneNote, Reopened: p.Reopened(),
	}
	if p.State == forge.StateMerged || p.State == forge.StateClosed {
		// What no longer decides anything.
		out.Mergeable, out.Review, out.Checks, out.FailedChecks, out.Foreign = "", "", "", nil, false
	}
	return out
}
