package reconcile

import (
	"context"
	"time"
)

// Hints wake the loop before its next poll: a webhook delivery, a change
// on disk. A hint only says "look again"; the pass reads Git itself.
type Hints <-chan struct{}

// NewHints returns hints and the function that gives one. Giving never
// blocks: a hint given while one is pending is that hint.
func NewHints() (Hints, func()) {
	ch := make(chan struct{}, 1)
	return ch, func() {
		select {
		case ch <- struct{}{}:
		default: // a hint is already pending
		}
	}
}

// LoopOptions say when passes run.
type LoopOptions struct {
	// Interval is the poll interval: a pass runs at least this often
	// (default one minute). A pass whose head did not move costs a
	// ls-remote and a read of the recorded state.
	Interval time.Duration
	// Hints, when set, wake the loop early.
	Hints Hints
	// Debounce gathers hints arriving close together into one pass
	// (default 20ms): a push touches several files.
	Debounce time.Duration
	// OnPass, when set, is called after each pass (for tests, metrics
	// and the bench).
	OnPass func(*Result, error)
}

// Run runs passes until ctx is done: one at once, then one per interval
// or hint. A pass that fails is logged and retried at the next trigger.
func (r *Reconciler) Run(ctx context.Context, o LoopOptions) error {
	interval := o.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	debounce := o.Debounce
	if debounce <= 0 {
		debounce = 20 * time.Millisecond
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		res, err := r.Once(ctx)
		if err != nil && ctx.Err() == nil {
			r.log().Error("reconcile pass failed", "error", err)
		}
		if o.OnPass != nil {
			o.OnPass(res, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case _, ok := <-o.Hints:
			if !ok {
				o.Hints = nil
				continue
			}
			// Gather the hints that follow within the debounce window.
			timer := time.NewTimer(debounce)
		gather:
			for {
				select {
				case <-ctx.Done():
					timer.Stop()
					return nil
				case <-o.Hints:
				case <-timer.C:
					break gather
				}
			}
		}
	}
}
