package state_test

import (
	"encoding/json"
	"testing"

	"github.com/fleetlift/fleetlift/internal/state"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		c    state.Campaign
		want string
	}{
		{"task", state.Campaign{ID: "t", Kind: state.KindTask}, ""},
		{"campaign with phase and spec", state.Campaign{ID: "c", Kind: state.KindCampaign, Phase: state.PhasePaused, Spec: json.RawMessage(`{}`)}, ""},
		{"no id", state.Campaign{Kind: state.KindTask}, "campaign has no id"},
		{"no kind", state.Campaign{ID: "c"}, `campaign c: kind "" is neither Task nor Campaign`},
		{"unknown phase", state.Campaign{ID: "c", Kind: state.KindTask, Phase: "exploded"}, `campaign c: unknown phase "exploded"`},
		{"spec not JSON", state.Campaign{ID: "c", Kind: state.KindTask, Spec: json.RawMessage(`{`)}, "campaign c: spec is not valid JSON"},
		{"report frontmatter not JSON", state.Campaign{ID: "c", Kind: state.KindTask, Reports: []state.Report{{Repository: "api", Frontmatter: json.RawMessage(`{`)}}},
			"campaign c: the frontmatter of the report on api is not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ""
			if err := c.c.Validate(); err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("Validate() = %q, want %q", got, c.want)
			}
		})
	}
}

func TestPhaseDone(t *testing.T) {
	done := map[state.Phase]bool{
		state.PhasePending: false, state.PhaseRunning: false, state.PhaseAwaitingApproval: false,
		state.PhasePaused: false, state.PhaseSuspended: false,
		state.PhaseCompleted: true, state.PhaseCompletedWithFailures: true, state.PhaseFailed: true, state.PhaseAborted: true,
		state.PhaseCancelled: true,
	}
	for p, want := range done {
		if p.Done() != want || !p.Known() {
			t.Errorf("%s: Done() = %t, Known() = %t; want %t, true", p, p.Done(), p.Known(), want)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	c := state.Campaign{ID: "c", Kind: state.KindCampaign, Spec: json.RawMessage(`{"a":1}`),
		Repos:            []state.Repo{{Name: "r", Status: state.RepoRunning}},
		PendingApprovals: []state.PendingApproval{{Target: "c/r", ResultDigest: "sha256:1"}},
		Reports:          []state.Report{{Repository: "r", Frontmatter: json.RawMessage(`{"a":1}`), ValidationErrors: []string{"/a: x"}}}}
	d := c.Clone()
	d.Spec[2] = 'b'
	d.Repos[0].Status = state.RepoFailed
	d.PendingApprovals[0].ResultDigest = "x"
	d.Reports[0].Frontmatter[2] = 'b'
	d.Reports[0].ValidationErrors[0] = "y"
	if string(c.Spec) != `{"a":1}` || c.Repos[0].Status != state.RepoRunning || c.PendingApprovals[0].ResultDigest != "sha256:1" ||
		string(c.Reports[0].Frontmatter) != `{"a":1}` || c.Reports[0].ValidationErrors[0] != "/a: x" {
		t.Errorf("changing the clone changed the original: %+v", c)
	}
}

func TestPending(t *testing.T) {
	c := state.Campaign{PendingApprovals: []state.PendingApproval{{Target: "c/a", ResultDigest: "sha256:1"}}}
	if p, ok := c.Pending("c/a"); !ok || p.ResultDigest != "sha256:1" {
		t.Errorf("Pending(c/a) = %+v, %t", p, ok)
	}
	if _, ok := c.Pending("c/b"); ok {
		t.Error("Pending(c/b): want nothing")
	}
}

// A definition runs in report mode as its normalised spec says: fleetlift
// reports lists the reports of such runs only.
func TestIsReport(t *testing.T) {
	for spec, want := range map[string]bool{
		`{"kind":"Task","mode":"report"}`:                     true,
		`{"kind":"Task","mode":"transform"}`:                  false,
		`{"kind":"Campaign","template":{"mode":"report"}}`:    true,
		`{"kind":"Campaign","template":{"mode":"transform"}}`: false,
		``: false,
	} {
		if got := state.IsReport(json.RawMessage(spec)); got != want {
			t.Errorf("IsReport(%s) = %t, want %t", spec, got, want)
		}
	}
}
