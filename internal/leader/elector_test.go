package leader_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/leader"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// ttl is short so the tests run in seconds, and long enough that its
// third (the safety margin) dwarfs scheduling delays on a busy machine.
const ttl = 900 * time.Millisecond

// fakeLease is one Lease workflow as the fake server keeps it, with the
// workflow's rules: the deadline is TTL after the last renewal it handled.
type fakeLease struct {
	runID, holder string
	ttl           time.Duration
	expires       time.Time
	// ended is set when the holder released the lease or an operator
	// terminated it.
	ended    time.Time
	released bool
	renewals int
}

func (l *fakeLease) end() time.Time {
	if !l.ended.IsZero() {
		return l.ended
	}
	return l.expires
}

// fakeServer is a Temporal server that runs one lease id.
type fakeServer struct {
	mu     sync.Mutex
	leases []*fakeLease
}

// latest is the latest lease, open or not; nil before the first.
func (s *fakeServer) latest() *fakeLease {
	if len(s.leases) == 0 {
		return nil
	}
	return s.leases[len(s.leases)-1]
}

func (s *fakeServer) running(now time.Time) *fakeLease {
	if l := s.latest(); l != nil && now.Before(l.end()) {
		return l
	}
	return nil
}

// terminate ends the running lease as an operator would.
func (s *fakeServer) terminate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.running(time.Now()); l != nil {
		l.ended = time.Now()
	}
}

// fakeClient is one replica's connection to the fake server. Cut, it
// behaves as across a network partition: calls fail or hang.
type fakeClient struct {
	client.Client
	srv *fakeServer
	cut atomic.Bool
	// failReleases fails that many release updates, as the server does
	// one that arrives as the lease's workflow task completes.
	failReleases atomic.Int32
}

var errCut = serviceerror.NewUnavailable("connection refused")

func (c *fakeClient) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	in := args[0].(workflow.LeaseInput)
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	now := time.Now()
	if l := c.srv.running(now); l != nil {
		if !o.WorkflowExecutionErrorWhenAlreadyStarted || o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL {
			// What the SDK does: hand back the running workflow.
			return fakeRun{id: o.ID, runID: l.runID}, nil
		}
		return nil, serviceerror.NewWorkflowExecutionAlreadyStarted("workflow execution already started", "", l.runID)
	}
	l := &fakeLease{runID: fmt.Sprintf("run-%d", len(c.srv.leases)+1), holder: in.Holder, ttl: in.TTL, expires: now.Add(in.TTL)}
	c.srv.leases = append(c.srv.leases, l)
	return fakeRun{id: o.ID, runID: l.runID}, nil
}

func (c *fakeClient) UpdateWorkflow(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if c.cut.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	r := o.Args[0].(workflow.LeaseRenewal)
	if o.UpdateName == workflow.UpdateReleaseLease && c.failReleases.Add(-1) >= 0 {
		return nil, serviceerror.NewUnavailable("Unable to perform workflow execution update due to unexpected workflow task failure.")
	}
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	now := time.Now()
	l := c.srv.running(now)
	if l == nil || (o.FirstExecutionRunID != "" && o.FirstExecutionRunID != l.runID) {
		return nil, serviceerror.NewNotFound("workflow execution already completed")
	}
	if r.Holder != l.holder {
		return fakeUpdate{err: temporal.NewApplicationError("lease is held by "+l.holder, workflow.LeaseRejected)}, nil
	}
	switch o.UpdateName {
	case workflow.UpdateRenewLease:
		l.expires = now.Add(l.ttl)
		l.renewals++
	case workflow.UpdateReleaseLease:
		l.ended, l.released = now, true
	default:
		return nil, fmt.Errorf("unknown update %q", o.UpdateName)
	}
	return fakeUpdate{st: workflow.LeaseState{Holder: l.holder, Expires: l.expires, Renewals: l.renewals, Released: l.released}}, nil
}

func (c *fakeClient) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	l := c.srv.latest()
	if l == nil {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + id)
	}
	status := enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	if time.Now().Before(l.end()) {
		status = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
	holder, err := converter.GetDefaultDataConverter().ToPayload(l.holder)
	if err != nil {
		return nil, err
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Status: status,
		Memo:   &commonpb.Memo{Fields: map[string]*commonpb.Payload{workflow.MemoLeaseHolder: holder}},
	}}, nil
}

type fakeRun struct {
	client.WorkflowRun
	id, runID string
}

