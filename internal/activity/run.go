package activity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Error types RunSandboxed adds to those of its steps.
const (
	// ErrAgentTimedOut: the agent did not finish within RunInput.Timeout.
	ErrAgentTimedOut = "AgentTimedOut"
	// ErrSandboxesLost: every sandbox RunInput.MaxSandboxes allows was
	// lost before the agent finished.
	ErrSandboxesLost = "SandboxesLost"
)

// RunInput is a task that needs no decision on its way, run whole by one
// activity (RunSandboxed): the sandbox to provision, the manifest for its
// agent, and how long the agent may work.
type RunInput struct {
	// Provision names the first sandbox; those that replace a lost one
	// take its id with "-1", "-2", ... after it.
	Provision ProvisionInput
	Manifest  protocol.Manifest
	// Timeout bounds the agent's work in each sandbox (default 30
	// minutes).
	Timeout time.Duration
	// MaxSandboxes bounds the sandboxes used: the first, and those that
	// replace sandboxes lost to crashes (default 1).
	MaxSandboxes int
}

// runProgress is RunSandboxed's heartbeat: the sandboxes lost so far,
// which an attempt that takes over from a dead worker starts from (its
// sandbox is the next after them), and, for whoever reads the heartbeat
// (Temporal's UI), the sandbox in use.
type runProgress struct {
	Sandbox string   `json:"sandbox"`
	Lost    []string `json:"lost,omitempty"`
	// LostUsage is what the lost sandboxes' model calls used.
	LostUsage *protocol.ModelUsage `json:"lost_usage,omitempty"`
}

// RunSandboxed runs a task from start to end in one activity: provision
// the sandbox, hand its agent the manifest, wait for a final phase
// (heartbeating all along), read the result, remove the sandbox. It is
// for tasks no decision can stop on the way (no approval, so no
// steering): one step instead of a workflow of its own.
//
// A sandbox lost to a crash (its agent exited without finishing, or the
// sandbox vanished) is removed and the work runs again in a new one, up
// to MaxSandboxes in all. A worker that dies meanwhile stops
// heartbeating; the attempt that takes over reads the last heartbeat and
// provisions the same sandbox again, which a provider that still has it
// returns as it is: an agent still at work (in a container, a pod) is
// waited for, one that finished is read, one that died is replaced.
//
// The sandbox is removed however the activity ends, cancellation
// included, except when its worker stops: the attempt that takes over
// waits for it.
func (a *Activities) RunSandboxed(ctx context.Context, in RunInput) (status.RunOutcome, error) {
	var p runProgress
	lastProgress(ctx, &p)
	beat := newBeat(ctx)
	defer beat.stop()
	return a.runSandboxed(ctx, in, p, func(p runProgress) { beat.set(p, len(p.Lost) > 0) })
}

// lastProgress sets *p to the progress the last attempt heartbeated, if
// any it could read; otherwise *p stays as it is.
func lastProgress[T any](ctx context.Context, p *T) {
	if !sdkactivity.IsActivity(ctx) || !sdkactivity.HasHeartbeatDetails(ctx) {
		return
	}
	var v T
	if sdkactivity.GetHeartbeatDetails(ctx, &v) == nil {
		*p = v
	}
}

// runSandboxed is RunSandboxed's work, from the sandboxes lost before
// (before): progress is told each sandbox it moves to. What the lost
// sandboxes' model calls used counts in the result's, and in the
// budgets of the sandboxes after them.
func (a *Activities) runSandboxed(ctx context.Context, in RunInput, before runProgress, progress func(runProgress)) (status.RunOutcome, error) {
	out := status.RunOutcome{Lost: before.Lost, LostUsage: before.LostUsage}
	limit := max(in.MaxSandboxes, 1)
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	for {
		id := in.Provision.SandboxID
		if n := len(out.Lost); n > 0 {
			id = fmt.Sprintf("%s-%d", id, n)
		}
		progress(runProgress{Sandbox: id, Lost: out.Lost, LostUsage: out.LostUsage})
		st, r, err := a.runIn(ctx, id, in, timeout, &out)
		if err == nil {
			out.Status, out.Result = st, r
			out.Result.ModelUsage = r.ModelUsage.Plus(out.LostUsage)
			return out, nil
		}
		if !SandboxLost(err) {
			return out, err
		}
		out.Lost = append(out.Lost, fmt.Sprintf("sandbox %s lost (%s): the work runs again in a new one", id, appMessage(err)))
		sdkactivity.GetLogger(ctx).Warn("sandbox lost; provisioning another", "sandbox", id, "error", err)
		if len(out.Lost) >= limit {
			// What they used is the unit's all the same.
			out.Result.ModelUsage = out.LostUsage
			return out, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("%d sandboxes lost before the agent finished; the last: %s", len(out.Lost), appMessage(err)), ErrSandboxesLost, err)
		}
	}
}

