package activity

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"
)

// ErrWorkerFull: the worker runs as many sandboxes as it may
// (Activities.MaxSandboxes). Nothing is wrong with the task: it waits, and
// provisions again, here or on another worker.
const ErrWorkerFull = "WorkerFull"

// capacity is the sandboxes a worker runs: those provisioned and not yet
// removed by it.
type capacity struct {
	mu   sync.Mutex
	live map[string]bool
}

// reserve counts sandbox id as running, unless max are already (a
// sandbox provisioned again, as a retried attempt does, is counted once).
func (a *Activities) reserve(id string) error {
	if a.MaxSandboxes <= 0 {
		return nil
	}
	c := &a.capacity
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live == nil {
		c.live = map[string]bool{}
		for _, id := range a.Adopted {
			c.live[id] = true
		}
	}
	if !c.live[id] && len(c.live) >= a.MaxSandboxes {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("this worker runs as many sandboxes as it may at once (%d, its --max-sandboxes): the task waits for one to end", a.MaxSandboxes),
			ErrWorkerFull, nil)
	}
	c.live[id] = true
	return nil
}

// release stops counting sandbox id.
func (a *Activities) release(id string) {
	c := &a.capacity
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.live, id)
}

// WorkerFull reports whether err says the worker was full (ErrWorkerFull).
func WorkerFull(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.Type() == ErrWorkerFull
}

// FullWait is how long a task waits after a worker was full before it
// provisions again: doubling from a second up to half a minute.
func FullWait(attempt int) time.Duration {
	return min(time.Second<<min(attempt, 5), 30*time.Second)
}

// provisionWhenFree provisions as ProvisionSandbox does, waiting while
// this worker is full: within an activity that heartbeats meanwhile
// (RunSandboxed, RunUnits).
func (a *Activities) provisionWhenFree(ctx context.Context, in ProvisionInput) (SandboxRef, error) {
	for attempt := 0; ; attempt++ {
		ref, err := a.ProvisionSandbox(ctx, in)
		if !WorkerFull(err) {
			return ref, err
		}
		select {
		case <-ctx.Done():
			return SandboxRef{}, err
		case <-time.After(FullWait(attempt)):
		}
	}
}
