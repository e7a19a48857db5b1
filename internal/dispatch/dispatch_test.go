package dispatch_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
)

// revision is a campaigns repository at sha holding one Task, id, whose
// prompt is prompt.
func revision(t *testing.T, sha, id, prompt string) *desired.Revision {
	t.Helper()
	task := "version: 1\nid: " + id + "\ntitle: T\nrepositories:\n  - url: https://github.com/acme/svc.git\nexecution:\n  agentic:\n    prompt: " + prompt + "\n"
	res, err := (&spec.Loader{}).Load(context.Background(), fstest.MapFS{"campaigns/" + id + ".yaml": {Data: []byte(task)}}, "campaigns")
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("load: %v %v", err, res.Errors)
	}
	return &desired.Revision{SHA: sha, Dir: "campaigns", Desired: plan.Desired{Definitions: res.Definitions}}
}

// head is the campaigns repository's watched branch, at rev.
type head struct{ rev *desired.Revision }

func (h *head) Head(context.Context) (string, error) { return h.rev.SHA, nil }
func (h *head) Read(context.Context, string) (*desired.Revision, error) {
	return h.rev, nil
}

// lagging is a visibility store that has not caught up: it shows the runs
// as they were when it last did.
type lagging struct{ shown []state.Campaign }

func (l *lagging) List(context.Context) ([]state.Campaign, error) { return l.shown, nil }
func (l *lagging) Get(_ context.Context, id string) (state.Campaign, error) {
	for _, c := range l.shown {
		if c.ID == id {
			return c, nil
		}
	}
	return state.Campaign{}, state.ErrNotFound
}

// TestLaggingVisibilityNeverStartsARunTwice: the reconciler plans from
// visibility, which lags behind Temporal's record of the runs. A run that
// started and finished before visibility showed it is not started again
// on the next pass: a campaign is created once, and each new generation
// of it starts once.
func TestLaggingVisibilityNeverStartsARunTwice(t *testing.T) {
	c := embedded(t)
	ctx := context.Background()

	tests := []struct {
		name string
		id   string
		// before brings the run to where visibility stops catching up,
		// and returns the reconciler's source and what visibility shows.
		before func(t *testing.T, id string) (*head, *lagging)
		// change is the revision the passes under test apply.
		change func(t *testing.T, id string) *desired.Revision
		// wantGeneration is the generation the one run started has.
		wantGeneration int64
	}{
		{
			name: "create: a first run that finished before visibility showed it",
			id:   "created",
			before: func(t *testing.T, id string) (*head, *lagging) {
				return &head{}, &lagging{}
			},
			change: func(t *testing.T, id string) *desired.Revision {
				return revision(t, strings.Repeat("1", 40), id, "one")
			},
			wantGeneration: 1,
		},
		{
			name: "update: a new generation that finished before visibility showed it",
			id:   "updated",
			before: func(t *testing.T, id string) (*head, *lagging) {
				h := &head{rev: revision(t, strings.Repeat("1", 40), id, "one")}
				r := &reconcile.Reconciler{Source: h, State: &lagging{}, Dispatch: &dispatch.Temporal{Client: c}}
				pass(t, r)
				finish(t, c, "task/"+id)
				// Visibility catches up with generation 1, then lags.
				return h, &lagging{shown: []state.Campaign{shown(t, c, id)}}
			},
			change: func(t *testing.T, id string) *desired.Revision {
				return revision(t, strings.Repeat("2", 40), id, "two")
			},
			wantGeneration: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wid := "task/" + tt.id
			h, vis := tt.before(t, tt.id)
			h.rev = tt.change(t, tt.id)
			r := &reconcile.Reconciler{Source: h, State: vis, Dispatch: &dispatch.Temporal{Client: c}}
			pass(t, r)
			first, gen := current(t, c, wid)
			if gen != tt.wantGeneration {
				t.Fatalf("the pass started generation %d, want %d", gen, tt.wantGeneration)
			}
			// The run finishes before visibility shows it; the next
			// passes plan the same start again.
			finish(t, c, wid)
			for range 2 {
				pass(t, r)
			}
			if run, gen := current(t, c, wid); run != first {
				t.Errorf("%s was started again: run %s (generation %d) after %s", wid, run, gen, first)
			}
			d, err := c.DescribeWorkflowExecution(ctx, wid, first)
			if err != nil {
				t.Fatal(err)
			}
			if s := d.WorkflowExecutionInfo.Status; s != enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
				t.Errorf("run %s is %s, want it as it finished", first, s)
			}
		})
	}
}

// embedded starts the embedded server for the test and dials it.
func embedded(t *testing.T) client.Client {
	t.Helper()
	return embeddedDial(t)()
}

// embeddedDial starts the embedded server for the test and returns what
// dials it: each call a connection of its own, as another process has.
func embeddedDial(t *testing.T) func() client.Client {
	t.Helper()
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(t.TempDir(), "temporal.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return func() client.Client {
		c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace,
			ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
}

// pass runs one pass of r, which must carry out everything it plans.
func pass(t *testing.T, r *reconcile.Reconciler) {
	t.Helper()
	res, err := r.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Failed() {
		t.Errorf("pass: %s", o)
	}
}

// finish ends the current run of wid, as a run ends that needed nothing
// more of a worker.
func finish(t *testing.T, c client.Client, wid string) {
	t.Helper()
	if err := c.TerminateWorkflow(context.Background(), wid, "", "finished"); err != nil {
		t.Fatal(err)
	}
}

// current is wid's current run and its generation, from Temporal's record
// (not visibility).
func current(t *testing.T, c client.Client, wid string) (string, int64) {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(context.Background(), wid, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.WorkflowExecutionInfo.Execution.RunId, dispatch.Generation(d.WorkflowExecutionInfo)
}

// shown is what visibility shows of campaign id once it has caught up
// with its current run.
func shown(t *testing.T, c client.Client, id string) state.Campaign {
	t.Helper()
	run, _ := current(t, c, "task/"+id)
	r := &statetemporal.Reader{Client: c, Namespace: devserver.Namespace}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		all, err := r.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range all {
			if rec.ID == id && rec.RunID == run && rec.Phase.Done() {
				return rec
			}
		}
	}
	t.Fatalf("visibility never showed run %s of %s finished", run, id)
	return state.Campaign{}
}
