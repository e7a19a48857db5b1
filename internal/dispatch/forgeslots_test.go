package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// Two processes (each its own Temporal connection) transferring with
// one account never run more transfers at once than its slots, though
// each would run 2 on its own; an ask made while no worker runs the
// slots goes on, bounded by its process alone, and takes no slot once a
// worker does; an ask cut short while it waits takes none either.
func TestForgeSlotsAreSharedByEveryProcess(t *testing.T) {
	dial := embeddedDial(t)
	id := dispatch.ForgeSlotsID("127.0.0.1", "ghp_test-token")
	in := dispatch.ForgeSlotsInput("127.0.0.1/bot", 2, time.Minute)

	// No worker yet: the ask is not taken in, and the transfer goes on.
	early := &dispatch.ForgeSlots{Client: dial(), ID: id, Input: in, Caller: "early", AcceptWithin: time.Second}
	release, err := early.Acquire(t.Context())
	if err != nil {
		t.Fatalf("a slot no worker serves: %v; want the transfer to go on, bounded here", err)
	}
	release()

	w := worker.New(dial(), workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflow.ForgeSlots)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	var mu sync.Mutex
	running, most := 0, 0
	var waits []time.Duration
	var processes []*dispatch.ForgeSlots
	for p := range 2 {
		in := in
		in.Slots = 2
		processes = append(processes, &dispatch.ForgeSlots{Client: dial(), ID: id, Input: in, Caller: fmt.Sprint("worker-", p),
			OnWait: func(d time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				waits = append(waits, d)
			}})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			release, err := processes[i%2].Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(150 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			release()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if most > 2 || len(waits) != 8 {
		t.Errorf("%d transfers ran at once, %d waits told; want at most 2 (the account's slots) and 8", most, len(waits))
	}

	// Both slots held: an ask cut short while it waits is withdrawn.
	var held []func()
	for _, p := range processes {
		r, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	short, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stop()
	if _, err := processes[0].Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an ask while every slot is held, cut short: %v; want the deadline", err)
	}
	// The same, on a machine whose timers fire late: the server ends the
	// ask at its deadline before the caller's context says it is done.
	if _, err := processes[0].Acquire(lateTimer(ctx, 500*time.Millisecond, 300*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an ask cut short at a deadline whose timer fires late: %v; want the deadline", err)
	}
	for _, r := range held {
		r()
	}
	r, err := processes[1].Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r()
	st := slotsState(t, processes[1].Client, id)
	if len(st.Held) != 1 || st.Waiting != 0 || st.Expired != 0 {
		t.Errorf("the slots say %+v; want the one transfer running held, nothing waiting, none taken back (the early and the withdrawn asks hold none)", st)
	}
}

// slotsState queries the ForgeSlots workflow id until its last release
// has been taken in.
func slotsState(t *testing.T, c client.Client, id string) workflow.ForgeSlotsState {
	t.Helper()
	var st workflow.ForgeSlotsState
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := c.QueryWorkflow(t.Context(), id, "", workflow.QueryForgeSlots)
		if err == nil {
			err = v.Get(&st)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Held) <= 1 || time.Now().After(deadline) {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lateContext is a context whose deadline passes a while before it says
// it is done, as on a loaded machine whose timers fire late.
type lateContext struct {
	context.Context
	deadline time.Time
}

func (l lateContext) Deadline() (time.Time, bool) { return l.deadline, true }

// lateTimer is parent with a deadline d from now whose Done and Err come
// late after it.
func lateTimer(parent context.Context, d, late time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(parent, d+late)
	go func() { <-ctx.Done(); cancel() }()
	return lateContext{Context: ctx, deadline: time.Now().Add(d)}
}
