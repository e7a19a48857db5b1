package plan_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// BenchmarkCompute plans 1,000 campaigns of 50 repositories each against
// recorded state of the same size: 500 unchanged, 400 updated (prompt
// edited, two repositories swapped), 100 created, 100 orphaned, and 200
// approval records. It measures Compute alone; loading is not timed.
func BenchmarkCompute(b *testing.B) {
	desired, recorded := scale(b, 1000, 50)
	b.ReportAllocs()
	b.ResetTimer()
	var p plan.Plan
	for b.Loop() {
		p = plan.Compute(desired, recorded, plan.Policy{Prune: true})
	}
	b.StopTimer()
	s := p.Summary()
	if s.Unchanged != 500 || s.Update != 400 || s.Create != 100 || s.Prune+s.Orphaned != 100 {
		b.Fatalf("unexpected plan: %+v", s)
	}
}

func scale(tb testing.TB, campaigns, repos int) (plan.Desired, []state.Campaign) {
	var names []string
	for i := range repos {
		names = append(names, fmt.Sprintf("service-%02d", i))
	}
	base := load(tb, files{"c.yaml": camp{id: "base", repos: names, prune: true}.yaml()}).Definitions[0]
	raw, err := json.Marshal(base.Campaign)
	if err != nil {
		tb.Fatal(err)
	}
	variant := func(id, file, prompt string, swap bool) spec.Definition {
		var c spec.Campaign
		if err := json.Unmarshal(raw, &c); err != nil {
			tb.Fatal(err)
		}
		c.ID, c.Title = id, id
		c.Template.Execution.Agentic.Prompt = prompt
		if swap {
			c.Repositories[0].Name, c.Repositories[0].URL = "billing", "https://github.com/acme/billing.git"
			c.Repositories[1].Name, c.Repositories[1].URL = "ledger", "https://github.com/acme/ledger.git"
		}
		d, err := spec.Digest(&c)
		if err != nil {
			tb.Fatal(err)
		}
		return spec.Definition{Kind: spec.KindCampaign, ID: id, File: file, Digest: d, Campaign: &c}
	}

	var desired plan.Desired
	var recorded []state.Campaign
	for i := range campaigns + campaigns/10 {
		id := fmt.Sprintf("campaign-%04d", i)
		file := "campaigns/" + id + ".yaml"
		current := variant(id, file, "Migrate to log/slog.", false)
		switch {
		case i < campaigns/10: // created
			desired.Definitions = append(desired.Definitions, current)
		case i < campaigns/10+campaigns/2: // unchanged
			desired.Definitions = append(desired.Definitions, current)
			recorded = append(recorded, record(tb, current))
		case i < campaigns: // updated
			desired.Definitions = append(desired.Definitions, current)
			recorded = append(recorded, record(tb, variant(id, file, "Migrate from log.Printf to log/slog.", true)))
		default: // orphaned
			recorded = append(recorded, record(tb, current))
		}
	}
	for i := range recorded {
		if i%5 != 0 {
			continue
		}
		r := &recorded[i]
		target := r.ID + "/service-10"
		r.PendingApprovals = []state.PendingApproval{{Target: target, ResultDigest: "sha256:1"}}
		desired.Approvals = append(desired.Approvals, approval.Record{File: "approvals/" + r.ID + ".yaml", Target: target, ResultDigest: "sha256:1", By: "alice", Action: approval.Approve})
	}
	return desired, recorded
}
