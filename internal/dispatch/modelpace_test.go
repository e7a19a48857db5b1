package dispatch_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// Two workers' gateways calling the model as one account keep the
// account's tokens a minute together: each call asks the account's one
// budget on Temporal, and what it used counts there for both. With 1,000
// tokens in any 2 s (scaled down from a minute) and 400 a call, no 2 s
// hold more than four calls (two counted and one in flight from each
// worker), however fast the agents call; and a gateway that cannot reach
// the budget paces its calls by itself.
func TestModelPaceIsSharedByEveryWorker(t *testing.T) {
	dial := embeddedDial(t)
	w := worker.New(dial(), workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflow.ForgeBudget)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	var mu sync.Mutex
	var calls []time.Time
	var callers []string
	model := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, time.Now())
		callers = append(callers, r.Header.Get("X-Test-Worker"))
		mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprint(rw, `{"model":"m","usage":{"input_tokens":300,"output_tokens":100}}`)
	}))
	defer model.Close()
	up, _ := url.Parse(model.URL)

	const key = "sk-ant-account-key"
	id := dispatch.ModelBudgetID(up.Host, key)
	if strings.Contains(id, key) {
		t.Fatalf("the budget's id %q holds the key", id)
	}
	in := workflow.ForgeBudgetInput{Key: up.Host, Limits: []workflow.ForgeLimit{{Count: 1000, Per: 2 * time.Second}}, Ahead: 50 * time.Millisecond}
	const perWorker = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*perWorker)
	for i := range 2 {
		gw := &gateway.Gateway{Upstream: up, Key: key, TokensPerMinute: 1000}
		gw.SharePace(&dispatch.ModelPace{Budget: &dispatch.ForgeBudget{Client: dial(), ID: id, Input: in, Caller: fmt.Sprint("worker-", i)},
			Local: gateway.NewPace()})
		sk, err := gw.Open(gateway.Sandbox{ID: fmt.Sprint("sandbox-", i)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range perWorker {
				if code := callAs(gw, sk, fmt.Sprint(i)); code != http.StatusOK {
					errs <- fmt.Errorf("worker %d: a call answered %d", i, code)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mu.Lock()
	seen, by := slices.Clone(calls), slices.Clone(callers)
	mu.Unlock()
	if len(seen) != 2*perWorker {
		t.Fatalf("the model was called %d times; want %d", len(seen), 2*perWorker)
	}
	for i, at := range seen {
		n := 0
		for _, b := range seen[i:] {
			if b.Sub(at) < 2*time.Second {
				n++
			}
		}
		if n > 4 {
			t.Errorf("%d calls reached the model within 2 s of call %d; want at most 4 (1,000 tokens counted, one call in flight from each worker)", n, i)
		}
	}
	if t.Failed() {
		for i, at := range seen {
			t.Logf("call %d from worker %s at +%s", i, by[i], at.Sub(seen[0]).Round(time.Millisecond))
		}
	}

	// A budget no worker runs, which this gateway only joins: its
	// calls go, paced by its own count.
	gw := &gateway.Gateway{Upstream: up, Key: key, TokensPerMinute: 1000}
	gw.SharePace(&dispatch.ModelPace{Budget: &dispatch.ForgeBudget{Client: dial(), ID: dispatch.ModelBudgetID("elsewhere", key),
		Input: in, Caller: "lost", Join: true}, Local: gateway.NewPace()})
	sk, _ := gw.Open(gateway.Sandbox{ID: "alone"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if code := callCtx(ctx, gw, sk, nil); code != http.StatusOK {
		t.Errorf("a call whose budget cannot be reached answered %d; want it paced by the gateway and sent", code)
	}
}

// callAs sends a model call to gw with the sandbox key sk as worker
// (a header the model sees) and returns the status it answered.
func callAs(gw *gateway.Gateway, sk, worker string) int {
	return callCtx(context.Background(), gw, sk, http.Header{"X-Test-Worker": {worker}})
}

func callCtx(ctx context.Context, gw *gateway.Gateway, sk string, h http.Header) int {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://gateway/v1/messages", strings.NewReader(`{}`))
	maps.Copy(req.Header, h)
	req.Header.Set("X-Api-Key", sk)
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, req)
	return rec.Code
}
