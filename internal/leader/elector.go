package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// DefaultTTL is how long a lease lasts without a renewal when
// Elector.TTL is zero.
const DefaultTTL = 15 * time.Second

// minTTL keeps the renewal and retry intervals (TTL/3, TTL/10) positive
// and above a round trip to Temporal.
const minTTL = 100 * time.Millisecond

// maxReleaseWait bounds how long a leader that steps down tries to
// release the lease.
const maxReleaseWait = 5 * time.Second

// Elector campaigns for the lease under WorkflowID and runs lead while
// this replica holds it. An Elector runs once at a time; its fields must
// not change while it runs.
type Elector struct {
	Client client.Client
	// Identity names this replica in the lease; it must be unique among
	// the replicas. Default: DefaultIdentity().
	Identity string
	// TTL is how long the lease lasts without a renewal (default
	// DefaultTTL, at least 100ms). The leader renews every TTL/3 and
	// steps down when TTL*2/3 pass without a successful renewal; a
	// successor waits up to TTL after a leader that died without
	// releasing.
	TTL time.Duration
	// WorkflowID is the lease workflow's id (default
	// workflow.LeaseWorkflowID).
	WorkflowID string
	Log        *slog.Logger
	// Hints, when set, is called with the hints another replica
	// forwarded (Forwarder) that a renewal handed this one while it
	// leads; it must return quickly.
	Hints func(workflow.LeaseHints)

	leader atomic.Bool
}

// DefaultIdentity is hostname-pid-random: unique per process, and
// readable in logs and in the lease workflow.
func DefaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// IsLeader reports whether this replica leads: true from just before
// lead is called until its context is cancelled.
func (e *Elector) IsLeader() bool { return e.leader.Load() }

// Run campaigns until ctx is done. Whenever this replica acquires the
// lease it calls lead in a goroutine with a context that is cancelled
// when the lease is lost or ctx is done, and waits for lead to return
// before it campaigns again. When ctx is done while leading, it releases
// the lease (best effort) so that a successor need not wait for the TTL.
// If lead returns on its own, Run releases the lease and returns.
//
// Run returns nil when ctx is done or lead returned, and an error only
// when the Elector is misconfigured. Failures to reach Temporal are
// logged and retried.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	if e.Client == nil {
		return errors.New("leader election: no Temporal client")
	}
	if e.TTL != 0 && e.TTL < minTTL {
		return fmt.Errorf("leader election: TTL %s is below %s", e.TTL, minTTL)
	}
	s := &session{e: e, c: e.Client, identity: e.Identity, ttl: e.TTL, id: e.WorkflowID, log: e.Log}
	if s.identity == "" {
		s.identity = DefaultIdentity()
	}
	if s.ttl == 0 {
		s.ttl = DefaultTTL
	}
	if s.id == "" {
		s.id = workflow.LeaseWorkflowID
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("lease", s.id, "identity", s.identity)
	for ctx.Err() == nil {
		sent := time.Now()
		runID, err := s.start(ctx)
		var held *serviceerror.WorkflowExecutionAlreadyStarted
		switch {
		case err == nil:
			if s.hold(ctx, runID, sent, lead) {
				return nil
			}
		case errors.As(err, &held):
			s.follow(ctx)
		case ctx.Err() == nil:
			s.log.Warn("campaign for leadership", "error", err)
			sleep(ctx, s.ttl/3)
		}
	}
	return nil
}

// session is one Run's settings, defaults filled in.
type session struct {
	e        *Elector
	c        client.Client
	identity string
	ttl      time.Duration
	id       string
	log      *slog.Logger
	// holder is the holder last seen while following, to log changes.
	holder string
}

// start starts the lease workflow, which succeeds only when no lease
// runs under the id; it returns the new lease's run id.
func (s *session) start(ctx context.Context) (string, error) {
	run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       s.id,
		TaskQueue:                workflow.LeaseTaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		// Without this the SDK answers a start that conflicts with the
		// running lease with that lease's handle and no error.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     map[string]any{workflow.MemoLeaseHolder: s.identity},
	}, workflow.Lease, workflow.LeaseInput{Holder: s.identity, TTL: s.ttl})
	if err != nil {
		return "", err
	}
	return run.GetRunID(), nil
}

// giveUp is how long after sending its last successful renewal the
// leader steps down: TTL/3 before the lease can expire.
func (s *session) giveUp() time.Duration { return s.ttl * 2 / 3 }

func (s *session) errTooLate() error {
	return fmt.Errorf("no successful renewal within %s", s.giveUp())
}

// errLeadReturned ends leadership when lead returns on its own.
var errLeadReturned = errors.New("lead returned")

