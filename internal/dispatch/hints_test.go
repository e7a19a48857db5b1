package dispatch

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
)

// The repositories hinted at reach only the runs with an open pull
// request there, as the last pass recorded them: a merged or closed one,
// or a run of the local forge, takes no hint.
func TestPullRequestHintsFollowOpenPullRequests(t *testing.T) {
	h := NewPullRequestHints(nil, 0, nil)
	h.Observe([]state.Campaign{
		{ID: "slog", Kind: state.KindCampaign, WorkflowID: "campaign/slog", Repos: []state.Repo{
			{Name: "api", PullRequestURL: "https://github.com/Acme/API/pull/3", PullRequestState: state.PullRequestOpen},
			{Name: "web", PullRequestURL: "https://github.com/acme/web/pull/4", PullRequestState: state.PullRequestMerged},
			{Name: "cli", PullRequestURL: "https://github.com/acme/cli/pull/5"},
		}},
		{ID: "bump", Kind: state.KindTask, WorkflowID: "task/bump", Repos: []state.Repo{
			{Name: "api", PullRequestURL: "https://github.com/acme/api/pull/9", PullRequestState: state.PullRequestOpen},
			{Name: "db", PullRequestURL: "https://github.com/acme/db/pull/1", PullRequestState: state.PullRequestClosed},
		}},
		{ID: "local", Kind: state.KindTask, WorkflowID: "task/local", Repos: []state.Repo{
			{Name: "x", PullRequestURL: "file:///srv/x.git#fleetlift/x", PullRequestState: state.PullRequestOpen},
		}},
	})
	for key, want := range map[string]bool{
		"github.com/acme/api": true, "github.com/acme/cli": true,
		"github.com/acme/web": false, "github.com/acme/db": false, "github.com/acme/other": false,
	} {
		if got := h.Followed(key); got != want {
			t.Errorf("Followed(%s) = %v, want %v", key, got, want)
		}
	}
	h.Hint("github.com/acme/api")
	h.Hint("github.com/acme/cli")
	h.Hint("github.com/acme/web")
	got := map[string][]string{}
	for r, keys := range h.pending {
		for k := range keys {
			got[r.workflowID] = append(got[r.workflowID], k)
		}
	}
	if len(got) != 2 || len(got["campaign/slog"]) != 2 || len(got["task/bump"]) != 1 || got["task/bump"][0] != "github.com/acme/api" {
		t.Errorf("hints queued %v, want api and cli for campaign/slog, api for task/bump", got)
	}
	// The next pass's state replaces the last.
	h.Observe(nil)
	if h.Followed("github.com/acme/api") {
		t.Error("a repository is followed after the pass that recorded nothing")
	}
	// A pull request announced before a pass recorded it: the pass that
	// does hands it the hint.
	h.pending = map[run]map[string]bool{}
	select {
	case <-h.wake:
	default:
	}
	if h.Followed("github.com/acme/new") {
		t.Fatal("a repository with no pull request recorded is followed")
	}
	h.Observe([]state.Campaign{{ID: "slog", Kind: state.KindCampaign, WorkflowID: "campaign/slog", Repos: []state.Repo{
		{Name: "new", PullRequestURL: "https://github.com/acme/new/pull/1", PullRequestState: state.PullRequestOpen}}}})
	if keys := h.pending[run{"campaign/slog", true}]; len(keys) != 1 || !keys["github.com/acme/new"] {
		t.Errorf("the pass that recorded the new pull request queued %v, want its repository", h.pending)
	}
	select {
	case <-h.wake:
	default:
		t.Error("the pass that queued a hint did not wake the sender")
	}
}

// A merged pull request whose done_when has run keeps its repository
// followed: a push there is queued for its run, to run the check again.
func TestPullRequestHintsFollowWhatDoneWhenChecks(t *testing.T) {
	h := NewPullRequestHints(nil, 0, nil)
	h.Observe([]state.Campaign{{ID: "slog", Kind: state.KindCampaign, WorkflowID: "campaign/slog", Repos: []state.Repo{
		{Name: "api", PullRequestURL: "https://github.com/acme/api/pull/3", PullRequestState: state.PullRequestMerged,
			PullRequest: &state.PullRequestStatus{Done: state.DoneYes}},
		{Name: "web", PullRequestURL: "https://github.com/acme/web/pull/4", PullRequestState: state.PullRequestMerged},
	}}})
	if !h.Followed("github.com/acme/api") || h.Followed("github.com/acme/web") {
		t.Errorf("followed: api %v, web %v; want api alone (done_when checks it)", h.Followed("github.com/acme/api"), h.Followed("github.com/acme/web"))
	}
	h.Pushed("github.com/acme/api", "main")
	h.Pushed("github.com/acme/web", "main")
	pushes := h.pushes[run{"campaign/slog", true}]
	if len(h.pushes) != 1 || len(pushes) != 1 || !pushes[status.PushHint{Repository: "github.com/acme/api", Branch: "main"}] {
		t.Errorf("pushes queued %v; want api's main for campaign/slog", h.pushes)
	}
}
