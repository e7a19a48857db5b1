package github

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/fleetlift/fleetlift/internal/forge"
)

var _ forge.Follower = (*Forge)(nil)

// maxFailedChecks bounds PullRequestStatus.FailedChecks.
const maxFailedChecks = 5

// PullRequestStatus reads pull request number of repository: its state,
// the review decision of its reviews, its head commit's commit statuses
// and (on GitHub) check runs together, and whether it merges. branch is
// not needed: the number names it.
func (f *Forge) PullRequestStatus(ctx context.Context, repository string, number int, branch string) (*forge.PullRequestStatus, error) {
	r, err := f.repository(repository)
	if err != nil {
		return nil, err
	}
	var p pull
	if _, err := f.api.Do(ctx, http.MethodGet, r.path("pulls", strconv.Itoa(number)), nil, &p); err != nil {
		return nil, f.fail(err, "read pull request %d of %s", number, r)
	}
	st := &forge.PullRequestStatus{
		State: p.state(), Draft: p.Draft, Head: p.Head.SHA, Base: p.Base.Ref, BaseSHA: p.Base.SHA, Labels: p.labelNames(),
	}
	if f.dialect.DraftTitle != nil && f.dialect.DraftTitle(p.Title) == p.Title {
		// Gitea marks a draft by its title's prefix.
		st.Draft = true
	}
	if st.State != forge.StateOpen {
		// What merged or closed no longer waits for reviews or checks.
		return st, nil
	}
	st.Mergeable = p.mergeability()
	reviews, err := f.listReviews(ctx, r, number)
	if err != nil {
		return nil, f.fail(err, "list reviews of pull request %d of %s", number, r)
	}
	st.Review = forge.Decide(reviews)
	if st.Checks, st.FailedChecks, err = f.checks(ctx, r, p.Head.SHA); err != nil {
		return nil, f.fail(err, "read the checks of pull request %d of %s", number, r)
	}
	return st, nil
}

// mergeability is what the forge says of whether p merges.
func (p *pull) mergeability() string {
	switch p.MergeableState {
	case "dirty":
		return forge.MergeableConflict
	case "behind":
		return forge.MergeableBehind
	}
	switch {
	case p.Mergeable == nil:
		return ""
	case !*p.Mergeable:
		return forge.MergeableConflict
	case p.MergeBase != "" && p.Base.SHA != "" && p.MergeBase != p.Base.SHA:
		return forge.MergeableBehind
	}
	return forge.MergeableYes
}

type combinedStatus struct {
	Statuses []struct {
		State string `json:"state"`
		// Status is Gitea's name for State.
		Status  string `json:"status"`
		Context string `json:"context"`
	} `json:"statuses"`
}

type checkRuns struct {
	CheckRuns []struct {
		Name       string `json:"name"`
		Status     string `json:"status"`
		Conclusion string `json:"conclusion"`
	} `json:"check_runs"`
}

// checks is the state of sha's commit statuses and check runs together,
// with the names of those that failed.
func (f *Forge) checks(ctx context.Context, r ownerRepo, sha string) (string, []string, error) {
	if sha == "" {
		return "", nil, nil
	}
	var states, failed []string
	add := func(name, state string) {
		states = append(states, state)
		if forge.CombineChecks(state) == forge.StatusFailure && len(failed) < maxFailedChecks {
			failed = append(failed, name)
		}
	}
	var cs combinedStatus
	if _, err := f.api.Do(ctx, http.MethodGet, r.path("commits", sha, "status"), nil, &cs); err != nil && !IsNotFound(err) {
		return "", nil, err
	}
	for _, s := range cs.Statuses {
		add(s.Context, strings.ToLower(cmp.Or(s.State, s.Status)))
	}
	if !f.dialect.NoCheckRuns {
		var runs checkRuns
		if _, err := f.api.Do(ctx, http.MethodGet, r.path("commits", sha, "check-runs")+"?per_page=100", nil, &runs); err != nil && !IsNotFound(err) {
			return "", nil, err
		}
		for _, c := range runs.CheckRuns {
			add(c.Name, checkRunState(c.Status, c.Conclusion))
		}
	}
	return forge.CombineChecks(states...), failed, nil
}

// checkRunState is a check run's status and conclusion as a commit
// status state.
func checkRunState(status, conclusion string) string {
	if status != "completed" {
		return forge.StatusPending
	}
	switch conclusion {
	case "success", "neutral", "skipped":
		return forge.StatusSuccess
	}
	return forge.StatusFailure
}
