package desired_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// TestMain lets the test binary serve as a spec.Pool worker, as the
// fleetlift binary does.
func TestMain(m *testing.M) {
	if spec.IsWorker() {
		os.Exit(spec.RunWorker())
	}
	os.Exit(m.Run())
}

const config = `version: 1
kind: Config
watch:
  branch: main
  path: campaigns
prune: true
`

// campaign is a Campaign in YAML that allows pruning.
func campaign(id string) string {
	return `version: 1
kind: Campaign
id: ` + id + `
title: ` + id + `
repositories:
  - url: https://github.com/acme/svc.git
template:
  execution:
    agentic:
      prompt: migrate
sync_policy:
  prune: true
`
}

// campaignCUE is campaign(id) in CUE.
func campaignCUE(id string) string {
	return `version: 1
kind: "Campaign"
id: "` + id + `"
title: "` + id + `"
repositories: [{url: "https://github.com/acme/svc.git"}]
template: execution: agentic: prompt: "migrate"
sync_policy: prune: true
`
}

// neverEnds is a Task in CUE whose evaluation takes ten billion
// iterations: only a timeout or the load budget stops it.
const neverEnds = `import "list"

version: 1
kind:    "Task"
id:      "slow"
title:   "Demo \(_n)"
repositories: [{url: "https://github.com/acme/service-a.git"}]
execution: agentic: prompt: "Do something."

_n: list.Sum([for i in list.Range(0, 100000, 1) for j in list.Range(0, 100000, 1) if i < 0 {j}])
`

// TestDefinitionsBeyondTheLoadBudgetAreNeverPruned: when reading a
// revision spends its load budget, the campaigns whose files were not
// loaded are unknown to the plan, and their runs are left as they are,
// even where pruning is allowed; the campaigns that loaded are planned as
// usual.
func TestDefinitionsBeyondTheLoadBudgetAreNeverPruned(t *testing.T) {
	files := func(extra map[string]string) fstest.MapFS {
		fsys := fstest.MapFS{
			"fleetlift.yaml":   {Data: []byte(config)},
			"campaigns/a.yaml": {Data: []byte(campaign("a"))},
		}
		for name, data := range extra {
			fsys[name] = &fstest.MapFile{Data: []byte(data)}
		}
		return fsys
	}
	// In a CUE file read after the endless one: not loaded in time.
	cCUE := map[string]string{"campaigns/c.cue": campaignCUE("c")}
	// What was applied: a and c, as a revision read whole has them.
	recorded := applied(t, read(t, files(cCUE)))

	tests := []struct {
		name       string
		fsys       fstest.MapFS
		want       map[string]plan.Action
		wantErrors []string
	}{
		{
			name: "no change: every definition loads",
			fsys: files(cCUE),
			want: map[string]plan.Action{"a": plan.Unchanged, "c": plan.Unchanged},
		},
		{
			name: "removed: a campaign deleted from a revision read whole is pruned",
			fsys: files(nil),
			want: map[string]plan.Action{"a": plan.Unchanged, "c": plan.Prune},
		},
		{
			name: "over budget: a campaign whose file was not loaded is unknown",
			fsys: files(map[string]string{"campaigns/b.cue": neverEnds, "campaigns/c.cue": campaignCUE("c")}),
			want: map[string]plan.Action{"a": plan.Unchanged, "c": plan.Unknown},
			wantErrors: []string{
				"campaigns/b.cue:1:1: evaluation stopped: loading this revision used up its budget of 3s",
				"campaigns/c.cue:1:1: not loaded: loading this revision used up its budget of 3s",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev := read(t, tt.fsys)
			var errs []string
			for _, e := range rev.Desired.Errors {
				errs = append(errs, e.Error())
			}
			if strings.Join(errs, "\n") != strings.Join(tt.wantErrors, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(tt.wantErrors, "\n"))
			}
			p := plan.Compute(rev.Desired, recorded, rev.Policy())
			got := map[string]plan.Action{}
			for _, c := range p.Changes {
				got[c.ID] = c.Action
			}
			if len(got) != len(tt.want) {
				t.Errorf("plan = %v, want %v", got, tt.want)
			}
			for id, want := range tt.want {
				if got[id] != want {
					t.Errorf("%s: %s, want %s", id, got[id], want)
				}
			}
		})
	}
}

// read reads the revision in fsys with a load budget of 3 seconds that
// only an endless file can spend: each file may take an hour.
func read(t *testing.T, fsys fstest.MapFS) *desired.Revision {
	t.Helper()
	pool := &spec.Pool{Command: []string{os.Args[0]}, Workers: 1}
	t.Cleanup(func() { pool.Close() })
	loader := &spec.Loader{Eval: pool, Limits: spec.Limits{EvalTimeout: time.Hour, RevisionBudget: 3 * time.Second}}
	rev, err := desired.Read(context.Background(), loader, fsys, "0123456789abcdef0123456789abcdef01234567", "")
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// applied is the recorded state of running campaigns applied from rev.
func applied(t *testing.T, rev *desired.Revision) []state.Campaign {
	t.Helper()
	if len(rev.Desired.Errors) > 0 {
		t.Fatalf("revision errors: %v", rev.Desired.Errors)
	}
	var out []state.Campaign
	for _, d := range rev.Desired.Definitions {
		out = append(out, state.Campaign{
			ID: d.ID, Kind: state.Kind(d.Kind), File: d.File, SpecDigest: d.Digest,
			Phase: state.PhaseRunning, Prune: d.Campaign.SyncPolicy.Prune, Generation: 1,
		})
	}
	return out
}
