package spec_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// counting counts the files it is given to evaluate.
type counting struct {
	spec.Evaluator
	files atomic.Int64
}

func (c *counting) Evaluate(ctx context.Context, b spec.Bounds, in []spec.Input) ([]spec.Output, error) {
	c.files.Add(int64(len(in)))
	return c.Evaluator.Evaluate(ctx, b, in)
}

// cueCampaign is a campaign written as CUE (JSON is CUE).
func cueCampaign(i int, prompt string) []byte {
	return fmt.Appendf(nil, `{"version": 1, "kind": "Campaign", "id": "campaign-%03d", "title": "Campaign %d",
"template": {"execution": {"agentic": {"prompt": %q}}},
"repositories": [{"url": "https://github.com/acme/service-%d.git"}]}`, i, i, prompt, i)
}

// TestCacheEvaluatesOnlyWhatChanged: a loader kept from one revision to
// the next evaluates the files that changed, and loads the same
// definitions as a loader that evaluates everything.
func TestCacheEvaluatesOnlyWhatChanged(t *testing.T) {
	fsys := fstest.MapFS{}
	for i := range 20 {
		fsys[fmt.Sprintf("c%03d.cue", i)] = &fstest.MapFile{Data: cueCampaign(i, "migrate")}
	}
	eval := &counting{Evaluator: spec.InProcess(0)}
	loader := &spec.Loader{Eval: eval, Cache: spec.NewCache(0)}
	ctx := context.Background()
	load := func() *spec.Result {
		t.Helper()
		res, err := loader.Revision().Load(ctx, fsys, ".")
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := load(); len(res.Definitions) != 20 || eval.files.Load() != 20 {
		t.Fatalf("first load: %d definitions, %d files evaluated; want 20 and 20", len(res.Definitions), eval.files.Load())
	}

	// One file changes, one breaks.
	fsys["c007.cue"] = &fstest.MapFile{Data: cueCampaign(7, "migrate again")}
	fsys["c011.cue"] = &fstest.MapFile{Data: []byte(strings.Replace(string(cueCampaign(11, "x")), `"kind": "Campaign"`, `"kind": "Campain"`, 1))}
	eval.files.Store(0)
	res := load()
	if n := eval.files.Load(); n != 2 {
		t.Errorf("after two files changed, %d files were evaluated; want 2", n)
	}
	fresh, err := (&spec.Loader{Eval: spec.InProcess(0)}).Load(ctx, fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := digests(res), digests(fresh); got != want {
		t.Errorf("cached load differs from a fresh one:\n got %s\nwant %s", got, want)
	}
	if len(res.Errors) != 1 || res.Errors[0].File != "c011.cue" || len(fresh.Errors) != 1 {
		t.Errorf("errors %v; want one, in c011.cue", res.Errors)
	}

	// A broken file is evaluated again each time: its error is the
	// file's, never a remembered one.
	eval.files.Store(0)
	if res := load(); eval.files.Load() != 1 || len(res.Errors) != 1 {
		t.Errorf("third load: %d files evaluated, errors %v; want the broken file alone, with its error", eval.files.Load(), res.Errors)
	}
	// The same content under another name is another file.
	fsys["moved/c003.cue"] = fsys["c003.cue"]
	delete(fsys, "c003.cue")
	eval.files.Store(0)
	load()
	if n := eval.files.Load(); n != 2 {
		t.Errorf("after a move, %d files were evaluated; want 2 (the moved and the broken one)", n)
	}
}

func digests(r *spec.Result) string {
	var b strings.Builder
	for _, d := range r.Definitions {
		fmt.Fprintf(&b, "%s=%s@%s ", d.ID, d.Digest, d.File)
	}
	return b.String()
}

// TestCachedDefinitionsStayAsLoaded: a kept loader hands the definitions
// of unchanged files out again without decoding them, and what a caller
// makes of one (a resolved repositories_from) never reaches the next
// revision's.
func TestCachedDefinitionsStayAsLoaded(t *testing.T) {
	fsys := fstest.MapFS{"c.cue": &fstest.MapFile{Data: cueCampaign(1, "migrate")}}
	loader := &spec.Loader{Eval: spec.InProcess(0), Cache: spec.NewCache(0)}
	ctx := context.Background()
	load := func() spec.Definition {
		t.Helper()
		res, err := loader.Revision().Load(ctx, fsys, ".")
		if err != nil || len(res.Definitions) != 1 {
			t.Fatalf("load: %v, %d definitions", err, len(res.Definitions))
		}
		return res.Definitions[0]
	}
	first := load()
	resolved, err := load().Resolve([]spec.Repository{{URL: "https://github.com/acme/found.git"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resolved.Campaign.Repositories) != 2 || resolved.Digest == first.Digest {
		t.Fatalf("resolved: %d repositories, digest %s; want 2 and another digest", len(resolved.Campaign.Repositories), resolved.Digest)
	}
	again := load()
	if len(again.Campaign.Repositories) != 1 || again.Digest != first.Digest {
		t.Errorf("the next revision's definition has %d repositories, digest %s; want it as loaded: 1, %s",
			len(again.Campaign.Repositories), again.Digest, first.Digest)
	}
}