// runIn runs the task in sandbox id and removes the sandbox after
// (unless the worker is stopping). A sandbox lost adds what its model
// calls used to out.LostUsage first.
func (a *Activities) runIn(ctx context.Context, id string, in RunInput, timeout time.Duration, out *status.RunOutcome) (_ protocol.Status, _ protocol.Result, err error) {
	pin := in.Provision
	pin.SandboxID = id
	ref, err := a.provisionWhenFree(ctx, pin)
	if err != nil {
		return protocol.Status{}, protocol.Result{}, err
	}
	defer func() {
		if SandboxLost(err) {
			out.LostUsage = out.LostUsage.Plus(a.usageOf(ctx, ref.ID))
		}
		a.removeAfter(ctx, ref)
	}()
	// The budgets count on from what the sandboxes lost before used.
	in.Manifest.Limits.Spent = out.LostUsage
	for _, n := range ref.Notes {
		if !slices.Contains(out.Notes, n) {
			out.Notes = append(out.Notes, n)
			sdkactivity.GetLogger(ctx).Warn(n, "sandbox", ref.ID)
		}
	}
	if err := a.SubmitManifest(ctx, SubmitManifestInput{Sandbox: ref, Manifest: in.Manifest}); err != nil {
		return protocol.Status{}, protocol.Result{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := a.waitPhase(wctx, WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled}}, nil)
	if err != nil {
		if ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
			return st, protocol.Result{}, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("timed out after %s: the agent in sandbox %s did not finish", timeout, id), ErrAgentTimedOut, nil)
		}
		return st, protocol.Result{}, err
	}
	rc := ReportCheckOf(in.Manifest)
	r, err := a.ReadResult(ctx, ReadResultInput{Sandbox: ref, Reports: rc})
	if err == nil && rc != nil {
		rc.settle(&st, &r)
	}
	if err == nil {
		// RunSandboxed's own heartbeats go on meanwhile.
		err = a.deliver(ctx, id, DeliveryOf(in.Manifest, nil), &st, &r, nil)
	}
	return st, r, err
}

// removeAfter removes sandbox ref once its task is over there, on a
// context of its own: a cancelled task's sandbox goes too. A worker that
// is stopping, or an attempt the server gave up on, leaves it to the
// attempt that takes over.
func (a *Activities) removeAfter(ctx context.Context, ref SandboxRef) {
	if workerStopping(ctx) {
		return
	}
	if serverGaveUp(ctx) {
		if sdkactivity.IsActivity(ctx) {
			sdkactivity.GetLogger(ctx).Warn("the server no longer has this attempt; its sandbox is left to the one that takes over",
				"sandbox", ref.ID, "cause", context.Cause(ctx))
		}
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := a.Sandbox.Cleanup(cctx, ref.ID); err != nil {
		sdkactivity.GetLogger(ctx).Error("remove sandbox", "sandbox", ref.ID, "error", err)
		return
	}
	a.release(ref.ID)
}

// serverGaveUp reports whether this attempt ended because the server no
// longer has it: a heartbeat found the attempt gone (it timed out, or
// another took over) or failed past the heartbeat timeout, and the SDK
// ended the attempt with the service's error. The server runs the
// activity again, and the attempt that takes over provisions the same
// sandbox from the last heartbeat (a Kubernetes sandbox is the same
// SandboxRequest wherever the worker runs): this one must not remove it.
func serverGaveUp(ctx context.Context) bool {
	var se serviceerror.ServiceError
	return ctx.Err() != nil && errors.As(context.Cause(ctx), &se)
}

// SandboxLost reports whether err says the sandbox was lost (its agent
// exited without finishing, or it is gone), not that the work failed.
func SandboxLost(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && (ae.Type() == ErrAgentExited || ae.Type() == ErrSandboxGone)
}

func appMessage(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	return err.Error()
}

// beat heartbeats the activity's progress while it runs, whatever step
// it is in (a provisioning that waits for a pod heartbeats as a wait for
// the agent does): a worker that dies is noticed at the heartbeat
// timeout, and the attempt after it starts from the progress.
//
// A progress that only names the first sandbox says nothing the attempt
// after could not take from its input, so it waits for the first beat:
// half the heartbeat timeout after the start (quietBeat without one),
// then every second (Temporal's client sends at most one in 80% of the
// timeout). A task shorter than that sends no heartbeat at all, which
// spares the server a write per task; a worker that dies before the
// first beat is noticed at the timeout all the same, since Temporal
// counts it from the activity's start. A progress with lost sandboxes
// is heartbeated at once: the attempt after must not run the work in
// them again.
type beat struct {
	ctx  context.Context
	mu   sync.Mutex
	p    any
	done chan struct{}
	wg   sync.WaitGroup
}

// quietBeat is how long an activity without a heartbeat timeout runs
// before its first heartbeat, which Temporal's UI then shows. (A
// variable for the tests that count heartbeats: QuietBeats.)
var quietBeat = 5 * time.Second

func newBeat(ctx context.Context) *beat {
	b := &beat{ctx: ctx, done: make(chan struct{})}
	if !sdkactivity.IsActivity(ctx) {
		return b
	}
	quiet := quietBeat
	if t := sdkactivity.GetInfo(ctx).HeartbeatTimeout; t > 0 {
		quiet = t / 2
	}
	b.wg.Go(func() {
		t := time.NewTimer(quiet)
		defer t.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				b.mu.Lock()
				p := b.p
				b.mu.Unlock()
				sdkactivity.RecordHeartbeat(ctx, p)
				t.Reset(time.Second)
			}
		}
	})
	return b
}

// set makes p the progress, and heartbeats it at once when now is set
// (Temporal's client sends at most one heartbeat in 80% of the timeout,
// and the latest of those it held back when the attempt fails).
func (b *beat) set(p any, now bool) {
	b.mu.Lock()
	b.p = p
	b.mu.Unlock()
	if now && sdkactivity.IsActivity(b.ctx) {
		sdkactivity.RecordHeartbeat(b.ctx, p)
	}
}

// flush does nothing: Temporal's client sends the progress it held back
// with the attempt's failure.
func (b *beat) flush() {}

func (b *beat) stop() {
	close(b.done)
	b.wg.Wait()
}
