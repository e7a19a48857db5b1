package plan_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/plan/render"
	"github.com/fleetlift/fleetlift/internal/state"
)

// TestRegressedRepositoriesAreReopened: a campaign unchanged in Git
// whose merged repositories no longer pass done_when is reopened, unit
// by unit (a group's repository reopens its group), once per
// regression; a run paused or aborted, a task, and what merely is not
// done yet are left alone.
func TestRegressedRepositoriesAreReopened(t *testing.T) {
	fs := files{
		"a.yaml": camp{id: "flat", repos: []string{"payments", "ledger", "search"}}.yaml(),
		"b.yaml": camp{id: "grouped", groups: map[string][]string{"team-a": {"api", "web"}}}.yaml(),
		"c.yaml": camp{id: "paused", repos: []string{"payments"}}.yaml(),
		"d.yaml": task("single", "Migrate.", "payments"),
	}
	rec := applied(t, fs)
	merged := func(name, done string, reopened bool) state.Repo {
		return state.Repo{Name: name, Status: state.RepoCompleted, PullRequestURL: "https://git.example/" + name + "/pulls/1",
			PullRequestState: state.PullRequestMerged, PullRequest: &state.PullRequestStatus{Done: done, Reopened: reopened}}
	}
	for i := range rec {
		r := &rec[i]
		r.Phase = state.PhaseCompleted
		switch r.ID {
		case "flat":
			r.Repos = []state.Repo{merged("ledger", "regressed", false), merged("payments", "regressed", true), merged("search", "not_done", false)}
		case "grouped":
			r.Phase = state.PhaseRunning
			r.Repos = []state.Repo{merged("team-a/api", "regressed", false), merged("team-a/web", "regressed", false)}
		case "paused":
			r.Phase = state.PhasePaused
			r.Repos = []state.Repo{merged("payments", "regressed", false)}
		case "single":
			r.Repos = []state.Repo{merged("payments", "regressed", false)}
		}
	}
	p := plan.Compute(load(t, fs), rec, plan.Policy{})
	got := map[string]plan.Change{}
	for _, c := range p.Changes {
		got[c.ID] = c
	}
	if c := got["flat"]; c.Action != plan.Reopen || !slices.Equal(c.Reopen, []string{"ledger"}) {
		t.Errorf("flat: %s %v, want reopen [ledger] (payments reopened already, search never done)", c.Action, c.Reopen)
	}
	if c := got["grouped"]; c.Action != plan.Reopen || !slices.Equal(c.Reopen, []string{"team-a"}) {
		t.Errorf("grouped: %s %v, want reopen [team-a]", c.Action, c.Reopen)
	}
	for _, id := range []string{"paused", "single"} {
		if c := got[id]; c.Action != plan.Unchanged {
			t.Errorf("%s: %s, want unchanged", id, c.Action)
		}
	}
	if s := p.Summary(); s.Reopen != 2 || !p.HasChanges() {
		t.Errorf("summary %+v, has changes %v", s, p.HasChanges())
	}
	var b bytes.Buffer
	if err := render.Human(&b, p, render.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"flat will be reopened", "done_when no longer passes on the default branch of ledger",
		"Plan: 0 to create, 0 to update, 2 to reopen, 0 to prune, 0 orphaned."} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
}
