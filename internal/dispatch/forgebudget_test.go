package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/forge/forgetest"
	"github.com/fleetlift/fleetlift/internal/forge/github"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// Three campaigns writing through two processes' budgets (each its own
// Temporal connection and its own github.Budget) at once share the
// account's one write budget: the forge, which refuses the 11th write in
// any two seconds, refuses none; and the one Retry-After it answers holds
// every process's writes back until it has passed.
func TestForgeBudgetIsSharedByEveryProcess(t *testing.T) {
	dial := embeddedDial(t)
	in := workflow.ForgeBudgetInput{Key: "127.0.0.1/bot", Limits: []workflow.ForgeLimit{{Count: 10, Per: 2 * time.Second}},
		Slack: 300 * time.Millisecond, MinInterval: 230 * time.Millisecond, Ahead: 100 * time.Millisecond}
	id := dispatch.ForgeBudgetID("127.0.0.1", "ghp_test-token")
	if strings.Contains(id, "ghp_test-token") {
		t.Fatalf("the budget's id %q holds the token", id)
	}

	// Before any worker runs: a reconciler joining the budget finds none
	// and paces itself; a worker's ask that no worker takes in gives up
	// in time, saying so.
	joiner := &dispatch.ForgeBudget{Client: dial(), ID: id, Input: in, Caller: "reconciler", Join: true}
	if err := joiner.Acquire(t.Context()); !errors.Is(err, github.ErrSharedUnavailable) {
		t.Errorf("joining a budget that does not run: %v; want github.ErrSharedUnavailable", err)
	}
	early := &dispatch.ForgeBudget{Client: dial(), ID: id, Input: in, Caller: "early", AcceptWithin: time.Second}
	if err := early.Acquire(t.Context()); !errors.Is(err, github.ErrSharedUnavailable) || !strings.Contains(err.Error(), "is a fleetlift worker running?") {
		t.Errorf("an ask no worker takes in: %v; want github.ErrSharedUnavailable asking for a worker", err)
	}

	// A fleetlift worker runs the budget's workflow.
	w := worker.New(dial(), workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflow.ForgeBudget)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	const writes = 45
	f := &forgetest.Paced{Limits: []forgetest.Window{{Count: 10, Per: 2 * time.Second}}, RetryAfterAt: 20, RetryAfter: 2 * time.Second}
	api := httptest.NewServer(f)
	defer api.Close()

	// Once the budget runs, the reconciler joins it.
	if err := joiner.Acquire(t.Context()); err != nil {
		t.Errorf("joining the running budget: %v", err)
	}
	// Each process's own budget would let it write as fast as it likes
	// (WriteRate -1): the shared one alone paces them.
	var processes []*http.Client
	for p := range 2 {
		shared := &dispatch.ForgeBudget{Client: dial(), ID: id, Input: in, Caller: fmt.Sprint("worker-", p)}
		b := github.NewBudget(github.BudgetOptions{Shared: shared, WriteRate: -1, SecondaryWait: time.Second})
		processes = append(processes, &http.Client{Transport: b.Transport(nil)})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, writes)
	for i := range writes {
		campaign := i % 3
		hc := processes[i%2]
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/repos/acme/svc%d/pulls", api.URL, i), strings.NewReader(fmt.Sprintf(`{"title":"campaign %d"}`, campaign)))
			req.GetBody = func() (io.ReadCloser, error) {
				return io.NopCloser(strings.NewReader(fmt.Sprintf(`{"title":"campaign %d"}`, campaign))), nil
			}
			resp, err := hc.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				errs <- fmt.Errorf("write %d: %s", i, resp.Status)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := f.Refused(); n != 0 {
		t.Errorf("the forge refused %d writes for its secondary limit; want none", n)
	}
	if n := len(f.Writes()); n != writes {
		t.Errorf("the forge took %d writes; want %d", n, writes)
	}
	// Writes already on their way when the Retry-After went out may
	// land just after it; none lands later until it has passed.
	held := f.HeldFrom()
	for _, at := range f.Writes() {
		if d := at.Sub(held); d > 300*time.Millisecond && d < f.RetryAfter {
			t.Errorf("a write reached the forge %s after its Retry-After of %s", d.Round(time.Millisecond), f.RetryAfter)
		}
	}
}
