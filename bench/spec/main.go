// Command spec measures loading definitions: it generates N campaign
// files, loads them with fleetlift's loader (worker pool, as `fleetlift
// validate` does) and runs `cue export` on the same files in the same run,
// then prints both times, the ratio and fleetlift's peak memory.
//
//	go run ./bench/spec -cue bin/cue
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"github.com/fleetlift/fleetlift/bench/internal/baseline"
	"github.com/fleetlift/fleetlift/bench/internal/gen"
	"github.com/fleetlift/fleetlift/internal/spec"
)

func main() {
	if spec.IsWorker() {
		os.Exit(spec.RunWorker())
	}
	// As cmd/fleetlift does.
	debug.SetGCPercent(400)
	files := flag.Int("files", 2000, "campaign files to generate")
	repos := flag.Int("repos", 25, "repositories per campaign")
	runs := flag.Int("runs", 3, "runs of each; the best is reported")
	cueBin := flag.String("cue", "bin/cue", "cue CLI to compare with (same version as the module)")
	flag.Parse()
	if err := run(*files, *repos, *runs, *cueBin); err != nil {
		fmt.Fprintln(os.Stderr, "bench-spec:", err)
		os.Exit(1)
	}
}

func run(files, repos, runs int, cueBin string) error {
	dir, err := os.MkdirTemp("", "fleetlift-bench-spec-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	names, err := gen.Campaigns(dir, files, repos)
	if err != nil {
		return err
	}
	ctx := context.Background()

	var fl []time.Duration
	for range runs {
		pool, err := spec.NewSelfPool()
		if err != nil {
			return err
		}
		start := time.Now()
		res, err := (&spec.Loader{Eval: pool}).Load(ctx, os.DirFS(dir), ".")
		d := time.Since(start)
		pool.Close()
		if err != nil {
			return err
		}
		if len(res.Errors) > 0 || len(res.Definitions) != files {
			return fmt.Errorf("loaded %d of %d definitions: %v", len(res.Definitions), files, res.Err())
		}
		fl = append(fl, d)
	}

	cue, err := baseline.CueExport(cueBin, dir, names, runs)
	if err != nil {
		return err
	}

	best := func(ds []time.Duration) time.Duration { return slices.Min(ds) }
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	var self syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	fmt.Printf("bench-spec: %d campaign files x %d repositories, %d CPUs, best of %d\n", files, repos, runtime.NumCPU(), runs)
	fmt.Printf("  fleetlift load (schema unify, defaults, decode, digest): %8.0f ms\n", ms(best(fl)))
	fmt.Printf("  cue export of the same files (no schema):               %8.0f ms\n", ms(cue))
	fmt.Printf("  ratio fleetlift / cue export: %.2fx (goal <= 1.00x)\n", float64(best(fl))/float64(cue))
	fmt.Printf("  peak RSS: bench process %d MiB, largest child (worker or cue) %d MiB\n", self.Maxrss>>10, ru.Maxrss>>10)
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
