package plan_test

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

const (
	oldPrompt = `"Migrate from log.Printf to log/slog."`
	newPrompt = `"Migrate to log/slog; keep log levels."`
	broken    = "version: 1\nkind: Campaign\nid: slog-rollout\ntitle: [unclosed\n"
)

var slogRollout = camp{id: "slog-rollout", repos: []string{"payments", "ledger@release", "search"}, prune: true}

func (c camp) with(edit func(*camp)) camp {
	c.repos = slices.Clone(c.repos)
	edit(&c)
	return c
}

func TestCompute(t *testing.T) {
	edited := slogRollout.with(func(c *camp) { c.prompt = "Migrate to log/slog; keep log levels." })
	audit := camp{id: "auth-audit", repos: []string{"payments"}, prune: true}
	cases := []struct {
		name     string
		before   files // applied and running: the recorded state
		recorded func([]state.Campaign) []state.Campaign
		after    files // the definitions in Git now
		policy   plan.Policy
		want     []view
		errors   []string // files with errors in the plan
	}{
		{
			name:   "no change",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/slog.yaml": slogRollout.yaml()},
			want:   []view{{ID: "slog-rollout", Action: plan.Unchanged}},
		},
		{
			name:  "nothing recorded, nothing defined",
			after: files{},
		},
		{
			name:  "created",
			after: files{"campaigns/slog.yaml": slogRollout.yaml()},
			want:  []view{{ID: "slog-rollout", Action: plan.Create, Added: []string{"ledger", "payments", "search"}}},
		},
		{
			name:  "created suspended",
			after: files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.suspend = true }).yaml()},
			want:  []view{{ID: "slog-rollout", Action: plan.Create, Added: []string{"ledger", "payments", "search"}, Suspend: true}},
		},
		{
			name:   "removed from Git, pruned",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{},
			policy: plan.Policy{Prune: true},
			want:   []view{{ID: "slog-rollout", Action: plan.Prune}},
		},
		{
			name:   "removed from Git, orphaned: the repository config does not allow pruning",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{},
			want: []view{{ID: "slog-rollout", Action: plan.Orphaned,
				Reason: "removed from Git; not pruned: the repository config does not allow pruning"}},
		},
		{
			name:   "removed from Git, orphaned: the campaign does not allow pruning",
			before: files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.prune = false }).yaml()},
			after:  files{},
			policy: plan.Policy{Prune: true},
			want: []view{{ID: "slog-rollout", Action: plan.Orphaned,
				Reason: "removed from Git; not pruned: it was applied with sync_policy.prune false"}},
		},
		{
			name:   "removed task is never pruned",
			before: files{"campaigns/bump.yaml": task("go-bump", "bump go", "payments")},
			after:  files{},
			policy: plan.Policy{Prune: true},
			want: []view{{ID: "go-bump", Action: plan.Orphaned,
				Reason: "removed from Git; not pruned: a Task is never pruned"}},
		},
		{
			name:   "file renamed, same id",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/logging/slog-rollout.yaml": slogRollout.yaml()},
			policy: plan.Policy{Prune: true},
			want:   []view{{ID: "slog-rollout", Action: plan.Unchanged, PreviousFile: "campaigns/slog.yaml"}},
		},
		{
			name:   "file renamed and edited",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/logging/slog-rollout.yaml": edited.yaml()},
			policy: plan.Policy{Prune: true},
			want: []view{{ID: "slog-rollout", Action: plan.Update, Strategy: spec.UpdateInPlace, PreviousFile: "campaigns/slog.yaml",
				Fields: []string{"template.execution.agentic.prompt: " + oldPrompt + " → " + newPrompt}}},
		},
		{
			name:   "id changed",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.id = "slog-v2" }).yaml()},
			want: []view{
				{ID: "slog-rollout", Action: plan.Orphaned, Reason: "removed from Git; not pruned: the repository config does not allow pruning"},
				{ID: "slog-v2", Action: plan.Create, Added: []string{"ledger", "payments", "search"}},
			},
		},
		{
			name:   "prompt edited",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/slog.yaml": edited.yaml()},
			want: []view{{ID: "slog-rollout", Action: plan.Update, Strategy: spec.UpdateInPlace,
				Fields: []string{"template.execution.agentic.prompt: " + oldPrompt + " → " + newPrompt}}},
		},
		{
			name:   "repositories added and removed",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after: files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) {
				c.repos = []string{"payments", "ledger", "billing", "checkout"}
			}).yaml()},
			want: []view{{ID: "slog-rollout", Action: plan.Update, Strategy: spec.UpdateInPlace,
				Fields:  []string{`repositories[ledger].branch: "release" → ∅`},
				Added:   []string{"billing", "checkout"},
				Removed: []string{"search"}}},
		},
		{
			name:   "grouped repositories added and removed",
			before: files{"campaigns/g.yaml": camp{id: "grouped", groups: map[string][]string{"backend": {"api", "worker"}}}.yaml()},
			after:  files{"campaigns/g.yaml": camp{id: "grouped", groups: map[string][]string{"backend": {"api"}, "frontend": {"web"}}}.yaml()},
			want: []view{{ID: "grouped", Action: plan.Update, Strategy: spec.UpdateInPlace,
				Added: []string{"frontend/web"}, Removed: []string{"backend/worker"}}},
		},
		{
			name:   "repositories reordered",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.repos = []string{"search", "payments", "ledger@release"} }).yaml()},
			want: []view{{ID: "slog-rollout", Action: plan.Update, Strategy: spec.UpdateInPlace,
				Fields: []string{`repositories: ["payments","ledger","search"] → ["search","payments","ledger"]`}}},
		},
		{
			name:   "update strategy restart",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/slog.yaml": edited.with(func(c *camp) { c.update = "restart" }).yaml()},
			want: []view{{ID: "slog-rollout", Action: plan.Update, Strategy: spec.UpdateRestart,
				Fields: []string{
					`sync_policy.update: "in_place" → "restart"`,
					"template.execution.agentic.prompt: " + oldPrompt + " → " + newPrompt,
				}}},
		},
		{
			name:   "task edited restarts",
			before: files{"campaigns/bump.yaml": task("go-bump", "bump go to 1.25", "payments")},
			after:  files{"campaigns/bump.yaml": task("go-bump", "bump go to 1.26", "payments", "ledger")},
			want: []view{{ID: "go-bump", Action: plan.Update, Strategy: spec.UpdateRestart,
				Fields: []string{`execution.agentic.prompt: "bump go to 1.25" → "bump go to 1.26"`},
				Added:  []string{"ledger"}}},
		},
		{
			name:   "suspended",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.suspend = true }).yaml()},
			want: []view{{ID: "slog-rollout", Action: plan.Suspend, Strategy: spec.UpdateInPlace, Suspend: true,
				Fields: []string{"suspend: ∅ → true"}}},
		},
		{
			name:   "suspended with the restart strategy: in place all the same",
			before: files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.update = "restart" }).yaml()},
			after:  files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.update = "restart"; c.suspend = true }).yaml()},
			want: []view{{ID: "slog-rollout", Action: plan.Suspend, Strategy: spec.UpdateInPlace, Suspend: true,
				Fields: []string{"suspend: ∅ → true"}}},
		},
		{
			name:   "suspending a finished run: nothing to do",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			recorded: func(cs []state.Campaign) []state.Campaign {
				cs[0].Phase = state.PhaseCompleted
				return cs
			},
			after: files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.suspend = true }).yaml()},
			want: []view{{ID: "slog-rollout", Action: plan.Unchanged, Strategy: spec.UpdateInPlace, Suspend: true,
				Fields: []string{"suspend: ∅ → true"}}},
		},
		{
			name:   "resumed",
			before: files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.suspend = true }).yaml()},
			after:  files{"campaigns/slog.yaml": edited.yaml()},
			want: []view{{ID: "slog-rollout", Action: plan.Resume, Strategy: spec.UpdateInPlace,
				Fields: []string{"suspend: true → ∅", "template.execution.agentic.prompt: " + oldPrompt + " → " + newPrompt}}},
		},
		{
			name:   "recorded spec unknown: digests only, repositories from the recorded results",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			recorded: func(cs []state.Campaign) []state.Campaign {
				cs[0].Spec = nil
				cs[0].Repos = []state.Repo{{Name: "payments", Status: state.RepoCompleted}, {Name: "ledger", Status: state.RepoRunning}, {Name: "search", Status: state.RepoPending}}
				return cs
			},
			after: files{"campaigns/slog.yaml": edited.with(func(c *camp) { c.repos = append(c.repos, "billing") }).yaml()},
			want: []view{{ID: "slog-rollout", Action: plan.Update, Strategy: spec.UpdateInPlace, Blind: true,
				Added: []string{"billing"}}},
		},
		{
			// Its runs recorded the digest with the schema's default
			// rate_limit of then, which this definition no longer
			// has: an upgrade changes nothing.
			name:   "recorded by a release whose schema defaulted rate_limit",
			before: files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.rateLimit = "{pull_requests_per_hour: 60, burst: 10}" }).yaml()},
			after:  files{"campaigns/slog.yaml": slogRollout.yaml()},
			want:   []view{{ID: "slog-rollout", Action: plan.Unchanged}},
		},
		{
			name:   "rate_limit set",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.rateLimit = "{pull_requests_per_hour: 600}" }).yaml()},
			want:   []view{{ID: "slog-rollout", Action: plan.Update, Strategy: spec.UpdateInPlace, Fields: []string{`rate_limit: ∅ → {"pull_requests_per_hour":600,"burst":10}`}}},
		},
		{
			name:   "recorded digest unknown: treated as changed",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			recorded: func(cs []state.Campaign) []state.Campaign {
				cs[0].SpecDigest, cs[0].Spec = "", nil
				return cs
			},
			after: files{"campaigns/slog.yaml": slogRollout.yaml()},
			want:  []view{{ID: "slog-rollout", Action: plan.Update, Strategy: spec.UpdateInPlace, Blind: true}},
		},
		{
			name:   "invalid file does not orphan its id",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/slog.yaml": broken, "campaigns/audit.yaml": audit.yaml()},
			policy: plan.Policy{Prune: true},
			want: []view{
				{ID: "auth-audit", Action: plan.Create, Added: []string{"payments"}},
				{ID: "slog-rollout", Action: plan.Unknown, Reason: "its definition file campaigns/slog.yaml is invalid; the run is left as it is"},
			},
			errors: []string{"campaigns/slog.yaml"},
		},
		{
			name:   "duplicate ids are invalid, not orphaned",
			before: files{"campaigns/slog.yaml": slogRollout.yaml()},
			after:  files{"campaigns/slog.yaml": slogRollout.yaml(), "campaigns/slog-copy.yaml": edited.yaml()},
			policy: plan.Policy{Prune: true},
			want: []view{
				{ID: "slog-rollout", Action: plan.Unknown, Reason: "its definition file campaigns/slog.yaml is invalid; the run is left as it is"},
			},
			errors: []string{"campaigns/slog-copy.yaml", "campaigns/slog.yaml"},
		},
		{
			name:   "no pruning while a definition file is invalid",
			before: files{"campaigns/slog.yaml": slogRollout.yaml(), "campaigns/audit.yaml": audit.yaml()},
			after:  files{"campaigns/slog.yaml": slogRollout.yaml(), "campaigns/audit-renamed.yaml": "version: 1\nkind: Campaign\nid: auth-audit\n"},
			policy: plan.Policy{Prune: true},
			want: []view{
				{ID: "auth-audit", Action: plan.Orphaned, Reason: "removed from Git; not pruned: 1 definition file is invalid and may hold it, renamed"},
				{ID: "slog-rollout", Action: plan.Unchanged},
			},
			errors: []string{"campaigns/audit-renamed.yaml"},
		},
		{
			name:   "recorded without a file while a file is invalid",
			before: files{"campaigns/audit.yaml": audit.yaml()},
			recorded: func(cs []state.Campaign) []state.Campaign {
				cs[0].File = ""
				return cs
			},
			after:  files{"campaigns/broken.yaml": broken},
			policy: plan.Policy{Prune: true},
			want: []view{{ID: "auth-audit", Action: plan.Unknown,
				Reason: "not among the loaded definitions, but 1 definition file is invalid and may define it; the run is left as it is"}},
			errors: []string{"campaigns/broken.yaml"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var recorded []state.Campaign
			if c.before != nil {
				recorded = applied(t, c.before)
			}
			if c.recorded != nil {
				recorded = c.recorded(recorded)
			}
			desired := load(t, c.after)
			p := plan.Compute(desired, recorded, c.policy)
			if got := views(p); !reflect.DeepEqual(got, c.want) {
				t.Errorf("changes:\n got %+v\nwant %+v", got, c.want)
			}
			var errFiles []string
			for _, e := range p.Errors {
				errFiles = append(errFiles, e.File)
			}
			if !slices.Equal(slices.Compact(errFiles), c.errors) {
				t.Errorf("errors in %v, want in %v", errFiles, c.errors)
			}
			if len(c.errors) == 0 && len(desired.Errors) > 0 {
				t.Fatalf("fixture has errors: %v", spec.Errors(desired.Errors))
			}
		})
	}
}

