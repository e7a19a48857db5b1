package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/status"
	runfollow "github.com/fleetlift/fleetlift/internal/status/follow"
)

// The workers of a process that follows its run tell it as each activity
// starts and ends.
func TestWorkerTellsOfEachActivity(t *testing.T) {
	var calls int
	var ends int
	wf := &workerFlags{activityNews: func(ended bool) {
		calls++
		if ended {
			ends++
		}
	}}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.SetWorkerOptions(wf.options())
	step := func(context.Context) (string, error) { return "done", nil }
	env.RegisterActivity(step)
	v, err := env.ExecuteActivity(step)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := v.Get(&out); err != nil || out != "done" {
		t.Fatalf("the activity answered %q, %v", out, err)
	}
	if calls != 2 || ends != 1 {
		t.Errorf("news came %d times for one activity, %d of an end; want 2 (its start and its end)", calls, ends)
	}
}

// standInCampaign answers status queries as a running campaign until it
// is signalled "finish", then ends completed.
func standInCampaign(ctx sdkworkflow.Context, units []status.UnitResult) (status.CampaignState, error) {
	st := status.CampaignState{ID: "stand-in", Phase: status.CampaignRunning, Units: units}
	if err := sdkworkflow.SetQueryHandler(ctx, status.QueryStatus, func() (status.CampaignState, error) { return st, nil }); err != nil {
		return st, err
	}
	sdkworkflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	st.Phase = status.CampaignCompleted
	return st, nil
}

// startStandIn starts a server, a worker of standInCampaign, and the
// stand-in campaign id showing units, and returns a client of the
// server; all stop when the test ends.
func startStandIn(ctx context.Context, t *testing.T, id string, units []status.UnitResult) client.Client {
	t.Helper()
	srv := startServer(t, freeAddr(t), filepath.Join(t.TempDir(), "state"))
	base, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.Close)
	const queue = "follow-test"
	w := worker.New(base, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(standInCampaign, sdkworkflow.RegisterOptions{Name: "Campaign"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if _, err := base.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "Campaign", units); err != nil {
		t.Fatal(err)
	}
	return base
}

// countingClient counts the describes and queries follow makes.
type countingClient struct {
	client.Client
	describes, queries atomic.Int32
	// onQuery runs after each query, with the count so far.
	onQuery func(n int32)
}

func (c *countingClient) DescribeWorkflowExecution(ctx context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	c.describes.Add(1)
	return c.Client.DescribeWorkflowExecution(ctx, id, runID)
}

func (c *countingClient) QueryWorkflow(ctx context.Context, id, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	v, err := c.Client.QueryWorkflow(ctx, id, runID, queryType, args...)
	c.onQuery(c.queries.Add(1))
	return v, err
}

// follow describes a run once to learn what it is, then, while a worker
// in this process tells of its units, only queries it while it runs
// (each describe is a read of the run's record on the server; without
// such a worker each read describes it too, for the progress its runs'
// heartbeats keep), and prints its end once it has ended.
// Interrupted, it says the run goes on and returns errInterrupted.
func TestFollowQueriesARunningRunAndStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const id = "campaign/follow"
	base := startStandIn(ctx, t, id, nil)
	c := &countingClient{Client: base}
	var whileRunning int32
	c.onQuery = func(n int32) {
		if n == 3 {
			whileRunning = c.describes.Load()
			if err := base.SignalWorkflow(ctx, id, "", "finish", nil); err != nil {
				t.Error(err)
			}
		}
	}
	news := runfollow.NewNews()
	news.UnitStarted(id, status.UnitRef{Key: "r1", Attempt: 1})
	var out bytes.Buffer
	if err := follow(ctx, c, devserver.Namespace, id, &out, runfollow.Options{News: news}); err != nil {
		t.Fatalf("follow: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "completed") {
		t.Errorf("follow did not print the run's end:\n%s", out.String())
	}
	if whileRunning != 1 {
		t.Errorf("follow described the run %d times over its first three reads; want once, then queries alone while it runs", whileRunning)
	}

	// Interrupted (Ctrl-C): it says the run goes on.
	cctx, stop := context.WithCancel(ctx)
	stop()
	out.Reset()
	if err := follow(cctx, c, devserver.Namespace, id, &out, runfollow.Options{}); !errors.Is(err, errInterrupted) {
		t.Errorf("interrupted follow returned %v; want errInterrupted", err)
	}
	if !strings.Contains(out.String(), "stopped following "+id+"; it goes on") {
		t.Errorf("interrupted follow printed:\n%s", out.String())
	}
}

// A run of units that another process started waits for its next
// attempt: the campaign shows its first unit at work, and only the run's
// heartbeats say which of its units it finished. While this process's
// worker has told of some of the campaign's units but not of that one,
// follow describes the run at every read, which takes the heartbeats in;
// once the worker tells of it (the run's attempt started here), follow
// queries alone again.
func TestFollowDescribesWhileARunWaitsForItsRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const id = "campaign/follow-retry"
	base := startStandIn(ctx, t, id, []status.UnitResult{
		{Key: "r1", Phase: status.TaskRunning, Attempts: 1},
		{Key: "r5", Phase: status.TaskRunning, Attempts: 1},
	})
	news := runfollow.NewNews()
	news.UnitStarted(id, status.UnitRef{Key: "r1", Attempt: 1})
	c := &countingClient{Client: base}
	var waiting, told int32
	c.onQuery = func(n int32) {
		switch n {
		case 3:
			waiting = c.describes.Load()
			news.UnitStarted(id, status.UnitRef{Key: "r5", Attempt: 1})
		case 7:
			told = c.describes.Load() - waiting
			if err := base.SignalWorkflow(ctx, id, "", "finish", nil); err != nil {
				t.Error(err)
			}
		}
	}
	var out bytes.Buffer
	if err := follow(ctx, c, devserver.Namespace, id, &out, runfollow.Options{News: news}); err != nil {
		t.Fatalf("follow: %v\n%s", err, out.String())
	}
	if waiting != 3 {
		t.Errorf("follow described the run %d times over its first three reads, while r5's run waited; want every read", waiting)
	}
	if told != 0 {
		t.Errorf("follow described the run %d times over four reads once the worker told of r5; want queries alone", told)
	}
}
