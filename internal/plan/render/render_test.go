package render_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/plan/render"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	d0 = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func repos(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%02d", prefix, i))
	}
	return out
}

// everything is a plan with every kind of change, approval and error.
func everything() plan.Plan {
	return plan.Plan{
		Changes: []plan.Change{
			{ID: "auth-audit", Kind: spec.KindCampaign, Action: plan.Create, File: "campaigns/auth-audit.yaml", NewDigest: d1,
				Repositories: plan.RepoDiff{Added: []string{"billing", "ledger", "payments"}}},
			{ID: "broken", Kind: spec.KindCampaign, Action: plan.Unknown, File: "campaigns/broken.yaml", OldDigest: d1, Phase: state.PhaseRunning,
				Reason: "its definition file campaigns/broken.yaml is invalid; the run is left as it is"},
			{ID: "fleet-scan", Kind: spec.KindCampaign, Action: plan.Create, File: "campaigns/fleet-scan.cue", NewDigest: d1,
				Repositories: plan.RepoDiff{Added: repos("svc", 25)}},
			{ID: "go-bump", Kind: spec.KindTask, Action: plan.Update, File: "campaigns/go-bump.yaml", OldDigest: d1, NewDigest: d2,
				Strategy: spec.UpdateRestart, Phase: state.PhaseRunning, FieldsKnown: true,
				Fields: []plan.FieldDiff{{Path: "execution.deterministic.args", Old: raw(`["1.25"]`), New: raw(`["1.26"]`)}}},
			{ID: "legacy", Kind: spec.KindCampaign, Action: plan.Orphaned, File: "campaigns/legacy.yaml", OldDigest: d1, Phase: state.PhaseCompleted,
				Reason: "removed from Git; not pruned: the repository config does not allow pruning"},
			{ID: "log4j", Kind: spec.KindCampaign, Action: plan.Update, File: "campaigns/log4j.yaml", OldDigest: d1, NewDigest: d2,
				Strategy: spec.UpdateInPlace, Phase: state.PhasePaused,
				Repositories: plan.RepoDiff{Added: []string{"search"}}},
			{ID: "moved", Kind: spec.KindCampaign, Action: plan.Unchanged, File: "campaigns/team/moved.yaml", PreviousFile: "campaigns/moved.yaml",
				OldDigest: d1, NewDigest: d1, Phase: state.PhaseRunning},
			{ID: "old-report", Kind: spec.KindCampaign, Action: plan.Prune, File: "campaigns/old-report.yaml", OldDigest: d1, Phase: state.PhaseRunning},
			{ID: "quiet", Kind: spec.KindCampaign, Action: plan.Create, File: "campaigns/quiet.yaml", NewDigest: d1, Suspend: true,
				Repositories: plan.RepoDiff{Added: []string{"payments"}}},
			{ID: "resume-me", Kind: spec.KindCampaign, Action: plan.Resume, File: "campaigns/resume-me.yaml", OldDigest: d1, NewDigest: d2,
				Strategy: spec.UpdateInPlace, Phase: state.PhaseSuspended, FieldsKnown: true,
				Fields: []plan.FieldDiff{{Path: "suspend", Old: raw(`true`)}}},
			{ID: "slog-rollout", Kind: spec.KindCampaign, Action: plan.Update, File: "campaigns/slog-rollout.cue", OldDigest: d1, NewDigest: d2,
				Strategy: spec.UpdateInPlace, Phase: state.PhaseAwaitingApproval, FieldsKnown: true,
				Fields: []plan.FieldDiff{
					{Path: "repositories[ledger].branch", Old: raw(`"release/2025"`), New: raw(`"main"`)},
					{Path: "template.execution.agentic.prompt",
						Old: raw(`"Migrate this repository from the standard library log package to log/slog.\n- Replace log.Printf with slog calls at the right level.\n- Keep behaviour identical."`),
						New: raw(`"Migrate this repository from the standard library log package to log/slog.\n- Replace log.Printf with slog calls at the right level (Debug, Info, Warn, Error).\n- Keep behaviour identical."`)},
					{Path: "template.pull_request.labels", Old: raw(`["automated"]`), New: raw(`["automated","logging"]`)},
					{Path: "template.sandbox", New: raw(`{"resources":{"limits":{"cpu":"2","memory":"4Gi"}}}`)},
				},
				Repositories: plan.RepoDiff{Added: []string{"billing", "checkout"}, Removed: []string{"search"}}},
			{ID: "stable", Kind: spec.KindCampaign, Action: plan.Unchanged, File: "campaigns/stable.yaml", OldDigest: d1, NewDigest: d1, Phase: state.PhaseRunning},
			{ID: "suspend-me", Kind: spec.KindCampaign, Action: plan.Suspend, File: "campaigns/suspend-me.yaml", OldDigest: d1, NewDigest: d2,
				Strategy: spec.UpdateInPlace, Suspend: true, Phase: state.PhaseRunning, FieldsKnown: true,
				Fields: []plan.FieldDiff{{Path: "suspend", New: raw(`true`)}}},
			{ID: "tls-upgrade", Kind: spec.KindCampaign, Action: plan.Update, File: "campaigns/tls-upgrade.yaml", OldDigest: d1, NewDigest: d2,
				Strategy: spec.UpdateInPlace, Phase: state.PhaseCompletedWithFailures, FieldsKnown: true,
				Fields: []plan.FieldDiff{{Path: "template.execution.deterministic.args", Old: raw(`["1.2"]`), New: raw(`["1.3"]`)}}},
		},
		Approvals: []plan.ApprovalChange{
			{Record: approval.Record{File: "approvals/payments.yaml", Target: "slog-rollout/payments", ResultDigest: d2, By: "alice", Action: approval.Approve},
				Status: plan.ApprovalApply, Current: d2},
			{Record: approval.Record{File: "approvals/payments-old.yaml", Target: "slog-rollout/payments", ResultDigest: d0, By: "bob", Action: approval.Approve},
				Status: plan.ApprovalIgnored, Current: d2, Reason: "result changed since approved: digest sha256:000000000000, now sha256:222222222222"},
			{Record: approval.Record{File: "approvals/search.yaml", Target: "slog-rollout/search", ResultDigest: d1, By: "carol", Action: approval.Steer,
				Prompt: "Use <slog.Attr> values | keep the\nold messages."},
				Status: plan.ApprovalIgnored, Reason: "nothing awaits approval for slog-rollout/search"},
		},
		Errors: []*spec.Error{
			{File: "campaigns/broken.yaml", Line: 4, Column: 8, Field: "template.mode", Msg: `must be "transform" or "report"`},
		},
	}
}