func TestDigests(t *testing.T) {
	recorded := applied(t, files{"campaigns/slog.yaml": slogRollout.yaml(), "campaigns/audit.yaml": camp{id: "auth-audit", repos: []string{"payments"}}.yaml()})
	desired := load(t, files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.prompt = "x" }).yaml(), "campaigns/new.yaml": camp{id: "new", repos: []string{"a"}}.yaml()})
	p := plan.Compute(desired, recorded, plan.Policy{})
	byID := map[string]plan.Change{}
	for _, c := range p.Changes {
		byID[c.ID] = c
	}
	defs := map[string]spec.Definition{}
	for _, d := range desired.Definitions {
		defs[d.ID] = d
	}
	recs := map[string]state.Campaign{}
	for _, r := range recorded {
		recs[r.ID] = r
	}
	checks := []struct {
		id, old, new string
		changed      bool
	}{
		{"new", "", defs["new"].Digest, false},
		{"slog-rollout", recs["slog-rollout"].SpecDigest, defs["slog-rollout"].Digest, true},
		{"auth-audit", recs["auth-audit"].SpecDigest, "", false},
	}
	for _, c := range checks {
		got := byID[c.id]
		if got.OldDigest != c.old || got.NewDigest != c.new || got.SpecChanged() != c.changed {
			t.Errorf("%s: digests %q → %q (changed %t), want %q → %q (%t)", c.id, got.OldDigest, got.NewDigest, got.SpecChanged(), c.old, c.new, c.changed)
		}
	}
	if got := byID["slog-rollout"]; got.Phase != state.PhaseRunning || got.File != "campaigns/slog.yaml" || !got.FieldsKnown {
		t.Errorf("slog-rollout: phase %q, file %q, fields known %t", got.Phase, got.File, got.FieldsKnown)
	}
	if got := byID["auth-audit"]; got.File != "campaigns/audit.yaml" || got.Kind != spec.KindCampaign {
		t.Errorf("orphaned auth-audit: file %q, kind %q; want the recorded file and kind", got.File, got.Kind)
	}
}

