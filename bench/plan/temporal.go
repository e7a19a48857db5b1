package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/spec"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// reconcilerPass measures what the reconciler does on a one-file change:
// its kept loader loads the revision, its kept Temporal state reader
// lists the runs, and the plan is computed, against the embedded server
// holding a run of every campaign as the state file records them (each
// ended with its repositories completed; a tenth of an older prompt).
// It returns the best of runs passes, how long the reader's first List,
// which reads every run, took, and the best of runs Lists by a reader
// that reads every run each time (its caches warm), the baseline.
func reconcilerPass(root, defs, file string, runs int) (best phases, firstList, everyRun time.Duration, err error) {
	ctx := context.Background()
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(root, "temporal.db")})
	if err != nil {
		return best, 0, 0, err
	}
	defer srv.Stop()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()},
		Logger:            log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return best, 0, 0, err
	}
	defer c.Close()
	// A stand-in for the Campaign workflow that ends at once with every
	// unit completed: what is recorded, not how it came to be.
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.CampaignInput) (status.CampaignState, error) {
		st := status.CampaignState{ID: in.ID, Phase: status.CampaignCompleted}
		for _, u := range in.Units {
			st.Units = append(st.Units, status.UnitResult{Key: u.Key, Phase: status.TaskCompleted})
		}
		st.Summary.Total, st.Summary.Completed = len(in.Units), len(in.Units)
		return st, nil
	}, sdkworkflow.RegisterOptions{Name: "Campaign"})
	if err := w.Start(); err != nil {
		return best, 0, 0, err
	}
	defer w.Stop()

	res, err := (&spec.Loader{}).Load(ctx, os.DirFS(defs), ".")
	if err != nil || len(res.Errors) > 0 {
		return best, 0, 0, fmt.Errorf("load: %v %v", err, res.Err())
	}
	errs := make(chan error, len(res.Definitions))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, d := range res.Definitions {
		if i%10 == 0 {
			cp := *d.Campaign
			cp.Template.Execution.Agentic.Prompt = "An older prompt."
			if d.Digest, err = spec.Digest(cp); err != nil {
				return best, 0, 0, err
			}
			d.Campaign = &cp
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			run, err := dispatch.StartRun(ctx, c, d, workflow.Options{}, "", 1)
			if err == nil {
				err = run.Get(ctx, nil)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return best, 0, 0, err
		}
	}

	// The campaigns ended a while before the change, as in a
	// repository whose campaigns ran earlier: the reader's later Lists
	// read again what closed within its VisibilityLag before the one
	// before them (a minute by default).
	time.Sleep(time.Minute + 5*time.Second)

	pool, err := spec.NewSelfPool()
	if err != nil {
		return best, 0, 0, err
	}
	defer pool.Close()
	loader := &spec.Loader{Eval: pool, Cache: spec.NewCache(0)}
	reader := &statetemporal.Reader{Client: c}
	// The first pass reads every file and every run; visibility shows
	// every run once it has caught up.
	for deadline := time.Now().Add(time.Minute); ; {
		start := time.Now()
		recorded, err := reader.List(ctx)
		if err != nil {
			return best, 0, 0, err
		}
		firstList = time.Since(start)
		if len(recorded) == len(res.Definitions) {
			break
		}
		if time.Now().After(deadline) {
			return best, 0, 0, fmt.Errorf("visibility shows %d of %d runs", len(recorded), len(res.Definitions))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := loader.Revision().Load(ctx, os.DirFS(defs), "."); err != nil {
		return best, 0, 0, err
	}

	best, err = bestAfterEdits(defs, file, runs, func() (phases, error) {
		var t phases
		start := time.Now()
		res, err := loader.Revision().Load(ctx, os.DirFS(defs), ".")
		if err != nil {
			return t, err
		}
		t.load = time.Since(start)
		s := time.Now()
		recorded, err := reader.List(ctx)
		if err != nil {
			return t, err
		}
		t.state = time.Since(s)
		s = time.Now()
		p := plan.Compute(plan.Desired{Definitions: res.Definitions, Errors: res.Errors}, recorded, plan.Policy{})
		t.compute = time.Since(s)
		if p.Summary().Update == 0 {
			return t, fmt.Errorf("the plan against Temporal's state updates nothing: %+v", p.Summary())
		}
		return t, nil
	})
	if err != nil {
		return best, 0, 0, err
	}
	full := &statetemporal.Reader{Client: c, FullListEvery: -1}
	for i := range runs + 1 {
		start := time.Now()
		if _, err := full.List(ctx); err != nil {
			return best, 0, 0, err
		}
		if d := time.Since(start); i == 1 || i > 1 && d < everyRun {
			everyRun = d
		}
	}
	return best, firstList, everyRun, nil
}
