package activity

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
)

// sends is a stand-in for heartbeatNow: it keeps what each heartbeat
// carried and answers with answer.
type sends struct {
	mu     sync.Mutex
	got    []any
	answer error
}

func (s *sends) send(_ context.Context, p any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, p)
	return s.answer
}

func (s *sends) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// testBeat is a directBeat of a run whose context it returns, sending
// through s, with its keepalives every few milliseconds when loop is set.
func testBeat(t *testing.T, s *sends, loop bool) (*directBeat, context.Context) {
	t.Helper()
	ctx, stopped := context.WithCancelCause(t.Context())
	t.Cleanup(func() { stopped(nil) })
	b := newDirectBeat(context.WithoutCancel(ctx), s.send, stopped)
	b.quiet, b.keep = 5*time.Millisecond, 10*time.Millisecond
	if loop {
		b.wg.Go(b.loop)
	}
	return b, ctx
}

// waitFor waits until cond holds, failing the test when it does not
// within a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %s within a minute", what)
		}
	}
}

// The heartbeat a run of units sends before a unit is its beat: the next
// one it sends of its own is due 80% of the timeout after it, and the
// first half the timeout after the start.
func TestDirectBeatCountsEveryHeartbeatItSends(t *testing.T) {
	b, _ := testBeat(t, &sends{}, false)
	b.quiet, b.keep = 5*time.Second, 8*time.Second
	if got, want := b.due(), b.began.Add(5*time.Second); !got.Equal(want) {
		t.Fatalf("first heartbeat due %v after the start; want 5s", got.Sub(b.began))
	}
	before := time.Now()
	if ok, err := b.gate(unitsProgress{Current: runProgress{Sandbox: "u2"}}); !ok || err != nil {
		t.Fatalf("gate: %v, %v; want the run still wanted", ok, err)
	}
	if due := b.due(); due.Before(before.Add(8*time.Second)) || due.After(time.Now().Add(8*time.Second)) {
		t.Errorf("after the gate's heartbeat the next is due %v from now; want 8s", time.Until(due))
	}
}

// A run whose heartbeat says it was cancelled has its context ended with
// that cancellation, which its unit at work asks about, and heartbeats
// on while that unit finishes.
func TestDirectBeatOfACancelledRunBeatsOn(t *testing.T) {
	s := &sends{answer: temporal.NewCanceledError()}
	b, ctx := testBeat(t, s, true)
	defer b.stop()
	b.set("progress", false)
	waitFor(t, "third heartbeat", func() bool { return s.count() >= 3 })
	var ce *temporal.CanceledError
	if !errors.As(context.Cause(ctx), &ce) {
		t.Errorf("the run's context ended with %v; want the cancellation", context.Cause(ctx))
	}
	if ok, err := b.gate(unitsProgress{}); ok || err != nil {
		t.Errorf("gate of a cancelled run: %v, %v; want not wanted, no error", ok, err)
	}
}

// A heartbeat that fails (the activity is gone, the server unreachable
// for longer than the timeout) ends the run with that failure, and the
// beats stop.
func TestDirectBeatStopsAtAFailedHeartbeat(t *testing.T) {
	gone := errors.New("activity not found")
	s := &sends{answer: gone}
	b, ctx := testBeat(t, s, true)
	ended := make(chan struct{})
	go func() { b.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(time.Minute):
		b.stop()
		t.Fatal("the beats went on after a failed heartbeat")
	}
	if !errors.Is(context.Cause(ctx), gone) || s.count() != 1 {
		t.Errorf("cause %v after %d heartbeats; want the failure after one", context.Cause(ctx), s.count())
	}
	close(b.done)
}

// A run about to fail heartbeats the progress it has not sent (the
// attempt after starts from it), and only that.
func TestDirectBeatFlushesWhatItDidNotSend(t *testing.T) {
	s := &sends{}
	b, _ := testBeat(t, s, false)
	b.flush()
	if s.count() != 0 {
		t.Fatalf("flush with no progress sent %v", s.got)
	}
	if ok, err := b.gate(unitsProgress{Current: runProgress{Sandbox: "u2"}}); !ok || err != nil {
		t.Fatalf("gate: %v, %v", ok, err)
	}
	b.flush()
	b.set("u2 done", false)
	b.flush()
	b.flush()
	if s.count() != 2 || s.got[1] != "u2 done" {
		t.Errorf("heartbeats %v; want the gate's, then u2 done once", s.got)
	}
}