func TestSummary(t *testing.T) {
	before := files{
		"campaigns/a.yaml": camp{id: "a", repos: []string{"x"}, prune: true}.yaml(),
		"campaigns/b.yaml": camp{id: "b", repos: []string{"x"}}.yaml(),
		"campaigns/c.yaml": camp{id: "c", repos: []string{"x"}, prune: true}.yaml(),
		"campaigns/d.yaml": camp{id: "d", repos: []string{"x"}}.yaml(),
		"campaigns/e.yaml": camp{id: "e", repos: []string{"x"}}.yaml(),
	}
	after := files{
		"campaigns/b.yaml": camp{id: "b", repos: []string{"x", "y"}}.yaml(),
		"campaigns/d.yaml": camp{id: "d", repos: []string{"x"}, suspend: true}.yaml(),
		"campaigns/e.yaml": camp{id: "e", repos: []string{"x"}}.yaml(),
		"campaigns/f.yaml": camp{id: "f", repos: []string{"x"}}.yaml(),
		"campaigns/g.yaml": camp{id: "g", repos: []string{"x"}}.yaml(),
	}
	cases := []struct {
		name    string
		after   files
		policy  plan.Policy
		want    plan.Summary
		changes bool
	}{
		{"no change", before, plan.Policy{Prune: true}, plan.Summary{Unchanged: 5}, false},
		{"removed", files{}, plan.Policy{Prune: true}, plan.Summary{Prune: 2, Orphaned: 3}, true},
		{"removed, pruning off", files{}, plan.Policy{}, plan.Summary{Orphaned: 5}, false},
		{"mixed", after, plan.Policy{Prune: true}, plan.Summary{Create: 2, Update: 1, Suspend: 1, Unchanged: 1, Prune: 2}, true},
	}
	recorded := applied(t, before)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := plan.Compute(load(t, c.after), recorded, c.policy)
			if p.Summary() != c.want {
				t.Errorf("Summary = %+v, want %+v", p.Summary(), c.want)
			}
			if p.HasChanges() != c.changes {
				t.Errorf("HasChanges() = %t, want %t", p.HasChanges(), c.changes)
			}
		})
	}
}

