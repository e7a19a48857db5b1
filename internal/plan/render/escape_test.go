package render_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/plan/render"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// TestHumanNeutralisesTerminalEscapes: whatever the campaigns repository
// or the recorded state hold, the human plan shows their control
// characters instead of handing them to the terminal; only its own colours
// reach it.
func TestHumanNeutralisesTerminalEscapes(t *testing.T) {
	const esc = "\x1b[1A\x1b[2K\r\u009b2J\u202e"
	p := plan.Plan{
		Changes: []plan.Change{
			{ID: "a" + esc, Kind: spec.KindCampaign, Action: plan.Update, File: "campaigns/a" + esc + ".yaml", PreviousFile: "old" + esc,
				OldDigest: d1 + esc, NewDigest: d2, Strategy: spec.UpdateInPlace, Phase: state.Phase("running" + esc), FieldsKnown: true,
				Fields: []plan.FieldDiff{
					{Path: "template.env." + esc, Old: raw(`"x\u001b[2Ky\u009b"`), New: raw(`{"k":"\u009b` + "\u202e" + `"}`)},
				},
				Repositories: plan.RepoDiff{Added: []string{"svc" + esc}, Removed: []string{"old" + esc}}},
			{ID: "gone" + esc, Kind: spec.KindCampaign, Action: plan.Orphaned, File: "campaigns/gone.yaml", OldDigest: d1,
				Phase: state.PhaseRunning, Reason: "removed" + esc},
		},
		Approvals: []plan.ApprovalChange{
			{Record: approval.Record{File: "approvals/x" + esc + ".yaml", Target: "a/svc" + esc, ResultDigest: d2, By: "mallory" + esc,
				Action: approval.Action("steer" + esc), Prompt: "do" + esc},
				Status: plan.ApprovalIgnored, Reason: "nothing awaits" + esc},
		},
		Errors: []*spec.Error{{File: "campaigns/b" + esc + ".yaml", Line: 1, Column: 1, Msg: "bad" + esc}},
	}
	for _, color := range []bool{false, true} {
		var b bytes.Buffer
		if err := render.Human(&b, p, render.Options{Color: color}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		// Human's own colours.
		for _, code := range []string{"\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[33m"} {
			out = strings.ReplaceAll(out, code, "")
		}
		for i, r := range out {
			if r == utf8.RuneError || (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) {
				t.Fatalf("color %v: %U at byte %d reaches the terminal:\n%s", color, r, i, out)
			}
		}
		for _, want := range []string{"a^[[1A^[[2K^M\\u009b2J\\u202e", "svc^[[1A", "bad^[[1A", "mallory^[[1A", "removed^[[1A"} {
			if !strings.Contains(out, want) {
				t.Errorf("color %v: the plan does not show %q:\n%s", color, want, out)
			}
		}
	}
}
