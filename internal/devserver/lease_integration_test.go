package devserver_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/leader"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// leaseCutClient is one replica's client, which the test can cut off as
// a crash or a network partition would: while cut, calls fail or hang.
type leaseCutClient struct {
	client.Client
	cut atomic.Bool
}

func (c *leaseCutClient) ExecuteWorkflow(ctx context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	if c.cut.Load() {
		return nil, serviceerror.NewUnavailable("cut off")
	}
	return c.Client.ExecuteWorkflow(ctx, o, wf, args...)
}

func (c *leaseCutClient) UpdateWorkflow(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if c.cut.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return c.Client.UpdateWorkflow(ctx, o)
}

func (c *leaseCutClient) DescribeWorkflowExecution(ctx context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if c.cut.Load() {
		return nil, serviceerror.NewUnavailable("cut off")
	}
	return c.Client.DescribeWorkflowExecution(ctx, id, runID)
}

// leaseReplica is a reconciler replica whose lead only records that it
// leads, in its own flag and in the count of replicas leading at once.
type leaseReplica struct {
	name    string
	el      *leader.Elector
	c       *leaseCutClient
	leading atomic.Bool
	terms   atomic.Int32
	cancel  context.CancelFunc
	done    chan struct{}
	lw      worker.Worker
}

// leaseLeaders counts the replicas leading at once and the most ever.
type leaseLeaders struct{ now, most atomic.Int32 }

func (l *leaseLeaders) startReplica(t *testing.T, c client.Client, name string, ttl time.Duration) *leaseReplica {
	t.Helper()
	cc := &leaseCutClient{Client: c}
	// Each replica serves the lease's task queue itself, as reconcile
	// --leader-elect does, and stops serving when it stops.
	lw, err := leader.Serve(c)
	if err != nil {
		t.Fatal(err)
	}
	r := &leaseReplica{name: name, c: cc, lw: lw, done: make(chan struct{}),
		el: &leader.Elector{Client: cc, Identity: name, TTL: ttl,
			Log: slog.New(slog.NewTextHandler(leaseLog{t}, nil)).With("replica", name)}}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		if err := r.el.Run(ctx, func(ctx context.Context) {
			n := l.now.Add(1)
			for m := l.most.Load(); n > m && !l.most.CompareAndSwap(m, n); m = l.most.Load() {
			}
			r.terms.Add(1)
			r.leading.Store(true)
			<-ctx.Done()
			r.leading.Store(false)
			l.now.Add(-1)
		}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}()
	t.Cleanup(r.stop)
	return r
}

// stop cancels the replica, waits until its Run has returned and stops
// its lease worker.
func (r *leaseReplica) stop() {
	r.cancel()
	<-r.done
	r.lw.Stop()
}

type leaseLog struct{ t *testing.T }

