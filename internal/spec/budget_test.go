package spec_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// neverEnds is a Task whose title takes ten billion iterations to
// compute: cheap in memory, so only a timeout or the budget stops it.
const neverEnds = `import "list"

version: 1
kind:    "Task"
id:      "slow"
title:   "Demo \(_n)"
repositories: [{url: "https://github.com/acme/service-a.git"}]
execution: agentic: prompt: "Do something."

_n: list.Sum([for i in list.Range(0, 100000, 1) for j in list.Range(0, 100000, 1) if i < 0 {j}])
`

// cueTask is a valid Task in CUE with the given id.
func cueTask(id string) string {
	return `version: 1
kind: "Task"
id: "` + id + `"
title: "T"
repositories: [{url: "https://github.com/acme/svc.git"}]
execution: agentic: prompt: "migrate"
`
}

// yamlTask is agenticTask with another id.
func yamlTask(id string) string {
	return strings.Replace(agenticTask, "id: t\n", "id: "+id+"\n", 1)
}

// TestRevisionLoadBudget: loading one revision stops when its budget is
// spent, whatever the per-file timeout allows. The file being evaluated
// then, and every file not yet loaded, is an error that names the file and
// the budget; the definitions loaded before are kept.
func TestRevisionLoadBudget(t *testing.T) {
	const budget = 3 * time.Second
	stopped := "evaluation stopped: loading this revision used up its budget of 3s"
	notLoaded := "not loaded: loading this revision used up its budget of 3s"
	tests := []struct {
		name string
		// load loads a revision with loader; it returns the ids loaded
		// and the errors.
		load       func(t *testing.T, loader *spec.Loader) ([]string, spec.Errors)
		wantIDs    []string
		wantErrors []string
	}{
		{
			name: "no change: a revision within its budget loads whole",
			load: func(t *testing.T, loader *spec.Loader) ([]string, spec.Errors) {
				return loadCampaigns(t, loader, fstest.MapFS{
					"campaigns/a.yaml": {Data: []byte(yamlTask("a"))},
					"campaigns/c.cue":  {Data: []byte(cueTask("c"))},
				})
			},
			wantIDs: []string{"a", "c"},
		},
		{
			name: "a file that never ends is stopped at the budget and the files after it are not loaded",
			load: func(t *testing.T, loader *spec.Loader) ([]string, spec.Errors) {
				return loadCampaigns(t, loader, fstest.MapFS{
					"campaigns/a.yaml":    {Data: []byte(yamlTask("a"))},
					"campaigns/b.cue":     {Data: []byte(neverEnds)},
					"campaigns/c.cue":     {Data: []byte(cueTask("c"))},
					"campaigns/d.yaml":    {Data: []byte(yamlTask("d"))},
					"campaigns/e/f.cue":   {Data: []byte(cueTask("f"))},
					"campaigns/notes.txt": {Data: []byte("not a definition")},
				})
			},
			wantIDs: []string{"a", "d"},
			wantErrors: []string{
				"campaigns/b.cue:1:1: " + stopped,
				"campaigns/c.cue:1:1: " + notLoaded,
				"campaigns/e/f.cue:1:1: " + notLoaded,
			},
		},
		{
			name: "a revision's definitions and approval records share its budget",
			load: func(t *testing.T, loader *spec.Loader) ([]string, spec.Errors) {
				fsys := fstest.MapFS{
					"campaigns/a.yaml":  {Data: []byte(yamlTask("a"))},
					"campaigns/b.cue":   {Data: []byte(neverEnds)},
					"approvals/a.yaml":  {Data: []byte("version: 1\nkind: Approval\ntarget: a\naction: continue\nby: carol\n")},
					"approvals/b/c.yml": {Data: []byte("version: 1\nkind: Approval\ntarget: b\naction: continue\nby: carol\n")},
				}
				ids, errs := loadCampaigns(t, loader, fsys)
				recs, err := loader.LoadApprovals(context.Background(), fsys, "approvals")
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range recs.Approvals {
					ids = append(ids, "approval "+a.Target)
				}
				return ids, append(errs, recs.Errors...)
			},
			wantIDs: []string{"a"},
			wantErrors: []string{
				"campaigns/b.cue:1:1: " + stopped,
				"approvals/a.yaml:1:1: " + notLoaded,
				"approvals/b/c.yml:1:1: " + notLoaded,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := newPool(t)
			pool.Workers = 1
			// The per-file timeout would let the endless file run for
			// an hour: only the budget stops it.
			loader := (&spec.Loader{Eval: pool, Limits: spec.Limits{EvalTimeout: time.Hour, RevisionBudget: budget}}).Revision()
			ids, errs := tt.load(t, loader)
			if !slices.Equal(ids, tt.wantIDs) {
				t.Errorf("loaded %q, want %q", ids, tt.wantIDs)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if !slices.Equal(got, tt.wantErrors) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.wantErrors, "\n"))
			}
		})
	}
}

// loadCampaigns loads the definitions under campaigns/ of fsys with loader.
func loadCampaigns(t *testing.T, loader *spec.Loader, fsys fstest.MapFS) ([]string, spec.Errors) {
	t.Helper()
	res, err := loader.Load(context.Background(), fsys, "campaigns")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range res.Definitions {
		ids = append(ids, d.ID)
	}
	return ids, res.Errors
}