func (r fakeRun) GetID() string    { return r.id }
func (r fakeRun) GetRunID() string { return r.runID }

type fakeUpdate struct {
	client.WorkflowUpdateHandle
	st  workflow.LeaseState
	err error
}

func (u fakeUpdate) Get(_ context.Context, v any) error {
	if u.err != nil {
		return u.err
	}
	*v.(*workflow.LeaseState) = u.st
	return nil
}

// term is one replica's time as leader.
type term struct {
	who         string
	lease       *fakeLease
	start, stop time.Time
}

// terms records every call of lead and fails the test when two overlap
// or one starts without its replica holding the lease.
type terms struct {
	t      *testing.T
	srv    *fakeServer
	mu     sync.Mutex
	all    []*term
	active *term
}

func (r *terms) lead(who string) func(context.Context) {
	return func(ctx context.Context) {
		r.mu.Lock()
		r.srv.mu.Lock()
		l := r.srv.running(time.Now())
		r.srv.mu.Unlock()
		if l == nil || l.holder != who {
			r.t.Errorf("%s leads without holding the lease", who)
		}
		if r.active != nil {
			r.t.Errorf("%s leads while %s still does", who, r.active.who)
		}
		tm := &term{who: who, lease: l, start: time.Now()}
		r.all = append(r.all, tm)
		r.active = tm
		r.mu.Unlock()

		<-ctx.Done()
		r.mu.Lock()
		tm.stop = time.Now()
		r.active = nil
		r.mu.Unlock()
	}
}

// leader is the replica leading now, "" for none.
func (r *terms) leader() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active == nil {
		return ""
	}
	return r.active.who
}

func (r *terms) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}

// checkSafety: every term stopped before its lease ended, so before the
// lease could pass to anyone else.
func (r *terms) checkSafety() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv.mu.Lock()
	defer r.srv.mu.Unlock()
	for _, tm := range r.all {
		if tm.lease == nil || tm.stop.IsZero() {
			continue
		}
		if !tm.stop.Before(tm.lease.end()) {
			r.t.Errorf("%s stopped leading %s after its lease %s ended", tm.who, tm.stop.Sub(tm.lease.end()), tm.lease.runID)
		}
	}
}

