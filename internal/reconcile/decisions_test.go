package reconcile_test

import (
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/state"
)

// TestOldAbortRecordDoesNotAbortNextGeneration: an abort record that
// stopped generation 1 of a campaign stays in Git; the campaign's spec
// changes and generation 2 starts. The record must not abort generation 2
// the moment it is recorded, whether it names generation 1 or (as records
// could before they named runs) no generation at all.
func TestOldAbortRecordDoesNotAbortNextGeneration(t *testing.T) {
	cases := []struct {
		name   string
		record string
		// applies says the record aborts generation 1.
		applies bool
		// why is what the plan says about the record at generation 2; ""
		// when the record is refused as it is read.
		why string
	}{
		{name: "record naming generation 1", applies: true,
			record: "version: 1\nkind: Approval\ntarget: slog\naction: abort\ngeneration: 1\nby: alice\n",
			why:    "names generation 1 of slog, and the recorded run is generation 2: a record decides only about the run it names"},
		{name: "record naming no generation",
			record: "version: 1\nkind: Approval\ntarget: slog\naction: abort\nby: alice\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness()
			cfg := config("main", false)
			first := camp{id: "slog"}.yaml()
			h.src.push(revision(t, "c1", files{"fleetlift.yaml": cfg, "campaigns/slog.yaml": first}))
			h.recordStarts(t, state.PhaseRunning)
			h.once(t)
			h.wantCalls(t, "first revision", "start slog gen=1 rev=c1")

			h.src.push(revision(t, "c2", files{"fleetlift.yaml": cfg, "campaigns/slog.yaml": first, "approvals/abort.yaml": c.record}))
			res := h.once(t)
			if !c.applies {
				h.wantCalls(t, "abort record without a generation")
				if len(res.Plan.Errors) == 0 || !strings.Contains(res.Plan.Errors[0].Error(), "generation") {
					t.Errorf("plan errors %v, want the record refused for naming no generation", res.Plan.Errors)
				}
			} else {
				h.wantCalls(t, "abort record", "decide abort slog (approvals/abort.yaml)")
			}
			// Generation 1 ends aborted (by the record, or by hand).
			gen1 := recorded(t, definition(t, h.r.Source.(*fakeSource).revs["c2"], "slog"), "c1", 1, state.PhaseAborted)
			if c.applies {
				if len(res.Plan.Approvals) != 1 {
					t.Fatalf("plan approvals %+v, want the abort record", res.Plan.Approvals)
				}
				gen1.AppliedApprovals = []string{res.Plan.Approvals[0].Record.ID()}
			}
			h.put(t, gen1)
			h.once(t)
			h.wantCalls(t, "generation 1 aborted")

			// A new spec: generation 2 starts, and the record is still there.
			second := camp{id: "slog", prompt: "Use slog, and keep the log levels."}.yaml()
			h.src.push(revision(t, "c3", files{"fleetlift.yaml": cfg, "campaigns/slog.yaml": second, "approvals/abort.yaml": c.record}))
			h.once(t)
			h.wantCalls(t, "new spec", "start slog gen=2 rev=c3")
			res = h.once(t)
			h.wantCalls(t, "generation 2 running with the old record in Git")
			var got []plan.ApprovalChange
			for _, a := range res.Plan.Approvals {
				if a.Record.Action == approval.Abort {
					got = append(got, a)
				}
			}
			switch {
			case c.why == "" && len(got) != 0:
				t.Errorf("the record was read: %+v", got)
			case c.why != "" && (len(got) != 1 || got[0].Status != plan.ApprovalIgnored || got[0].Reason != c.why):
				t.Errorf("the record at generation 2: %+v, want ignored: %s", got, c.why)
			}
		})
	}
}