func (w leaseLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func leaseWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leaseRun is the run id of the lease workflow running now.
func leaseRun(t *testing.T, c client.Client) string {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(context.Background(), workflow.LeaseWorkflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// leaseResult waits for a lease run's result.
func leaseResult(t *testing.T, c client.Client, runID string) workflow.LeaseState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var st workflow.LeaseState
	if err := c.GetWorkflow(ctx, workflow.LeaseWorkflowID, runID).Get(ctx, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLeaseElection runs reconciler replicas against the server, with no
// fleetlift worker: one leads at a time; a leader that shuts down
// releases the lease; a partitioned leader steps down and a crashed one
// is succeeded after the TTL. Never do two replicas lead at once.
func TestLeaseElection(t *testing.T) {
	// Long enough that a release lands before the lease would expire on
	// a loaded machine (a release waits at most the TTL).
	const ttl = 3 * time.Second
	e := start(t)

	var leaders leaseLeaders
	defer func() {
		if most := leaders.most.Load(); most > 1 {
			t.Errorf("%d replicas led at once", most)
		}
	}()
	a := leaders.startReplica(t, e.c, "a", ttl)
	b := leaders.startReplica(t, e.c, "b", ttl)
	leaseWait(t, "a replica leads", func() bool { return a.leading.Load() || b.leading.Load() })
	first, other := a, b
	if b.leading.Load() {
		first, other = b, a
	}

	// The leader keeps the lease across renewals.
	time.Sleep(3 * ttl)
	if !first.leading.Load() || first.terms.Load() != 1 || other.terms.Load() != 0 || !first.el.IsLeader() || other.el.IsLeader() {
		t.Fatalf("after 3 TTLs: %s leading %v (%d terms), %s %d terms", first.name, first.leading.Load(), first.terms.Load(), other.name, other.terms.Load())
	}
	v, err := e.c.QueryWorkflow(context.Background(), workflow.LeaseWorkflowID, "", workflow.QueryLeaseHolder)
	if err != nil {
		t.Fatal(err)
	}
	var st workflow.LeaseState
	if err := v.Get(&st); err != nil || st.Holder != first.name || st.Renewals < 2 {
		t.Fatalf("lease %+v %v, want held by %s with renewals", st, err, first.name)
	}

	// A leader that shuts down releases the lease; the other takes over.
	run := leaseRun(t, e.c)
	first.stop()
	leaseWait(t, other.name+" leads after the release", other.leading.Load)
	if st := leaseResult(t, e.c, run); !st.Released || st.Holder != first.name {
		t.Errorf("first lease ended %+v, want released by %s", st, first.name)
	}

	// A partitioned leader steps down; c takes over once the lease has
	// expired. Healed, the old leader follows.
	c := leaders.startReplica(t, e.c, "c", ttl)
	run = leaseRun(t, e.c)
	other.c.cut.Store(true)
	leaseWait(t, other.name+" steps down", func() bool { return !other.leading.Load() })
	leaseWait(t, "c leads after the partition", c.leading.Load)
	if st := leaseResult(t, e.c, run); st.Released || st.Holder != other.name {
		t.Errorf("partitioned lease ended %+v, want expired, held by %s", st, other.name)
	}
	other.c.cut.Store(false)

	// A crashed leader (no release) is succeeded after the TTL.
	run = leaseRun(t, e.c)
	c.c.cut.Store(true)
	c.stop()
	leaseWait(t, other.name+" leads after the crash", other.leading.Load)
	if st := leaseResult(t, e.c, run); st.Released || st.Holder != "c" {
		t.Errorf("crashed lease ended %+v, want expired, held by c", st)
	}
	if n := leaders.now.Load(); n != 1 {
		t.Errorf("%d replicas lead at the end", n)
	}
}

// TestLeaseContinuesAsNewOnServer renews a lease across several
// continue-as-new boundaries, addressed as the Elector does (latest run
// of the chain it started): every renewal lands, and the holder, the
// count and the release carry over.
func TestLeaseContinuesAsNewOnServer(t *testing.T) {
	e := start(t)
	w, err := leader.Serve(e.c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const id = "lease-continues"
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflow.LeaseTaskQueue},
		workflow.Lease, workflow.LeaseInput{Holder: "x", TTL: time.Minute, RenewalsPerRun: 2})
	if err != nil {
		t.Fatal(err)
	}
	update := func(name, holder string) (workflow.LeaseState, error) {
		var st workflow.LeaseState
		h, err := e.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, FirstExecutionRunID: run.GetRunID(),
			UpdateName: name, Args: []any{workflow.LeaseRenewal{Holder: holder}}, WaitForStage: client.WorkflowUpdateStageCompleted})
		if err == nil {
			err = h.Get(ctx, &st)
		}
		return st, err
	}
	for i := range 5 {
		st, err := update(workflow.UpdateRenewLease, "x")
		if err != nil {
			t.Fatalf("renewal %d: %v", i+1, err)
		}
		if st.Holder != "x" || st.Renewals != i+1 {
			t.Fatalf("renewal %d: %+v", i+1, st)
		}
	}
	if _, err := update(workflow.UpdateRenewLease, "y"); err == nil || !strings.Contains(err.Error(), `held by "x"`) {
		t.Errorf("renewal by another holder after continue-as-new: %v", err)
	}
	d, err := e.c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if d.GetWorkflowExecutionInfo().GetExecution().GetRunId() == run.GetRunID() {
		t.Errorf("still the first run after 5 renewals of 2 per run")
	}
	if _, err := update(workflow.UpdateReleaseLease, "x"); err != nil {
		t.Fatal(err)
	}
	var st workflow.LeaseState
	if err := e.c.GetWorkflow(ctx, id, "").Get(ctx, &st); err != nil || !st.Released || st.Renewals != 5 || st.Holder != "x" {
		t.Errorf("lease ended %+v %v, want released by x after 5 renewals", st, err)
	}
}