// hold leads while the lease started at sent (as run runID) holds. It
// reports whether Run should return: ctx is done or lead returned.
func (s *session) hold(ctx context.Context, runID string, sent time.Time, lead func(context.Context)) bool {
	leadCtx, cancelLead := context.WithCancelCause(ctx)
	stepDown := func(cause error) {
		s.e.leader.Store(false)
		cancelLead(cause)
	}
	s.e.leader.Store(true)
	s.holder = ""
	// The watchdog is the safety rule on its own clock: whatever the
	// renewal calls are doing, leadership ends TTL*2/3 after the last
	// successful renewal (or the start) was sent.
	watchdog := time.AfterFunc(s.giveUp()-time.Since(sent), func() { stepDown(s.errTooLate()) })
	defer watchdog.Stop()
	s.log.Info("acquired leadership", "run_id", runID, "ttl", s.ttl)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leadCtx)
	}()
	cause := s.keep(leadCtx, runID, watchdog, done)
	stepDown(cause)
	<-done
	switch {
	case ctx.Err() != nil:
		if !leaseGone(cause) {
			s.release(ctx, runID)
		}
		return true
	case errors.Is(cause, errLeadReturned):
		s.log.Info("lead returned; stepping down")
		s.release(ctx, runID)
		return true
	default:
		s.log.Info("lost leadership", "reason", cause.Error())
		return false
	}
}

// keep renews the lease every TTL/3 and resets the watchdog after each
// success, until leadership ends; it returns why it ended.
func (s *session) keep(leadCtx context.Context, runID string, watchdog *time.Timer, done <-chan struct{}) error {
	tick := time.NewTicker(s.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-done:
			if leadCtx.Err() != nil {
				return context.Cause(leadCtx)
			}
			return errLeadReturned
		case <-leadCtx.Done():
			return context.Cause(leadCtx)
		case <-tick.C:
		}
		at, st, err := s.renew(leadCtx, runID)
		switch {
		case leaseGone(err):
			return err
		case err != nil:
			// leadCtx is done; the next pass says why.
		case !watchdog.Reset(s.giveUp() - time.Since(at)):
			// The watchdog had fired: this renewal came too late.
			return s.errTooLate()
		case st.Hints != nil && s.e.Hints != nil:
			s.e.Hints(*st.Hints)
		}
	}
}

// renew renews the lease, retrying transient failures until ctx (the
// lead context) is done. It returns when the successful attempt was sent,
// and the lease's answer.
func (s *session) renew(ctx context.Context, runID string) (time.Time, workflow.LeaseState, error) {
	for {
		sent := time.Now()
		st, err := s.update(ctx, runID, workflow.UpdateRenewLease)
		if err == nil || leaseGone(err) {
			return sent, st, err
		}
		if ctx.Err() != nil {
			return sent, st, ctx.Err()
		}
		s.log.Warn("renew lease; retrying", "error", err)
		if !sleep(ctx, s.ttl/10) {
			return sent, st, ctx.Err()
		}
	}
}

// release gives the lease up so that a successor need not wait for the
// TTL. It is best effort: it retries transient failures, as renew does,
// for at most the TTL (an update that arrives as the lease's workflow
// task completes fails with that task), and on failure the lease expires
// by itself.
func (s *session) release(ctx context.Context, runID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(s.ttl, maxReleaseWait))
	defer cancel()
	for {
		_, err := s.update(ctx, runID, workflow.UpdateReleaseLease)
		if err == nil {
			s.log.Info("released leadership")
			return
		}
		if leaseGone(err) || ctx.Err() != nil || !sleep(ctx, s.ttl/10) {
			s.log.Warn("release lease; it expires by itself", "error", err, "within", s.ttl)
			return
		}
	}
}

// update sends a renewal or release to the lease this replica started
// (any run of it) and waits for the outcome.
func (s *session) update(ctx context.Context, runID, name string) (workflow.LeaseState, error) {
	var st workflow.LeaseState
	h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:          s.id,
		FirstExecutionRunID: runID,
		UpdateName:          name,
		Args:                []any{workflow.LeaseRenewal{Holder: s.identity}},
		WaitForStage:        client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return st, fmt.Errorf("%s lease: %w", name, err)
	}
	if err := h.Get(ctx, &st); err != nil {
		return st, fmt.Errorf("%s lease: %w", name, err)
	}
	return st, nil
}

// leaseGone reports whether err says this replica's lease is over: the
// workflow rejected the update (application error) or has closed.
// Other errors are transient and retried.
func leaseGone(err error) bool {
	var app *temporal.ApplicationError
	var nf *serviceerror.NotFound
	return errors.As(err, &app) || errors.As(err, &nf)
}

// follow waits while another lease runs, describing it every TTL/3; it
// returns when the lease has closed or ctx is done.
func (s *session) follow(ctx context.Context) {
	for {
		d, err := s.c.DescribeWorkflowExecution(ctx, s.id, "")
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("describe lease", "error", err)
		case d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
			return
		default:
			if h := holderOf(d.GetWorkflowExecutionInfo().GetMemo().GetFields()[workflow.MemoLeaseHolder]); h != s.holder {
				s.holder = h
				s.log.Info("following", "leader", h)
			}
		}
		if !sleep(ctx, s.ttl/3) {
			return
		}
	}
}

// holderOf decodes the holder from the lease's memo; "" if missing.
func holderOf(p *commonpb.Payload) string {
	var h string
	if p != nil {
		_ = payload.Converter.FromPayload(p, &h)
	}
	return h
}

// sleep waits for d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