// noChange is a plan where Git and the recorded state agree.
func noChange() plan.Plan {
	return plan.Plan{Changes: []plan.Change{
		{ID: "slog-rollout", Kind: spec.KindCampaign, Action: plan.Unchanged, File: "campaigns/slog-rollout.cue", OldDigest: d1, NewDigest: d1, Phase: state.PhaseRunning},
		{ID: "stable", Kind: spec.KindCampaign, Action: plan.Unchanged, File: "campaigns/stable.yaml", OldDigest: d1, NewDigest: d1, Phase: state.PhaseCompleted},
	}}
}

// removed is a plan where a campaign was deleted from Git.
func removed() plan.Plan {
	return plan.Plan{Changes: []plan.Change{
		{ID: "slog-rollout", Kind: spec.KindCampaign, Action: plan.Orphaned, File: "campaigns/slog-rollout.cue", OldDigest: d1, Phase: state.PhaseRunning,
			Reason: "removed from Git; not pruned: it was applied with sync_policy.prune false"},
	}}
}

func TestGolden(t *testing.T) {
	plans := map[string]plan.Plan{"everything": everything(), "no-change": noChange(), "removed": removed()}
	views := map[string]func(*bytes.Buffer, plan.Plan) error{
		"human.txt":       func(b *bytes.Buffer, p plan.Plan) error { return render.Human(b, p, render.Options{}) },
		"human-color.txt": func(b *bytes.Buffer, p plan.Plan) error { return render.Human(b, p, render.Options{Color: true}) },
		"json":            func(b *bytes.Buffer, p plan.Plan) error { return render.JSON(b, p) },
		"md":              func(b *bytes.Buffer, p plan.Plan) error { return render.Markdown(b, p) },
	}
	for pname, p := range plans {
		for vname, view := range views {
			name := pname + "." + vname
			t.Run(name, func(t *testing.T) {
				var b bytes.Buffer
				if err := view(&b, p); err != nil {
					t.Fatal(err)
				}
				golden(t, name, b.Bytes())
			})
		}
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", name, path, got)
	}
}

