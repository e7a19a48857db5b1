package plan_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/plan/render"
	"github.com/fleetlift/fleetlift/internal/state"
)

// TestPlanOfACampaignThatEndedWithFailures: a campaign recorded as
// completed_with_failures has finished. Its plan shows the phase; the
// same spec starts nothing (a person retries its failed repositories);
// a new spec runs it again, whatever its update policy, as for any
// finished run; and it has nothing to continue or abort.
func TestPlanOfACampaignThatEndedWithFailures(t *testing.T) {
	before := files{"campaigns/slog.yaml": slogRollout.yaml()}
	cases := []struct {
		name     string
		after    files
		action   plan.Action
		headline string
	}{
		{"no change", before, plan.Unchanged, ""},
		{"new spec, updated in place", files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.prompt = "x" }).yaml()},
			plan.Update, "~ slog-rollout will run again\n      Campaign from campaigns/slog.yaml (completed_with_failures): its run has ended; a new run starts with the new spec, in every repository"},
		{"new spec, restart", files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.prompt, c.update = "x", "restart" }).yaml()},
			plan.Update, "~ slog-rollout will run again\n      Campaign from campaigns/slog.yaml (completed_with_failures): its run has ended; a new run starts with the new spec, in every repository"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recorded := applied(t, before)
			recorded[0].Phase = state.PhaseCompletedWithFailures
			recorded[0].Message = "1 of 3 repositories failed, 2 completed"
			recorded[0].Repos = []state.Repo{{Name: "ledger", Status: state.RepoCompleted},
				{Name: "payments", Status: state.RepoFailed}, {Name: "search", Status: state.RepoCompleted}}
			desired := load(t, c.after)
			desired.Approvals = []approval.Record{
				{File: "approvals/continue.yaml", Target: "slog-rollout", Generation: 1, By: "alice", Action: approval.Continue},
				{File: "approvals/abort.yaml", Target: "slog-rollout", Generation: 1, By: "alice", Action: approval.Abort},
			}
			p := plan.Compute(desired, recorded, plan.Policy{})
			ch := p.Changes[0]
			if ch.Action != c.action || ch.Phase != state.PhaseCompletedWithFailures || !ch.Phase.Done() {
				t.Errorf("change: %s, phase %s (done %t); want %s, completed_with_failures, done", ch.Action, ch.Phase, ch.Phase.Done(), c.action)
			}
			reasons := map[string]string{}
			for _, a := range p.Approvals {
				reasons[a.Record.File] = string(a.Status) + ": " + a.Reason
			}
			if got := reasons["approvals/continue.yaml"]; got != "ignored: nothing to continue: slog-rollout is completed_with_failures, not paused" {
				t.Errorf("continue: %s", got)
			}
			if got := reasons["approvals/abort.yaml"]; got != "ignored: nothing to abort: slog-rollout is completed_with_failures" {
				t.Errorf("abort: %s", got)
			}
			var b bytes.Buffer
			if err := render.Human(&b, p, render.Options{}); err != nil {
				t.Fatal(err)
			}
			if c.headline != "" && !strings.Contains(b.String(), c.headline) {
				t.Errorf("plan lacks %q:\n%s", c.headline, b.String())
			}
		})
	}
}
