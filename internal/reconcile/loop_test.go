package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/reconcile"
)

// wait is how long a test waits for something that should happen at once.
// It bounds a hang, it does not measure speed.
const wait = 5 * time.Second

// loop runs h.r.Run in the background with o, reporting each pass on the
// returned channel; stop cancels it and waits for Run to return.
func loop(t *testing.T, h *harness, o reconcile.LoopOptions) (passes <-chan error, stop func()) {
	t.Helper()
	ch := make(chan error, 1000)
	o.OnPass = func(_ *reconcile.Result, err error) { ch <- err }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.r.Run(ctx, o) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after cancel, want nil", err)
			}
		case <-time.After(wait):
			t.Fatal("Run did not return after its context was cancelled")
		}
	}
	t.Cleanup(stop)
	return ch, stop
}

func waitPass(t *testing.T, passes <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-passes:
		return err
	case <-time.After(wait):
		t.Fatalf("no pass within %s %s", wait, what)
		return nil
	}
}

func send(t *testing.T, hints chan<- struct{}) {
	t.Helper()
	select {
	case hints <- struct{}{}:
	case <-time.After(wait):
		t.Fatal("the loop did not take a hint")
	}
}

func TestRunHintWakesLoop(t *testing.T) {
	h := newHarness()
	h.src.push(revision(t, "c1", nil))
	hints := make(chan struct{})
	passes, stop := loop(t, h, reconcile.LoopOptions{Interval: time.Hour, Hints: hints})

	waitPass(t, passes, "at start")
	h.src.push(revision(t, "c2", files{"campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
	send(t, hints)
	waitPass(t, passes, "after a hint (the interval is an hour)")
	h.wantCalls(t, "pass after the hint", "start slog gen=1 rev=c2")
	stop()
}

func TestRunDebouncesHints(t *testing.T) {
	h := newHarness()
	h.src.push(revision(t, "c1", nil))
	hints := make(chan struct{}) // unbuffered: a send returns once the loop took it
	passes, stop := loop(t, h, reconcile.LoopOptions{Interval: time.Hour, Hints: hints, Debounce: 200 * time.Millisecond})
	waitPass(t, passes, "at start")

	for range 10 {
		send(t, hints)
	}
	// The loop has taken every hint, so it is waiting, not in a pass:
	// whatever passes ran are reported, and exactly one more follows the
	// last hint.
	extra := len(passes) + 1
	for range extra {
		waitPass(t, passes, "after the burst")
	}
	stop()
	if n := len(passes); n != 0 {
		t.Errorf("%d passes after the one following the last hint", n)
	}
	if extra > 2 {
		t.Errorf("a burst of 10 hints caused %d passes, want 1 (at most 2)", extra)
	}
}

func TestRunPolls(t *testing.T) {
	h := newHarness()
	h.src.push(revision(t, "c1", nil))
	passes, stop := loop(t, h, reconcile.LoopOptions{Interval: 10 * time.Millisecond})
	for i := range 3 {
		waitPass(t, passes, "without hints")
		if i == 0 {
			h.src.push(revision(t, "c2", files{"campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
		}
	}
	stop()
	// Every pass after the push saw c2; the start repeats (nothing records
	// the run here) and is the same each time.
	for _, c := range h.disp.take() {
		if c != "start slog gen=1 rev=c2" {
			t.Errorf("dispatched %q, want only start slog gen=1 rev=c2", c)
		}
	}
}

func TestRunKeepsGoingAfterFailedPass(t *testing.T) {
	h := newHarness()
	boom := errors.New("remote unreachable")
	h.src.headErr = boom
	hints := make(chan struct{})
	passes, stop := loop(t, h, reconcile.LoopOptions{Interval: time.Hour, Hints: hints})

	if err := waitPass(t, passes, "at start"); !errors.Is(err, boom) {
		t.Fatalf("first pass: error %v, want %v", err, boom)
	}
	h.src.mu.Lock()
	h.src.headErr = nil
	h.src.mu.Unlock()
	h.src.push(revision(t, "c1", files{"campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
	send(t, hints)
	if err := waitPass(t, passes, "after a hint"); err != nil {
		t.Fatalf("pass after the failure: %v", err)
	}
	h.wantCalls(t, "pass after the failure", "start slog gen=1 rev=c1")
	stop()
}

func TestRunStopsWhileGatheringHints(t *testing.T) {
	h := newHarness()
	h.src.push(revision(t, "c1", nil))
	hints := make(chan struct{})
	passes, stop := loop(t, h, reconcile.LoopOptions{Interval: time.Hour, Hints: hints, Debounce: time.Hour})
	waitPass(t, passes, "at start")
	send(t, hints) // the loop now gathers hints for an hour
	stop()         // and returns at once when cancelled
	if n := len(passes); n != 0 {
		t.Errorf("%d passes after cancel, want none", n)
	}
}

// A hint given while one is pending is that hint: giving never blocks,
// and the loop looks again once for both.
func TestNewHintsGathersPendingHints(t *testing.T) {
	hints, hint := reconcile.NewHints()
	hint()
	hint()
	select {
	case <-hints:
	default:
		t.Fatal("no hint pending after two were given")
	}
	select {
	case <-hints:
		t.Fatal("two hints pending; want the second gathered into the first")
	default:
	}
}
