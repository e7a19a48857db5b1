// Command plan measures `fleetlift plan`'s work on a large campaigns
// repository: N campaigns of M repositories each, against recorded state of
// the same size (a state file; a tenth of the campaigns edited since), and
// `cue export` of the same files in the same run.
//
//	go run ./bench/plan -cue bin/cue
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/fleetlift/fleetlift/bench/internal/baseline"
	"github.com/fleetlift/fleetlift/bench/internal/gen"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/plan/render"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/state/file"
)

func main() {
	if spec.IsWorker() {
		os.Exit(spec.RunWorker())
	}
	// As cmd/fleetlift does.
	debug.SetGCPercent(400)
	n := flag.Int("campaigns", 1000, "campaign files")
	repos := flag.Int("repos", 50, "repositories per campaign")
	runs := flag.Int("runs", 3, "runs of each; the best is reported")
	cueBin := flag.String("cue", "bin/cue", "cue CLI to compare with")
	flag.Parse()
	if err := run(*n, *repos, *runs, *cueBin); err != nil {
		fmt.Fprintln(os.Stderr, "bench-plan:", err)
		os.Exit(1)
	}
}

func run(n, repos, runs int, cueBin string) error {
	root, err := os.MkdirTemp("", "fleetlift-bench-plan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	defs := filepath.Join(root, "campaigns")
	names, err := gen.Campaigns(defs, n, repos)
	if err != nil {
		return err
	}
	statePath := filepath.Join(root, "state.json")
	if err := recordState(defs, statePath); err != nil {
		return err
	}

	var times []time.Duration
	var summary string
	for range runs {
		start := time.Now()
		p, err := planOnce(defs, statePath)
		if err != nil {
			return err
		}
		if err := render.Human(io.Discard, p, render.Options{}); err != nil {
			return err
		}
		times = append(times, time.Since(start))
		summary = render.SummaryLine(p)
	}

	cue, err := baseline.CueExport(cueBin, defs, names, runs)
	if err != nil {
		return err
	}
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	best, cue := slices.Min(times), cue
	fmt.Printf("bench-plan: %d campaigns x %d repositories against recorded state of the same size, %d CPUs, best of %d\n", n, repos, runtime.NumCPU(), runs)
	fmt.Printf("  %s\n", summary)
	fmt.Printf("  fleetlift plan (load, validate, read state, compute, render): %7.0f ms (goal <= 1000 ms)\n", ms(best))
	fmt.Printf("  cue export of the same files (no schema, no state):           %7.0f ms\n", ms(cue))
	fmt.Printf("  ratio fleetlift / cue export: %.2fx (goal <= 1.00x)\n", float64(best)/float64(cue))
	fmt.Printf("  peak RSS: bench process %d MiB, largest child (spec worker or cue) %d MiB\n", self.Maxrss>>10, children.Maxrss>>10)
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// planOnce is what `fleetlift plan --state file:PATH` does after reading
// the revision: load and validate, read the state, compute.
func planOnce(defs, statePath string) (plan.Plan, error) {
	ctx := context.Background()
	pool, err := spec.NewSelfPool()
	if err != nil {
		return plan.Plan{}, err
	}
	defer pool.Close()
	res, err := (&spec.Loader{Eval: pool}).Load(ctx, os.DirFS(defs), ".")
	if err != nil {
		return plan.Plan{}, err
	}
	if len(res.Errors) > 0 {
		return plan.Plan{}, res.Err()
	}
	recorded, err := file.New(statePath).List(ctx)
	if err != nil {
		return plan.Plan{}, err
	}
	return plan.Compute(plan.Desired{Definitions: res.Definitions, Errors: res.Errors}, recorded, plan.Policy{}), nil
}

// recordState writes a state file as if every campaign had been applied,
// a tenth of them with an older prompt.
func recordState(defs, path string) error {
	ctx := context.Background()
	res, err := (&spec.Loader{}).Load(ctx, os.DirFS(defs), ".")
	if err != nil || len(res.Errors) > 0 {
		return fmt.Errorf("load: %v %v", err, res.Err())
	}
	st := file.New(path)
	for i, d := range res.Definitions {
		c := *d.Campaign
		if i%10 == 0 {
			c.Template.Execution.Agentic.Prompt = "An older prompt."
		}
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		digest, err := spec.Digest(c)
		if err != nil {
			return err
		}
		rec := state.Campaign{ID: d.ID, Kind: state.KindCampaign, File: d.File, SpecDigest: digest, Spec: b, Generation: 1, Phase: state.PhaseRunning}
		for _, r := range c.Repositories {
			rec.Repos = append(rec.Repos, state.Repo{Name: r.Name, Status: state.RepoCompleted, Branch: "auto/" + d.ID})
		}
		if err := st.Put(ctx, rec); err != nil {
			return err
		}
	}
	return nil
}