type replica struct {
	name   string
	el     *leader.Elector
	c      *fakeClient
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func startReplica(t *testing.T, srv *fakeServer, tr *terms, name string, lead func(context.Context)) *replica {
	t.Helper()
	c := &fakeClient{srv: srv}
	r := &replica{name: name, c: c, done: make(chan struct{}),
		el: &leader.Elector{Client: c, Identity: name, TTL: ttl, Log: testLogger(t, name)}}
	if lead == nil {
		lead = tr.lead(name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.err = r.el.Run(ctx, lead)
	}()
	t.Cleanup(r.stop)
	return r
}

// returned waits for Run to return after lead did.
func (r *replica) returned(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after lead did")
	}
}

// stop cancels the replica and waits for Run to return.
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

func testLogger(t *testing.T, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", name)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func leaderOf(t *testing.T, tr *terms, rs ...*replica) *replica {
	t.Helper()
	var who string
	waitFor(t, "a replica leads", func() bool { who = tr.leader(); return who != "" })
	for _, r := range rs {
		if r.name == who {
			if !r.el.IsLeader() {
				t.Errorf("%s leads but IsLeader is false", who)
			}
			return r
		}
	}
	t.Fatalf("%s leads, which is none of the replicas", who)
	return nil
}

// TestOneLeaderAtATime runs replicas through a release, a partition of
// the leader and a crash, and checks that exactly one leads at a time and
// that every leader stopped before its lease could pass on.
func TestOneLeaderAtATime(t *testing.T) {
	srv := &fakeServer{}
	tr := &terms{t: t, srv: srv}
	defer tr.checkSafety()
	a := startReplica(t, srv, tr, "a", nil)
	b := startReplica(t, srv, tr, "b", nil)
	c := startReplica(t, srv, tr, "c", nil)
	all := []*replica{a, b, c}

	first := leaderOf(t, tr, all...)
	time.Sleep(3 * ttl)
	if tr.count() != 1 || tr.leader() != first.name {
		t.Fatalf("leadership moved while %s was renewing: %d terms, leader %q", first.name, tr.count(), tr.leader())
	}
	srv.mu.Lock()
	renewals := srv.latest().renewals
	srv.mu.Unlock()
	if renewals < 2 {
		t.Errorf("%d renewals in 3 TTLs", renewals)
	}
	for _, r := range all {
		if r != first && r.el.IsLeader() {
			t.Errorf("%s says it leads too", r.name)
		}
	}

	// Shutting down releases the lease for a successor.
	first.stop()
	if first.err != nil || first.el.IsLeader() {
		t.Fatalf("after stop: err %v, leader %v", first.err, first.el.IsLeader())
	}
	srv.mu.Lock()
	released := srv.leases[0].released
	srv.mu.Unlock()
	if !released {
		t.Errorf("%s did not release the lease", first.name)
	}
	waitFor(t, "another replica leads", func() bool { w := tr.leader(); return w != "" && w != first.name })
	second := leaderOf(t, tr, all...)

	// A partitioned leader steps down; a replica that can still reach
	// the server takes over after the TTL.
	second.c.cut.Store(true)
	waitFor(t, "the partitioned leader steps down", func() bool { return !second.el.IsLeader() })
	waitFor(t, "a third term starts", func() bool { return tr.count() >= 3 && tr.leader() != "" })
	third := leaderOf(t, tr, all...)
	if third == second {
		t.Fatalf("%s leads while cut off", second.name)
	}
	second.c.cut.Store(false)

	// A crash (no release) hands over after the TTL.
	third.c.cut.Store(true)
	third.stop()
	waitFor(t, "the survivor leads", func() bool { return tr.leader() == second.name })
}

// TestStepsDownWhenLeaseEnds: when the lease ends under the leader (here
// terminated by an operator), its next renewal fails, it stops leading
// and campaigns again.
func TestStepsDownWhenLeaseEnds(t *testing.T) {
	srv := &fakeServer{}
	tr := &terms{t: t, srv: srv}
	a := startReplica(t, srv, tr, "a", nil)
	leaderOf(t, tr, a)
	srv.terminate()
	waitFor(t, "a leads a second lease", func() bool { return tr.count() == 2 && tr.leader() == "a" })
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.all[0].lease == tr.all[1].lease {
		t.Errorf("second term on the terminated lease")
	}
}

// TestLeadReturningReleases: when lead returns on its own, Run releases
// the lease and returns.
func TestLeadReturningReleases(t *testing.T) {
	srv := &fakeServer{}
	tr := &terms{t: t, srv: srv}
	a := startReplica(t, srv, tr, "a", func(context.Context) {})
	a.returned(t)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if a.err != nil || a.el.IsLeader() || len(srv.leases) != 1 || !srv.leases[0].released {
		t.Errorf("err %v, leader %v, leases %+v", a.err, a.el.IsLeader(), srv.leases)
	}
}

// TestReleaseRetries: a release the server fails (it arrived as the
// lease's workflow task completed) is sent again, and the lease is
// released, not left to expire.
func TestReleaseRetries(t *testing.T) {
	srv := &fakeServer{}
	tr := &terms{t: t, srv: srv}
	stop := make(chan struct{})
	a := startReplica(t, srv, tr, "a", func(context.Context) { <-stop })
	waitFor(t, "a leads", func() bool { return a.el.IsLeader() })
	a.c.failReleases.Store(2)
	close(stop)
	a.returned(t)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if a.err != nil || len(srv.leases) != 1 || !srv.leases[0].released || a.c.failReleases.Load() >= 0 {
		t.Errorf("err %v, leases %+v, release failures left %d: want the lease released after the two failures", a.err, srv.leases, a.c.failReleases.Load())
	}
}

func TestRunNeedsClient(t *testing.T) {
	err := (&leader.Elector{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Run(context.Background(), func(context.Context) {})
	if err == nil {
		t.Fatal("Run without a client succeeded")
	}
}

func TestDefaultIdentity(t *testing.T) {
	host, _ := os.Hostname()
	a, b := leader.DefaultIdentity(), leader.DefaultIdentity()
	if a == b {
		t.Errorf("two identities are both %q", a)
	}
	if want := fmt.Sprintf("%s-%d-", host, os.Getpid()); !strings.HasPrefix(a, want) {
		t.Errorf("identity %q, want prefix %q", a, want)
	}
}

func TestRunRejectsTinyTTL(t *testing.T) {
	el := &leader.Elector{Client: &fakeClient{srv: &fakeServer{}}, TTL: time.Millisecond}
	if err := el.Run(context.Background(), func(context.Context) {}); err == nil {
		t.Fatal("Run with a 1ms TTL succeeded")
	}
}
