package dispatch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestACampaignStartsAPageOfUnitsAtATime, on the embedded server with a
// stand-in for the Campaign workflow: a campaign of 1,201 repositories
// starts with its first page's 500 units, and the run it started is
// signalled the other two pages, in order; a spec update in place goes
// the same way; and fleetlift retry reads its units whole again from the
// start and the signals.
func TestACampaignStartsAPageOfUnitsAtATime(t *testing.T) {
	ctx := context.Background()
	c := embedded(t)
	var mu sync.Mutex
	var starts []workflow.CampaignInput
	var pieces, updatePieces []workflow.UnitsPiece
	var update *workflow.UpdateSignal
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.CampaignInput) (status.CampaignState, error) {
		mu.Lock()
		starts = append(starts, in)
		mu.Unlock()
		if len(starts) > 1 {
			return status.CampaignState{Phase: status.CampaignCompleted}, nil
		}
		units := sdkworkflow.GetSignalChannel(ctx, workflow.SignalUnits)
		for range in.Pieces - 1 {
			var pc workflow.UnitsPiece
			units.Receive(ctx, &pc)
			mu.Lock()
			pieces = append(pieces, pc)
			mu.Unlock()
		}
		var u workflow.UpdateSignal
		sdkworkflow.GetSignalChannel(ctx, workflow.SignalUpdate).Receive(ctx, &u)
		for range u.Input.Pieces - 1 {
			var pc workflow.UnitsPiece
			units.Receive(ctx, &pc)
			mu.Lock()
			updatePieces = append(updatePieces, pc)
			mu.Unlock()
		}
		mu.Lock()
		update = &u
		mu.Unlock()
		// One unit failed, so that a retry has one to run again.
		st := status.CampaignState{Phase: status.CampaignCompletedWithFailures}
		st.Units = append(st.Units, status.UnitResult{Key: in.Units[0].Key, Phase: status.TaskFailed, Error: "boom"})
		return st, nil
	}, sdkworkflow.RegisterOptions{Name: "Campaign"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	d := bigCampaign(t, "big", 1201)
	run, err := dispatch.StartRun(ctx, c, d, workflow.Options{}, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	tmp := &dispatch.Temporal{Client: c}
	if err := tmp.UpdateInPlace(ctx, bigCampaign(t, "big", 1100), state.Campaign{ID: "big", Kind: state.KindCampaign, WorkflowID: run.GetID(), Generation: 1}, ""); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	head := starts[0]
	if n := len(head.Units); n != 500 || head.Pieces != 3 {
		t.Errorf("the start carried %d units of %d pieces; want the first page's 500, of 3", n, head.Pieces)
	}
	if len(pieces) != 2 || pieces[0].Index != 1 || len(pieces[0].Units) != 500 || pieces[1].Index != 2 || len(pieces[1].Units) != 201 ||
		pieces[1].Units[200].Key != "svc-1200" {
		t.Errorf("pieces: %s", describePieces(pieces))
	}
	if update == nil || len(update.Input.Units) != 500 || update.Input.Pieces != 3 || len(updatePieces) != 2 || len(updatePieces[1].Units) != 100 ||
		updatePieces[1].Generation != 2 {
		t.Errorf("the update carried %v; its pieces: %s", update != nil && len(update.Input.Units) == 500, describePieces(updatePieces))
	}
	mu.Unlock()

	// fleetlift retry: the run ended with a result that is not in pages,
	// so it starts again with its results and every unit it started with.
	if _, err := dispatch.RetryFailed(ctx, c, run.GetID()); err != nil {
		t.Fatalf("retry: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		n := len(starts)
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the retry did not start the campaign again")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	again := starts[1]
	if len(again.Units) != 1201 || again.Units[1200].Key != "svc-1200" || again.Progress == nil || strings.Join(again.Progress.Retry, ",") != "svc-0000" {
		t.Errorf("started again with %d units, retrying %v; want all 1201 read back, svc-0000 again", len(again.Units), again.Progress)
	}
}

// bigCampaign is a loaded Campaign id of n repositories.
func bigCampaign(t *testing.T, id string, n int) spec.Definition {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nkind: Campaign\nid: %s\ntitle: T\ntemplate:\n  execution:\n    deterministic:\n      image: golang\n      command: [\"true\"]\nrepositories:\n", id)
	for i := range n {
		fmt.Fprintf(&b, "  - url: https://github.com/acme/svc-%04d.git\n", i)
	}
	res, err := (&spec.Loader{}).Load(context.Background(), fstest.MapFS{"campaigns/" + id + ".yaml": {Data: []byte(b.String())}}, "campaigns")
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("load: %v %v", err, res.Errors)
	}
	return res.Definitions[0]
}

func describePieces(pieces []workflow.UnitsPiece) string {
	var out []string
	for _, pc := range pieces {
		out = append(out, fmt.Sprintf("#%d gen %d: %d units", pc.Index, pc.Generation, len(pc.Units)))
	}
	return strings.Join(out, "; ")
}

// TestRegenerateNamesUnitsAPageAtATime, on the embedded server with a
// stand-in campaign: asking a running campaign to make 1,201 changes
// again signals it the keys in batches of at most a page's worth, every
// key once.
func TestRegenerateNamesUnitsAPageAtATime(t *testing.T) {
	ctx := context.Background()
	c := embedded(t)
	got := make(chan []int, 1)
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.CampaignInput) (status.CampaignState, error) {
		var sizes []int
		seen := map[string]bool{}
		ch := sdkworkflow.GetSignalChannel(ctx, workflow.SignalRegenerate)
		for len(seen) < 1201 {
			var s workflow.RegenerateSignal
			ch.Receive(ctx, &s)
			sizes = append(sizes, len(s.Units))
			for _, k := range s.Units {
				seen[k] = true
			}
		}
		got <- sizes
		return status.CampaignState{Phase: status.CampaignCompleted}, nil
	}, sdkworkflow.RegisterOptions{Name: "Campaign"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "campaign/wide", TaskQueue: workflow.TaskQueue}, "Campaign",
		workflow.CampaignInput{ID: "wide"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 1201 {
		keys = append(keys, fmt.Sprintf("svc-%04d", i))
	}
	if _, err := dispatch.Regenerate(ctx, c, run.GetID(), keys); err != nil {
		t.Fatal(err)
	}
	select {
	case sizes := <-got:
		if fmt.Sprint(sizes) != "[500 500 201]" {
			t.Errorf("signals named %v units; want [500 500 201]", sizes)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the campaign was not handed every key")
	}
}

// TestResendPiecesSendsTheMissingPages, on the embedded server with a
// stand-in campaign: a run whose starter stopped right after the start,
// before any page of units went out, is sent pages 2 and 3 again from its
// spec, in order and as its start announced them; a spec whose
// repositories changed since makes other pages, and none is sent.
func TestResendPiecesSendsTheMissingPages(t *testing.T) {
	ctx := context.Background()
	c := embedded(t)
	var mu sync.Mutex
	var got []workflow.UnitsPiece
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.CampaignInput) (status.CampaignState, error) {
		units := sdkworkflow.GetSignalChannel(ctx, workflow.SignalUnits)
		for range in.Pieces - 1 {
			var pc workflow.UnitsPiece
			units.Receive(ctx, &pc)
			mu.Lock()
			got = append(got, pc)
			mu.Unlock()
		}
		return status.CampaignState{Phase: status.CampaignCompleted}, nil
	}, sdkworkflow.RegisterOptions{Name: "Campaign"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	d := bigCampaign(t, "big", 1201)
	s, err := workflow.ForDefinition(d, workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := *s.Campaign
	in.Generation = 1
	head, pieces := workflow.Split(in)
	// What a starter killed between its start and its signals left.
	run, err := dispatch.Execute(ctx, c, client.StartWorkflowOptions{ID: s.WorkflowID, TaskQueue: workflow.TaskQueue}, "Campaign", head)
	if err != nil {
		t.Fatal(err)
	}
	rec := state.Campaign{ID: "big", Kind: state.KindCampaign, WorkflowID: run.GetID(), RunID: run.GetRunID(), Generation: 1, AwaitingPieces: 1}
	tmp := &dispatch.Temporal{Client: c}
	if err := tmp.ResendPieces(ctx, bigCampaign(t, "big", 1300), rec); err == nil || !strings.Contains(err.Error(), "no longer makes the ones it started with") {
		t.Errorf("sending pages of a spec whose repositories changed: %v; want a refusal", err)
	}
	if err := tmp.ResendPieces(ctx, d, rec); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var st status.CampaignState
	if err := run.Get(cctx, &st); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].Index != 1 || got[1].Index != 2 || got[0].Digest != pieces[0].Digest || got[1].Digest != pieces[1].Digest ||
		len(got[0].Units) != 500 || len(got[1].Units) != 201 {
		t.Errorf("the run was sent %s; want #1 of 500 units and #2 of 201, as announced", describePieces(got))
	}
}