func TestSummaryLine(t *testing.T) {
	cases := []struct {
		name string
		p    plan.Plan
		want string
	}{
		{"no change", noChange(), "No changes."},
		{"nothing at all", plan.Plan{}, "No changes."},
		{"removed", removed(), "Plan: 0 to create, 0 to update, 0 to prune, 1 orphaned."},
		{"everything", everything(), "Plan: 3 to create, 6 to update, 1 to prune, 1 orphaned."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := render.SummaryLine(c.p); got != c.want {
				t.Errorf("SummaryLine = %q, want %q", got, c.want)
			}
			var b bytes.Buffer
			if err := render.Human(&b, c.p, render.Options{}); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			if last := lines[len(lines)-1]; last != c.want {
				t.Errorf("human output ends %q, want %q", last, c.want)
			}
		})
	}
}

func TestNoColorWithoutOption(t *testing.T) {
	var b bytes.Buffer
	if err := render.Human(&b, everything(), render.Options{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "\x1b[") {
		t.Error("Human without Color wrote ANSI escapes")
	}
	b.Reset()
	if err := render.Human(&b, everything(), render.Options{Color: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\x1b[32m+\x1b[0m") {
		t.Error("Human with Color did not colour the create symbol")
	}
}

// TestJSONStable: the JSON view is valid, versioned, and lists are never
// null.
func TestJSONStable(t *testing.T) {
	for name, p := range map[string]plan.Plan{"empty": {}, "everything": everything()} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := render.JSON(&b, p); err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			if doc["format_version"] != float64(1) {
				t.Errorf("format_version = %v, want 1", doc["format_version"])
			}
			for _, k := range []string{"campaigns", "approvals", "errors"} {
				if _, ok := doc[k].([]any); !ok {
					t.Errorf("%s = %v, want a list", k, doc[k])
				}
			}
		})
	}
}

func TestMarkdownEscapes(t *testing.T) {
	p := plan.Plan{
		Changes: []plan.Change{{ID: "x", Kind: spec.KindCampaign, Action: plan.Create, File: "campaigns/a|b`c.yaml",
			Repositories: plan.RepoDiff{Added: []string{"r"}}}},
		Errors: []*spec.Error{{File: "campaigns/<script>.yaml", Msg: "bad *thing* | here"}},
	}
	var b bytes.Buffer
	if err := render.Markdown(&b, p); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| `+` | `x` | Campaign | create | ``campaigns/a\\|b`c.yaml`` |",
		"- `campaigns/<script>.yaml`: bad \\*thing\\* | here",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}

// TestRestartWithoutRecordedRun: with nothing recorded (plan --base and
// --state none), a restarting update says what happens to a run of the
// old spec, not that "its run" is running.
func TestRestartWithoutRecordedRun(t *testing.T) {
	p := plan.Plan{Changes: []plan.Change{{ID: "beta", Kind: "Campaign", File: "campaigns/beta.yaml", Action: plan.Update, Strategy: "restart"}}}
	var b bytes.Buffer
	if err := render.Human(&b, p, render.Options{}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "a run of the old spec is cancelled and started again") || strings.Contains(out, "its run") || strings.Contains(out, "(running)") {
		t.Errorf("human output:\n%s", out)
	}
}

// TestApprovalCarriedOut: a record the run has carried out is shown as
// done, counted apart from ignored ones, and is no change.
func TestApprovalCarriedOut(t *testing.T) {
	p := plan.Plan{Approvals: []plan.ApprovalChange{{
		Record: approval.Record{File: "approvals/ledger.yaml", Target: "go-bump/ledger", Action: approval.Approve, By: "robin"},
		Status: plan.ApprovalDone, Reason: "carried out by the current run",
	}}}
	if p.HasChanges() || !p.Empty() {
		t.Errorf("a carried-out record: HasChanges %t, Empty %t; want no change and nothing to show", p.HasChanges(), p.Empty())
	}
	var h, m bytes.Buffer
	if err := render.Human(&h, p, render.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := render.Markdown(&m, p); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"human": h.String(), "markdown": m.String()} {
		if !strings.Contains(out, "done: carried out by the current run") || strings.Contains(out, "ignored:") {
			t.Errorf("%s output:\n%s", name, out)
		}
	}
}

// TestAssumedRecordedState: a plan computed without the recorded state it
// was meant to read says what it assumed in every view; one that read it
// says nothing more than where it came from.
func TestAssumedRecordedState(t *testing.T) {
	assumed := noChange()
	assumed.Recorded = plan.Recorded{Source: "none", Assumed: "no recorded state (Temporal at 127.0.0.1:7233 cannot be reached: refused); the definitions at main count as applied, and no run's phase is known."}
	read := noChange()
	read.Recorded = plan.Recorded{Source: "temporal"}
	for name, view := range map[string]func(*bytes.Buffer, plan.Plan) error{
		"human":    func(b *bytes.Buffer, p plan.Plan) error { return render.Human(b, p, render.Options{}) },
		"markdown": func(b *bytes.Buffer, p plan.Plan) error { return render.Markdown(b, p) },
		"json":     func(b *bytes.Buffer, p plan.Plan) error { return render.JSON(b, p) },
	} {
		t.Run(name, func(t *testing.T) {
			var a, r bytes.Buffer
			if err := view(&a, assumed); err != nil {
				t.Fatal(err)
			}
			if err := view(&r, read); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(a.String(), "the definitions at main count as applied") {
				t.Errorf("the plan does not say what it assumed:\n%s", a.String())
			}
			if strings.Contains(r.String(), "Assumed") || strings.Contains(r.String(), "assumed") {
				t.Errorf("a plan that read the recorded state claims an assumption:\n%s", r.String())
			}
		})
	}
	var b bytes.Buffer
	if err := render.JSON(&b, assumed); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Recorded struct{ Source, Assumed string } `json:"recorded_state"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || doc.Recorded.Source != "none" || doc.Recorded.Assumed == "" {
		t.Errorf("json recorded_state: %+v %v", doc.Recorded, err)
	}
}

// TestPlanSaysHowPullRequestsMerge: a definition that declares
// pull_request.merge says so in every view of the plan.
func TestPlanSaysHowPullRequestsMerge(t *testing.T) {
	p := plan.Plan{Changes: []plan.Change{{ID: "slog", Kind: spec.KindCampaign, Action: plan.Create, File: "campaigns/slog.yaml", NewDigest: d1,
		Repositories: plan.RepoDiff{Added: []string{"billing"}},
		Merge:        &spec.Merge{Method: "squash", RequireReview: true, After: spec.Duration(time.Hour), DeleteBranch: true},
		KeepCurrent:  spec.KeepCurrentConflicted},
		{ID: "tls", Kind: spec.KindCampaign, Action: plan.Prune, File: "campaigns/tls.yaml", OldDigest: d1, Phase: state.PhaseCompleted,
			Closes: &plan.Close{Open: 3, Comment: "Withdrawn.", DeleteBranch: true}}}}
	want := "merge: pull requests are squashed once approved, green and mergeable, 1h0m0s after they are ready; branches deleted"
	wantClose := "pull requests: 3 open, closed by the prune (pull_request.close); branches deleted"
	var h, md, js bytes.Buffer
	if err := render.Human(&h, p, render.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := render.Markdown(&md, p); err != nil {
		t.Fatal(err)
	}
	if err := render.JSON(&js, p); err != nil {
		t.Fatal(err)
	}
	wantKeep := "keep current: a pull request that conflicts with its base has its change made again on it"
	for _, w := range []string{want, wantClose, wantKeep} {
		if !strings.Contains(h.String(), w) || !strings.Contains(md.String(), w) {
			t.Errorf("plan lacks %q:\n%s\n%s", w, h.String(), md.String())
		}
	}
	if !strings.Contains(js.String(), `"closes": {`) {
		t.Errorf("plan -o json lacks what the prune closes:\n%s", js.String())
	}
	if !strings.Contains(js.String(), `"merge": {`) || !strings.Contains(js.String(), `"after": "1h0m0s"`) {
		t.Errorf("plan -o json lacks the merge policy:\n%s", js.String())
	}
	if !strings.Contains(js.String(), `"keep_current": "conflicted"`) {
		t.Errorf("plan -o json lacks keep_current:\n%s", js.String())
	}
}
