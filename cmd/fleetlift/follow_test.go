package main

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
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
	news := make(chan struct{}, 1)
	p := newReadPace(news)
	p.idle, p.every, p.settle = time.Hour, 0, 0
	p.read(time.Now())
	got := waitAsync(p, nil)
	if _, done := returnedWithin(got, 100*time.Millisecond); done {
		t.Fatal("follow read its run again with no news and its idle time not up")
	}
	news <- struct{}{}
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
	news <- struct{}{}
	if _, done := returnedWithin(got, 100*time.Millisecond); done {
		t.Fatal("follow read its run again sooner than the least time between reads")
	}
	close(ended)
	if v, done := returnedWithin(got, time.Minute); !done || !v {
		t.Fatalf("the run ended while follow waited: wait answered %v (done %v)", v, done)
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
	wf := &workerFlags{activityNews: func() { calls++ }}
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
	if calls != 2 {
		t.Errorf("news came %d times for one activity; want 2 (its start and its end)", calls)
	}
}
