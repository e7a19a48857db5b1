package follow

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/fleetlift/fleetlift/internal/status"
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
	news := NewNews()
	p := newReadPace(news)
	p.idle, p.every = time.Hour, 0
	p.read(time.Now())
	got := waitAsync(p, nil)
	if _, done := returnedWithin(got, 100*time.Millisecond); done {
		t.Fatal("follow read its run again with no news and its idle time not up")
	}
	news.Tell(true)
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
	news.Tell(false)
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
	news := NewNews()
	p := newReadPace(news)
	p.idle, p.every = time.Hour, 0
	news.Tell(false)
	time.Sleep(time.Millisecond)
	p.read(time.Now())
	if _, done := returnedWithin(waitAsync(p, nil), 100*time.Millisecond); done {
		t.Fatal("follow read its run again for an activity's start that its last read showed")
	}

	news = NewNews()
	p = newReadPace(news)
	p.idle, p.every = time.Hour, 0
	news.Tell(true)
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
	news := NewNews()
	p := newReadPace(news)
	p.idle, p.every = time.Hour, time.Hour
	p.read(time.Now())
	got := waitAsync(p, nil)
	news.UnitEnded("campaign/c", status.UnitOutcome{Key: "r1", Attempt: 1})
	news.UnitStarted("campaign/c", status.UnitRef{Key: "r2", Attempt: 1})
	news.UnitEnded("campaign/other", status.UnitOutcome{Key: "r9", Attempt: 1})
	if ended, done := returnedWithin(got, time.Minute); !done || ended || !p.unitsOnly {
		t.Fatalf("a unit ended: wait answered %v (done %v, units only %v); want a drawing without a read", ended, done, p.unitsOnly)
	}
	var rp status.RunsProgress
	p.shown, rp = news.unitsOf("campaign/c")
	if len(rp.Done) != 1 || rp.Done[0].Key != "r1" || len(rp.AtWork) != 1 || rp.AtWork[0].Key != "r2" {
		t.Fatalf("units of campaign/c: %+v", rp)
	}
	// Only for a campaign whose units at work the worker told of does
	// follow leave out the runs' heartbeats: r1 ended and r2 started
	// here, while r5 is the first unit of a run another process started,
	// waiting for its next attempt, whose heartbeats alone say which of
	// its units it finished.
	read := func(units ...status.UnitResult) *status.Run {
		return &status.Run{Campaign: &status.CampaignState{Units: units}}
	}
	running := func(key string) status.UnitResult {
		return status.UnitResult{Key: key, Phase: status.TaskRunning, Attempts: 1}
	}
	queued := status.UnitResult{Key: "r3", Phase: status.TaskQueued, Attempts: 1}
	var none *News
	for _, c := range []struct {
		name string
		n    *News
		id   string
		st   *status.Run
		want bool
	}{
		{"its units at work told", news, "campaign/c", read(running("r1"), running("r2"), queued), true},
		{"a run waiting for its retry", news, "campaign/c", read(running("r1"), running("r5")), false},
		{"r2 in another attempt", news, "campaign/c", read(status.UnitResult{Key: "r2", Phase: status.TaskRunning, Attempts: 2}), false},
		{"a campaign the worker told nothing of", news, "campaign/d", read(), false},
		{"no worker here", none, "campaign/c", read(running("r1")), false},
		{"no read yet", news, "campaign/c", nil, false},
	} {
		if got := c.n.tells(c.id, c.st); got != c.want {
			t.Errorf("%s: tells %v, want %v", c.name, got, c.want)
		}
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

// TestFollowingPassesOverTimeouts: a read of the run that timed out, or
// found the server unavailable or busy, is tried again (run goes on
// following, and its worker on working); one that finds no run, or the
// run ended otherwise, ends following.
func TestFollowingPassesOverTimeouts(t *testing.T) {
	for _, c := range []struct {
		err  error
		pass bool
	}{
		{fmt.Errorf("query campaign/huge (is a worker running?): %w", context.DeadlineExceeded), true},
		{fmt.Errorf("query campaign/huge: %w", serviceerror.NewDeadlineExceeded("deadline exceeded")), true},
		{fmt.Errorf("describe campaign/huge: %w", serviceerror.NewUnavailable("connection refused")), true},
		{serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT, "busy"), true},
		{fmt.Errorf("describe campaign/gone: %w", serviceerror.NewNotFound("no such workflow")), false},
		{errors.New("campaign/huge ended terminated"), false},
	} {
		if got := passing(c.err); got != c.pass {
			t.Errorf("passing(%v) = %v, want %v", c.err, got, c.pass)
		}
	}
}
