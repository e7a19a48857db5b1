package dispatch_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/notify"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// hook is a loopback webhook receiver that verifies each request's
// signature, and answers 503 (Retry-After: 1) while busy is above zero.
type hook struct {
	mu       sync.Mutex
	secret   []byte
	busy     int
	tries    int
	got      []notify.Message
	problems []string
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tries++
	if err := notify.Verify(h.secret, r.Header, body, time.Now(), time.Minute); err != nil {
		h.problems = append(h.problems, err.Error())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if h.busy > 0 {
		h.busy--
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var m notify.Message
	if err := json.Unmarshal(body, &m); err != nil {
		h.problems = append(h.problems, err.Error())
	}
	h.got = append(h.got, m)
}

func (h *hook) received() ([]notify.Message, int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]notify.Message(nil), h.got...), h.tries, append([]string(nil), h.problems...)
}

// Each event (a result awaiting approval, a pause, an end with failures,
// a completion, and the ends) is told to the operator's webhook once,
// signed, through passes of two reconcilers (a restart), while the
// receiver is busy at first: the pass that hands them over returns before
// anything is delivered, and each Notify workflow tries again as the
// receiver asks.
func TestNotificationIsDeliveredOnceAcrossPassesAndRestarts(t *testing.T) {
	c := embedded(t)

	h := &hook{secret: []byte("k3y"), busy: 2}
	rcv := httptest.NewServer(h)
	t.Cleanup(rcv.Close)
	svc, err := notify.ParseService("audit=webhook,url="+rcv.URL+"/fleetlift,secret-env=HOOK_KEY",
		func(k string) string { return map[string]string{"HOOK_KEY": "k3y"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflow.Notify)
	w.RegisterActivity(&activity.Activities{NotifyServices: map[string]notify.Service{"audit": svc}})

	rev := revision(t, strings.Repeat("1", 40), "pay", "one")
	rev.Config = &spec.Config{Notifications: &spec.Notifications{Subscriptions: []spec.Subscription{{
		On: []string{notify.AwaitingApproval, notify.Paused, notify.Failed, notify.Completed, notify.Done}, To: []string{"audit"}}}}}
	run := func(id string, phase state.Phase, msg string) state.Campaign {
		return state.Campaign{ID: id, Kind: state.KindCampaign, Generation: 1, RunID: "r-" + id, Phase: phase, Message: msg, Spec: json.RawMessage(`{}`)}
	}
	paused := run("pay", state.PhasePaused, "1 of 2 repositories failed")
	paused.Kind, paused.SpecDigest = state.KindTask, rev.Desired.Definitions[0].Digest
	review := run("review", state.PhaseAwaitingApproval, "")
	review.PendingApprovals = []state.PendingApproval{{Target: "review/ledger", ResultDigest: "sha256:abc"}}
	shown := []state.Campaign{paused, review, run("ok", state.PhaseCompleted, "2 repositories completed"),
		run("bad", state.PhaseCompletedWithFailures, "1 of 2 repositories failed, 1 completed")}
	vis := &lagging{shown: shown}
	reconciler := func() *reconcile.Reconciler {
		return &reconcile.Reconciler{Source: &head{rev: rev}, State: vis, Dispatch: &dispatch.Temporal{Client: c},
			Notifier: dispatch.Notifications{Client: c}}
	}
	// No worker yet: the pass hands the messages over and returns.
	first := reconciler()
	pass(t, first)
	if got, tries, _ := h.received(); len(got) != 0 || tries != 0 {
		t.Fatalf("received %d messages in %d tries before any worker ran", len(got), tries)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	pass(t, first)
	pass(t, reconciler())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, _ := reconcile.Notifications(rev.Config, shown)
	if len(ds) != 6 {
		t.Fatalf("%d messages due; want 6", len(ds))
	}
	for _, d := range ds {
		id := workflow.NotifyID(d.Message.Campaign, d.Message.Key)
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	got, tries, problems := h.received()
	var events []string
	for _, m := range got {
		events = append(events, m.Campaign+":"+m.Event)
	}
	slices.Sort(events)
	want := []string{"bad:done", "bad:failed", "ok:completed", "ok:done", "pay:paused", "review:awaiting_approval"}
	if len(problems) > 0 || !slices.Equal(events, want) || tries != len(want)+2 {
		t.Fatalf("received %v in %d tries (problems %v); want %v, each once, after two busy answers", events, tries, problems, want)
	}
	for _, m := range got {
		if m.Campaign == "pay" && (m.Message != "1 of 2 repositories failed" ||
			!strings.Contains(m.Text, "task/pay (generation 1) paused: 1 of 2 repositories failed")) {
			t.Errorf("message %+v", m)
		}
	}
	// fleetlift status lists runs, not messages: once visibility shows
	// the Notify workflows, the run list still leaves them out.
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: devserver.Namespace, Query: "WorkflowType = 'Notify'"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Executions) == len(ds) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	listed, err := (&statetemporal.Reader{Client: c, Namespace: devserver.Namespace}).Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range listed {
		if strings.HasPrefix(e.ID, "notify/") {
			t.Errorf("fleetlift status lists %s (%s)", e.ID, e.Workflow)
		}
	}
	// Passes after the delivery start nothing again.
	pass(t, reconciler())
	if _, again, _ := h.received(); again != tries {
		t.Errorf("%d tries after another pass; want %d", again, tries)
	}
}
