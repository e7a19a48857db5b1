package render_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/plan/render"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

const slogV1 = `version: 1
kind: Campaign
id: slog-rollout
title: Structured logging
repositories:
  - url: https://github.com/acme/payments.git
  - url: https://github.com/acme/ledger.git
template:
  execution:
    agentic:
      prompt: Migrate from log.Printf to log/slog.
`

// slogV2 edits the prompt, drops ledger and adds billing.
const slogV2 = `version: 1
kind: Campaign
id: slog-rollout
title: Structured logging
repositories:
  - url: https://github.com/acme/payments.git
  - url: https://github.com/acme/billing.git
template:
  execution:
    agentic:
      prompt: Migrate to log/slog; keep log levels.
max_cost_per_campaign: 50
`

const legacy = `version: 1
kind: Campaign
id: legacy
title: Legacy
repositories:
  - url: https://github.com/acme/payments.git
template:
  execution:
    deterministic:
      image: alpine
      command: [make, fix]
`

const audit = `version: 1
id: auth-audit
title: Audit
mode: report
repositories:
  - url: https://github.com/acme/payments.git
execution:
  agentic:
    prompt: List the auth middleware.
`

func loadFS(t *testing.T, files map[string]string) *spec.Result {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	res, err := (&spec.Loader{Eval: spec.InProcess(1)}).Load(context.Background(), fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestComputedPlan renders a plan computed from definitions read by the
// real loader: what a user sees after editing one campaign, adding one and
// deleting one.
func TestComputedPlan(t *testing.T) {
	before := loadFS(t, map[string]string{"campaigns/slog.yaml": slogV1, "campaigns/legacy.yaml": legacy})
	if len(before.Errors) > 0 {
		t.Fatal(before.Errors)
	}
	var recorded []state.Campaign
	for _, d := range before.Definitions {
		b, err := json.Marshal(d.Campaign)
		if err != nil {
			t.Fatal(err)
		}
		recorded = append(recorded, state.Campaign{ID: d.ID, Kind: state.KindCampaign, File: d.File, SpecDigest: d.Digest, Spec: b, Phase: state.PhaseRunning})
	}
	// ledger's task ran, priced at $0.84; payments has not started.
	for i := range recorded {
		if recorded[i].ID == "slog-rollout" {
			recorded[i].Repos = []state.Repo{{Name: "ledger", Status: state.RepoCompleted}, {Name: "payments", Status: state.RepoPending}}
			recorded[i].Usage = &state.Usage{Requests: 12, Tokens: 150000, CostUSD: 0.84, Repositories: 1}
		}
	}
	after := loadFS(t, map[string]string{"campaigns/slog.yaml": slogV2, "campaigns/audit.yaml": audit})
	if len(after.Errors) > 0 {
		t.Fatal(after.Errors)
	}
	p := plan.Compute(plan.Desired{Definitions: after.Definitions, Errors: after.Errors}, recorded, plan.Policy{})

	var b bytes.Buffer
	if err := render.Human(&b, p, render.Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"  + auth-audit will be created\n      Task from campaigns/audit.yaml\n" +
			"      cost: about $0.8400 projected (1 repository at $0.8400 each, from 1 recorded run)\n" +
			"      repositories (1):\n        + payments\n",
		// payments, not started, and billing, added, take the new spec.
		"  ~ slog-rollout will be updated in place\n" +
			"      Campaign from campaigns/slog.yaml (running): repositories not yet started take the new spec\n" +
			"      cost: about $1.68 projected (2 repositories at $0.8400 each, from this campaign's last run); max_cost_per_campaign $50.00\n",
		`      ~ template.execution.agentic.prompt: "Migrate from log.Printf to log/slog." → "Migrate to log/slog; keep log levels."` + "\n",
		"      repositories: 1 added, 1 removed\n        + billing\n        - ledger\n",
		"  - legacy is orphaned\n      Campaign from campaigns/legacy.yaml (running): removed from Git; not pruned: the repository config does not allow pruning; it was applied with sync_policy.prune false\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks\n%s\nin\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "\nPlan: 1 to create, 1 to update, 0 to prune, 1 orphaned.\n") {
		t.Errorf("plan does not end with the summary line:\n%s", out)
	}
}
