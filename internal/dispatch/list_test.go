package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// listing is a client that records the visibility queries the reader
// sends and how many runs each read, and can hide a run from a query
// (visibility that has not caught up with it).
type listing struct {
	client.Client
	mu     sync.Mutex
	calls  []listCall
	hiding string
}

type listCall struct {
	query string
	runs  int
}

func (l *listing) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	resp, err := l.Client.ListWorkflow(ctx, req)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hiding != "" && req.Query != "" {
		kept := resp.Executions[:0]
		for _, e := range resp.Executions {
			if e.Execution.WorkflowId != l.hiding {
				kept = append(kept, e)
			}
		}
		resp.Executions = kept
	}
	l.calls = append(l.calls, listCall{query: req.Query, runs: len(resp.Executions)})
	return resp, nil
}

func (l *listing) last() listCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[len(l.calls)-1]
}

// TestReaderListsOnlyWhatChanged, on the embedded server: the state
// reader's first List reads every run; the next ones read only the runs
// running or closed since, and show the others as before: a run that
// ended since shows ended, a new one shows, the rest are as they were. A
// run read running that visibility no longer shows (it lags behind its
// close) has the reader read every run again.
func TestReaderListsOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	c := embedded(t)
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.CampaignInput) (status.CampaignState, error) {
		if strings.HasPrefix(in.ID, "held") {
			sdkworkflow.GetSignalChannel(ctx, "go").Receive(ctx, nil)
		}
		return status.CampaignState{ID: in.ID, Phase: status.CampaignCompleted}, nil
	}, sdkworkflow.RegisterOptions{Name: "Campaign"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	start := func(id string) {
		t.Helper()
		run, err := dispatch.StartRun(ctx, c, bigCampaign(t, id, 1), workflow.Options{}, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(id, "held") {
			if err := run.Get(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	start("done-1")
	start("done-2")
	start("held-1")
	start("held-2")
	l := &listing{Client: c}
	// Runs closed before the last List are not read again.
	r := &statetemporal.Reader{Client: l, VisibilityLag: time.Nanosecond}
	// phases lists until visibility shows want.
	phases := func(want string) {
		t.Helper()
		var got string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			cs, err := r.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, c := range cs {
				parts = append(parts, c.ID+"="+string(c.Phase))
			}
			if got = strings.Join(parts, " "); got == want {
				return
			}
		}
		t.Fatalf("runs listed: %s; want %s", got, want)
	}
	phases("done-1=completed done-2=completed held-1=running held-2=running")
	if first := l.calls[0]; first.query != "" {
		t.Errorf("the first List read %+v; want every run", first)
	}

	if err := c.SignalWorkflow(ctx, "campaign/held-1", "", "go", nil); err != nil {
		t.Fatal(err)
	}
	start("done-3")
	phases("done-1=completed done-2=completed done-3=completed held-1=completed held-2=running")
	// Once visibility has caught up, a List reads the one run running.
	phases("done-1=completed done-2=completed done-3=completed held-1=completed held-2=running")
	if last := l.last(); last.query == "" || last.runs > 2 {
		t.Errorf("a later List read %+v; want held-2, running, and at most a run that closed as the List before read", last)
	}

	// Visibility that does not show held-2, running when last read,
	// has the reader read every run.
	l.mu.Lock()
	l.hiding = "campaign/held-2"
	n := len(l.calls)
	l.mu.Unlock()
	phases("done-1=completed done-2=completed done-3=completed held-1=completed held-2=running")
	l.mu.Lock()
	calls := l.calls[n:]
	l.mu.Unlock()
	if len(calls) != 2 || calls[0].query == "" || calls[1].query != "" || calls[1].runs != 5 {
		t.Errorf("with held-2 missing from the runs that changed, the List read %+v; want the changed ones, then every run", calls)
	}
}
