package activity

import (
	"context"
	"errors"
	"sync"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// directBeat is a run of units' beat (RunUnits). It sends its heartbeats
// itself (heartbeatNow), past Temporal's client, so that the heartbeat
// the run sends before each unit, whose answer says whether the campaign
// cancelled the run, is its beat as well: the client's timer knows
// nothing of those and would add heartbeats of its own, each a write of
// the workflow's state on the server.
//
// It sends the progress when told to (gate, or set with now), and
// otherwise once nothing was sent for a while: the first half the
// heartbeat timeout after the start, as beat waits, then 80% of the
// timeout after the last, which is as often as the client sends. A
// heartbeat whose answer is that the run was cancelled ends the run's
// context with that cancellation as the cause, as the client would end
// the activity's, and the beats go on while the unit at work finishes. A
// heartbeat that fails ends the run's context with the failure, and the
// beats stop: the client has retried it for longer than the timeout.
type directBeat struct {
	ctx         context.Context
	send        func(ctx context.Context, p any) error
	stopped     context.CancelCauseFunc
	quiet, keep time.Duration

	mu    sync.Mutex
	p     any
	seq   int       // p's: one more at each set
	sent  int       // the seq of the last p sent
	began time.Time // the run's start
	last  time.Time // the last heartbeat the server took; zero: none yet
	kick  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup
}

// newDirectBeat starts the beat of the run whose context stopped ends.
// ctx is the one heartbeats go out on: one the run's cancellation does
// not end. send is heartbeatNow or a stand-in (Activities.StillWanted).
func newDirectBeat(ctx context.Context, send func(context.Context, any) error, stopped context.CancelCauseFunc) *directBeat {
	quiet := quietBeat
	if sdkactivity.IsActivity(ctx) {
		if t := sdkactivity.GetInfo(ctx).HeartbeatTimeout; t > 0 {
			quiet = t / 2
		}
	}
	b := &directBeat{ctx: ctx, send: send, stopped: stopped, quiet: quiet, keep: quiet * 8 / 5,
		began: time.Now(), kick: make(chan struct{}, 1), done: make(chan struct{})}
	if sdkactivity.IsActivity(ctx) {
		b.wg.Go(b.loop)
	}
	return b
}

// due is when the next heartbeat goes out unless one is sent before.
func (b *directBeat) due() time.Time {
	if b.last.IsZero() {
		return b.began.Add(b.quiet)
	}
	return b.last.Add(b.keep)
}

func (b *directBeat) loop() {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		b.mu.Lock()
		wait := time.Until(b.due())
		b.mu.Unlock()
		t.Reset(wait)
		select {
		case <-b.done:
			return
		case <-b.kick:
			continue
		case <-t.C:
		}
		b.mu.Lock()
		p, seq := b.p, b.seq
		b.mu.Unlock()
		if err := b.beat(p, seq); err != nil && !cancelled(err) {
			return
		}
	}
}

// beat heartbeats p and says what the answer was: nil, a
// *temporal.CanceledError when the run was cancelled, or the failure. Any
// but nil ends the run's context with that cause.
func (b *directBeat) beat(p any, seq int) error {
	err := b.send(b.ctx, p)
	if err == nil || cancelled(err) {
		b.mu.Lock()
		b.last, b.sent = time.Now(), max(b.sent, seq)
		b.mu.Unlock()
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	if err != nil {
		b.stopped(err)
	}
	return err
}

// gate heartbeats p, the units done and the next unit's sandbox, and
// reports whether the campaign still wants the run: false when it
// cancelled it, an error when the heartbeat failed.
func (b *directBeat) gate(p unitsProgress) (bool, error) {
	switch err := b.beat(p, b.put(p)); {
	case err == nil:
		return true, nil
	case cancelled(err):
		return false, nil
	default:
		return false, err
	}
}

// set makes p the progress, and heartbeats it at once when now is set.
func (b *directBeat) set(p any, now bool) {
	seq := b.put(p)
	if now {
		_ = b.beat(p, seq)
	}
}

// put makes p the progress and says its seq.
func (b *directBeat) put(p any) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	b.p = p
	return b.seq
}

// flush heartbeats the progress if it was not sent: the run is about to
// fail, and the attempt after starts from the last heartbeat (the
// client sends the latest it held back with the failure; this beat
// holds nothing back from it).
func (b *directBeat) flush() {
	b.mu.Lock()
	p, seq, sent := b.p, b.seq, b.sent
	b.mu.Unlock()
	if seq > sent {
		_ = b.beat(p, seq)
	}
}

func (b *directBeat) stop() {
	close(b.done)
	b.wg.Wait()
}

// cancelled reports whether err is the answer of a heartbeat of a run
// that was cancelled.
func cancelled(err error) bool {
	var ce *temporal.CanceledError
	return errors.As(err, &ce)
}