// TestDeterministic: the order of the inputs does not change the plan.
func TestDeterministic(t *testing.T) {
	recorded := applied(t, files{
		"campaigns/a.yaml": camp{id: "a", repos: []string{"x", "y"}, prune: true}.yaml(),
		"campaigns/b.yaml": camp{id: "b", repos: []string{"x"}}.yaml(),
		"campaigns/c.yaml": camp{id: "c", repos: []string{"x"}}.yaml(),
	})
	recorded[0].PendingApprovals = []state.PendingApproval{{Target: "a/x", ResultDigest: "sha256:1"}, {Target: "a/y", ResultDigest: "sha256:2"}}
	desired := load(t, files{
		"campaigns/b.yaml":      camp{id: "b", repos: []string{"x", "z"}, prompt: "changed"}.yaml(),
		"campaigns/d.yaml":      camp{id: "d", repos: []string{"x"}}.yaml(),
		"campaigns/e.yaml":      camp{id: "e", repos: []string{"x"}}.yaml(),
		"campaigns/broken.yaml": broken,
		"campaigns/worse.yaml":  "{",
	})
	desired.Approvals = approvalsFixture()
	want := plan.Compute(desired, recorded, plan.Policy{Prune: true})
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		d := desired
		d.Definitions = slices.Clone(d.Definitions)
		d.Errors = slices.Clone(d.Errors)
		d.Approvals = slices.Clone(d.Approvals)
		r := slices.Clone(recorded)
		rng.Shuffle(len(d.Definitions), func(i, j int) { d.Definitions[i], d.Definitions[j] = d.Definitions[j], d.Definitions[i] })
		rng.Shuffle(len(d.Errors), func(i, j int) { d.Errors[i], d.Errors[j] = d.Errors[j], d.Errors[i] })
		rng.Shuffle(len(d.Approvals), func(i, j int) { d.Approvals[i], d.Approvals[j] = d.Approvals[j], d.Approvals[i] })
		rng.Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
		if got := plan.Compute(d, r, plan.Policy{Prune: true}); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled inputs gave another plan:\n%+v\nwant\n%+v", got, want)
		}
	}
}

// TestKindChanged: a Task turned Campaign under the same id restarts, and
// its diff says so.
func TestKindChanged(t *testing.T) {
	recorded := applied(t, files{"campaigns/bump.yaml": task("go-bump", "bump go", "payments")})
	desired := load(t, files{"campaigns/bump.yaml": camp{id: "go-bump", prompt: "bump go", repos: []string{"payments"}}.yaml()})
	p := plan.Compute(desired, recorded, plan.Policy{})
	c := p.Changes[0]
	if c.Action != plan.Update || c.Strategy != spec.UpdateRestart || !c.Repositories.Empty() {
		t.Errorf("got %s (%s), repositories %+v; want update (restart), none added or removed", c.Action, c.Strategy, c.Repositories)
	}
	if got := viewOf(c).Fields; !slices.Contains(got, `kind: "Task" → "Campaign"`) {
		t.Errorf("fields %q lack the kind change", got)
	}
}
