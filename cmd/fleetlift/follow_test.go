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

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// waitAsync runs p.wait and hands its answer on the returned channel.
func waitAsync(p *readPace, ended <-chan struct{}) <-chan bool {
	got := make(chan bool, 1)
	go func() { got <- p.wait(context.Background(), ended) }()
	return got
}

// returnedWithin reports whether got answered within d (a bound on how
// long the test looks, not on how fast the code is).
func returnedWithin(got <-chan bool, d time.Duration) (bool, bool) {
	select {
	case v := <-got:
		return v, true
	case <-time.After(d):
		return false, false
	}
}

// With a worker in this process, follow reads its run when the worker
// has news (an activity began or ended), not on a clock; the run's end
// is read at once; and two reads are never closer than the least time
// between reads, however much news comes.
func TestFollowReadsTheRunWhenTheWorkerHasNews(t *testing.T) {
	news := newWorkerNews()
	p := newReadPace(news)
	p.idle, p.every = time.Hour, 0
	p.read(time.Now())
	got := waitAsync(p, nil)
	if _, done := returnedWithin(got, 100*time.Millisecond); done {
		t.Fatal("follow read its run again with no news and its idle time not up")
	}
	news.tell(true)
	if ended, done := returnedWithin(got, time.Minute); !done || ended {
		t.Fatalf("news from the worker: wait answered %v (done %v); want a read", ended, done)
	}

	ended := make(chan struct{})
	got = waitAsync(p, ended)
	close(ended)
	if v, done := returnedWithin(got, time.Minute); !done || !v {
		t.Fatalf("the run ended: wait answered %v (done %v); want it told", v, done)
	}

	// News right after a read waits for the least time between reads.
	p.every = time.Hour
	p.read(time.Now())
	ended = make(chan struct{})
	got = waitAsync(p, ended)
	time.Sleep(time.Millisecond)
	news.tell(false)
	if _, done := returnedWithin(got, 100*time.Millisecond); done {
		t.Fatal("follow read its run again sooner than the least time between reads")
	}
	close(ended)
	if v, done := returnedWithin(got, time.Minute); !done || !v {
		t.Fatalf("the run ended while follow waited: wait answered %v (done %v)", v, done)
	}
}

// News that a read which began after it already shows reads the run no
// more: the start of an activity is in the run's state at once, so the
// read after one unit's end shows the next unit's start that came while
// it waited for the end to be taken in. An end comes into the state only
// once the run has taken it in: a read that began sooner does not show
// it.
func TestFollowDoesNotReadNewsAReadShowed(t *testing.T) {
	news := newWorkerNews()
	p := newReadPace(news)
	p.idle, p.every = time.Hour, 0
	news.tell(false)
	time.Sleep(time.Millisecond)
	p.read(time.Now())
	if _, done := returnedWithin(waitAsync(p, nil), 100*time.Millisecond); done {
		t.Fatal("follow read its run again for an activity's start that its last read showed")
	}

	news = newWorkerNews()
	p = newReadPace(news)
	p.idle, p.every = time.Hour, 0
	news.tell(true)
	p.read(time.Now())
	if ended, done := returnedWithin(waitAsync(p, nil), time.Minute); !done || ended {
		t.Fatalf("an activity ended just before a read began: wait answered %v (done %v); want another read once the run took it in", ended, done)
	}
}

// A unit of a run that ends is drawn at once, from what the worker told,
// without a read of the run (which shows it only once the run reports)
// and whatever the least time between reads; units already drawn wake
// nothing.
func TestFollowDrawsAUnitAsItEnds(t *testing.T) {
	news := newWorkerNews()
	p := newReadPace(news)
	p.idle, p.every = time.Hour, time.Hour
	p.read(time.Now())
	got := waitAsync(p, nil)
	news.unitEnded("campaign/c", activity.UnitOutcome{Key: "r1", Attempt: 1})
	news.unitStarted("campaign/c", activity.UnitRef{Key: "r2", Attempt: 1})
	news.unitEnded("campaign/other", activity.UnitOutcome{Key: "r9", Attempt: 1})
	if ended, done := returnedWithin(got, time.Minute); !done || ended || !p.unitsOnly {
		t.Fatalf("a unit ended: wait answered %v (done %v, units only %v); want a drawing without a read", ended, done, p.unitsOnly)
	}
	var rp activity.RunsProgress
	p.shown, rp = news.unitsOf("campaign/c")
	if len(rp.Done) != 1 || rp.Done[0].Key != "r1" || len(rp.AtWork) != 1 || rp.AtWork[0].Key != "r2" {
		t.Fatalf("units of campaign/c: %+v", rp)
	}
	if _, done := returnedWithin(waitAsync(p, nil), 100*time.Millisecond); done {
		t.Fatal("follow drew again for units it had drawn")
	}
}

// Without a worker in this process (--no-worker), follow reads its run
// on a clock.
func TestFollowWithoutNewsReadsOnAClock(t *testing.T) {
	p := newReadPace(nil)
	if p.idle != p.every {
		t.Fatalf("without news follow waits up to %s between reads; want its least time, %s", p.idle, p.every)
	}
	p.idle = 10 * time.Millisecond
	p.read(time.Now())
	if ended, done := returnedWithin(waitAsync(p, nil), time.Minute); !done || ended {
		t.Fatalf("wait answered %v (done %v); want a read when the time is up", ended, done)
	}
}

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
func standInCampaign(ctx sdkworkflow.Context) (workflow.CampaignState, error) {
	st := workflow.CampaignState{ID: "stand-in", Phase: workflow.CampaignRunning}
	if err := sdkworkflow.SetQueryHandler(ctx, workflow.QueryStatus, func() (workflow.CampaignState, error) { return st, nil }); err != nil {
		return st, err
	}
	sdkworkflow.GetSignalChannel(ctx, "finish").Receive(ctx, nil)
	st.Phase = workflow.CampaignCompleted
	return st, nil
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

// follow describes a run once to learn what it is, then only queries it
// while it runs (each describe is a read of the run's record on the
// server), and prints its end once it has ended.
// Interrupted, it says the run goes on and returns errInterrupted.
func TestFollowQueriesARunningRunAndStopsWhenInterrupted(t *testing.T) {
	root := t.TempDir()
	srv := startServer(t, freeAddr(t), filepath.Join(root, "state"))
	base, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	const queue = "follow-test"
	w := worker.New(base, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(standInCampaign, sdkworkflow.RegisterOptions{Name: "Campaign"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const id = "campaign/follow"
	if _, err := base.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "Campaign"); err != nil {
		t.Fatal(err)
	}
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
	var out bytes.Buffer
	if err := follow(ctx, c, devserver.Namespace, id, &out, false, nil); err != nil {
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
	if err := follow(cctx, c, devserver.Namespace, id, &out, false, nil); !errors.Is(err, errInterrupted) {
		t.Errorf("interrupted follow returned %v; want errInterrupted", err)
	}
	if !strings.Contains(out.String(), "stopped following "+id+"; it goes on") {
		t.Errorf("interrupted follow printed:\n%s", out.String())
	}
}
