package activity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
)

// QueryUnitGoesOn is the query a campaign answers for a run of units it
// cancelled (RunUnits): whether the unit at work goes on, which it does
// unless the campaign itself was cancelled (a bool).
const QueryUnitGoesOn = "unit-goes-on"

// goOnEvery is how often the unit at work of a cancelled run asks again
// whether it goes on: the campaign itself may be cancelled meanwhile.
const goOnEvery = 5 * time.Second

// UnitsInput is a run of a campaign's units that need no decision on
// their way, one after another in one activity (RunUnits): each is a task
// RunSandboxed would run, Template with the unit's own sandbox,
// repositories and task id.
type UnitsInput struct {
	Template RunInput
	Units    []UnitSpec
	// Within bounds the run: once it has worked this long, no further
	// unit starts (those left go back to the campaign). Zero runs every
	// unit.
	Within time.Duration
	// StopAtFailure ends the run after a unit that failed: the campaign
	// has a failure threshold to check.
	StopAtFailure bool
	// MaxAttempts is the activity's retry policy's: at the last attempt,
	// an error that would have been retried fails its unit, and the run
	// reports the units done before it.
	MaxAttempts int
}

// UnitSpec is what sets one unit of a run apart from the run's template.
type UnitSpec struct {
	Key          string                `json:"key"`
	SandboxID    string                `json:"sandbox"`
	TaskID       string                `json:"task"`
	Repositories []protocol.Repository `json:"repositories"`
	Parallel     int                   `json:"parallel,omitempty"`
	// Attempt is the unit's attempt in the campaign (its result's
	// Attempts when the run was made), which its outcome carries: a
	// reader of the run's progress matches an outcome to the attempt it
	// belongs to.
	Attempt int `json:"attempt,omitempty"`
}

// input is the RunInput of unit u of the run.
func (in UnitsInput) input(u UnitSpec) RunInput {
	r := in.Template
	r.Provision.SandboxID = u.SandboxID
	r.Provision.Labels = map[string]string{"fleetlift.io/task-id": u.TaskID}
	m := r.Manifest
	m.Repositories, m.Parallel = u.Repositories, u.Parallel
	r.Manifest = m
	return r
}

// UnitsOutcome is what a run did: one outcome for each unit that ran,
// in the run's order. The units after them did not start.
type UnitsOutcome struct {
	Done []status.UnitOutcome `json:"done"`
}

// unitsProgress is RunUnits' heartbeat: the units done, and the sandbox
// of the one at work (empty between units), which an attempt that takes
// over goes on from.
type unitsProgress struct {
	// UnitsBeat is what the heartbeat tells of the units, which the
	// run's readers read (AtWork is the unit whose sandbox Current is).
	status.UnitsBeat
	Current runProgress `json:"current"`
}

// RunUnits runs a campaign's units one after another, each as
// RunSandboxed runs a task: its own sandbox, its agent waited for, its
// result read, the sandbox removed. A campaign that runs many short
// units spares the server a dispatch of an activity and a workflow task
// for each unit after a run's first.
//
// The campaign cancels a run as soon as it may start no further unit of
// it (a stop, a suspension, the failure threshold, an update in place).
// Before each unit but the first, the run learns whether it was
// cancelled from the heartbeat it sends, which it does at each unit all
// the same: one call to the server, where a query would cost three (the
// query, the worker's answer and its next poll). A cancelled run gives
// the units left back to the campaign, as it does once it has worked
// Within, or after a unit that failed when StopAtFailure is set, or when
// the heartbeat fails.
//
// A unit's error does not end the run: it is that unit's outcome. Only
// an error Temporal would retry, before the last attempt, fails the
// activity; the attempt after starts from the heartbeat, which holds the
// units done and the sandbox at work. A cancelled run removes the
// sandbox at work and reports what was done, that unit cancelled; the
// unit at work of a run the campaign cancelled goes on unless the
// campaign itself was cancelled (unitContext).
func (a *Activities) RunUnits(ctx context.Context, in UnitsInput) (UnitsOutcome, error) {
	var p unitsProgress
	lastProgress(ctx, &p)
	// The units an attempt before this one finished: a follower in this
	// process knows of them from here on, as if this worker had run them.
	for _, d := range p.Done {
		a.unitEnded(ctx, d)
	}
	// The beat's heartbeats end the run's context as the client's would
	// end the activity's, and go on while the unit at work ends.
	ctx, stopped := context.WithCancelCause(ctx)
	defer stopped(nil)
	beat := newDirectBeat(context.WithoutCancel(ctx), a.stillWanted, stopped)
	defer beat.stop()
	lastAttempt := true
	if sdkactivity.IsActivity(ctx) {
		lastAttempt = int(sdkactivity.GetInfo(ctx).Attempt) >= in.MaxAttempts
	}
	began := time.Now()
	out := UnitsOutcome{Done: p.Done}
	for i := len(p.Done); i < len(in.Units); i++ {
		u := in.Units[i]
		// A unit the last attempt was at has started: it goes on.
		resumed := i == len(p.Done) && p.Current.Sandbox != ""
		next := in.input(u)
		ref := &status.UnitRef{Key: u.Key, Attempt: u.Attempt}
		if i > 0 && !resumed && !mayGoOn(ctx, in, beat, unitsProgress{UnitsBeat: status.UnitsBeat{Done: out.Done, AtWork: ref}, Current: runProgress{Sandbox: next.Provision.SandboxID}}, began, u.Key) {
			break
		}
		a.unitStarted(ctx, *ref)
		var before runProgress
		if resumed {
			before = p.Current
		}
		start := time.Now()
		uctx, release := a.unitContext(ctx)
		r, err := a.runSandboxed(uctx, next, before, func(c runProgress) {
			// The heartbeat before the unit told the units done before
			// it, which an attempt after a dead worker must not run
			// again, and the unit's first sandbox; a sandbox lost and
			// replaced is told at once.
			beat.set(unitsProgress{UnitsBeat: status.UnitsBeat{Done: out.Done, AtWork: ref}, Current: c}, len(c.Lost) > 0)
		})
		// Whether the unit's context ended before the unit did: releasing
		// it below ends it all the same.
		ended := uctx.Err() != nil
		release()
		done := status.UnitOutcome{Key: u.Key, Outcome: keptOf(r), Took: time.Since(start), Attempt: u.Attempt}
		switch {
		case err == nil:
		case ended && (workerStopping(ctx) || serverGaveUp(ctx) || errors.Is(ctx.Err(), context.DeadlineExceeded)):
			// The attempt that takes over goes on from the heartbeat.
			beat.flush()
			return out, err
		case ended:
			done.Error, done.Cancelled = "cancelled", true
			out.Done = append(out.Done, done)
			a.unitEnded(ctx, done)
			return out, nil
		case !lastAttempt && retryable(err):
			beat.flush()
			return out, err
		default:
			done.Error = appMessage(err)
		}
		out.Done = append(out.Done, done)
		beat.set(unitsProgress{UnitsBeat: status.UnitsBeat{Done: out.Done}}, false)
		a.unitEnded(ctx, done)
	}
	return out, nil
}

// unitStarted tells UnitStarted, if set, of a unit of a run that starts.
func (a *Activities) unitStarted(ctx context.Context, u status.UnitRef) {
	if a.UnitStarted != nil && sdkactivity.IsActivity(ctx) {
		a.UnitStarted(sdkactivity.GetInfo(ctx).WorkflowExecution.ID, u)
	}
}

// unitEnded tells UnitEnded, if set, of a unit of a run that ended.
func (a *Activities) unitEnded(ctx context.Context, u status.UnitOutcome) {
	if a.UnitEnded != nil && sdkactivity.IsActivity(ctx) {
		a.UnitEnded(sdkactivity.GetInfo(ctx).WorkflowExecution.ID, u)
	}
}

// mayGoOn reports whether the run goes on to unit key after the units
// done (p.Done); beat heartbeats p, which names the unit's sandbox too,
// and learns whether the campaign cancelled the run.
func mayGoOn(ctx context.Context, in UnitsInput, beat *directBeat, p unitsProgress, began time.Time, key string) bool {
	if ctx.Err() != nil {
		return false
	}
	if in.Within > 0 && time.Since(began) >= in.Within {
		return false
	}
	if done := p.Done; in.StopAtFailure && len(done) > 0 && done[len(done)-1].Failed() {
		return false
	}
	ok, err := beat.gate(p)
	if err != nil {
		sdkactivity.GetLogger(ctx).Warn("no heartbeat before the next unit; the rest go back to the campaign", "unit", key, "error", err)
		return false
	}
	return ok
}

// askGoesOn asks the campaign that scheduled this activity whether the
// unit at work goes on (QueryUnitGoesOn).
func askGoesOn(ctx context.Context) (bool, error) {
	return queryCampaign(ctx, QueryUnitGoesOn)
}

// queryCampaign asks the campaign that scheduled this activity the
// query name, whose answer is a bool.
func queryCampaign(ctx context.Context, name string, args ...any) (bool, error) {
	if !sdkactivity.IsActivity(ctx) {
		return false, errors.New("not an activity: no campaign to ask")
	}
	info := sdkactivity.GetInfo(ctx)
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := sdkactivity.GetClient(ctx).QueryWorkflow(qctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, name, args...)
	if err != nil {
		return false, err
	}
	var ok bool
	if err := v.Get(&ok); err != nil {
		return false, fmt.Errorf("decode %s: %w", name, err)
	}
	return ok, nil
}

// stillWanted heartbeats progress p at once (heartbeatNow, or
// StillWanted): nil, a *temporal.CanceledError when the campaign
// cancelled the run, or why the heartbeat failed.
func (a *Activities) stillWanted(ctx context.Context, p any) error {
	if a.StillWanted == nil {
		return heartbeatNow(ctx, p)
	}
	ok, err := a.StillWanted(ctx, p)
	if err == nil && !ok {
		return temporal.NewCanceledError()
	}
	return err
}

// heartbeatNow heartbeats progress p at once, past the SDK's batching:
// nil, a *temporal.CanceledError when the activity was cancelled, or why
// the heartbeat failed (Temporal's client retries it for 30 seconds).
func heartbeatNow(ctx context.Context, p any) error {
	if !sdkactivity.IsActivity(ctx) {
		return errors.New("not an activity: no heartbeat to send")
	}
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return sdkactivity.GetClient(ctx).RecordActivityHeartbeat(hctx, sdkactivity.GetInfo(ctx).TaskToken, p)
}

// unitContext is the context the unit at work of a run works in: the
// run's, except that a cancellation the campaign asked for ends the unit
// only when the campaign says so (QueryUnitGoesOn), asked at once and
// every goOnEvery until the unit ends; any other end of the run's
// context (the worker stopping, a timeout, the activity gone) ends it at
// once.
func (a *Activities) unitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	uctx, cancelCause := context.WithCancelCause(context.WithoutCancel(ctx))
	cancel := func() { cancelCause(nil) }
	go func() {
		select {
		case <-uctx.Done():
			return
		case <-ctx.Done():
		}
		if workerStopping(ctx) || !cancelled(context.Cause(ctx)) {
			// The run's cause too: the unit's sandbox is left where the
			// server gave up on the attempt (serverGaveUp).
			cancelCause(context.Cause(ctx))
			return
		}
		ask := a.UnitGoesOn
		if ask == nil {
			ask = askGoesOn
		}
		t := time.NewTicker(goOnEvery)
		defer t.Stop()
		for {
			ok, err := ask(uctx)
			if err != nil || !ok {
				if err != nil {
					sdkactivity.GetLogger(ctx).Warn("the campaign did not say whether the unit at work goes on; it stops", "error", err)
				}
				cancel()
				return
			}
			select {
			case <-uctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return uctx, cancel
}

// keptOf is what a campaign keeps of a unit's outcome: its phase, error,
// notes, lost sandboxes and what its model calls used (the campaign's
// cost counts it), and of each repository its status, pull request,
// report and errors. The diffs and the agent's output stay out
// of the campaign's history.
func keptOf(r status.RunOutcome) status.RunOutcome {
	k := status.RunOutcome{Lost: r.Lost, LostUsage: r.LostUsage, Notes: r.Notes}
	k.Status = protocol.Status{Phase: r.Status.Phase, Message: r.Status.Message}
	k.Result = protocol.Result{Status: r.Result.Status, Error: r.Result.Error, StartedAt: r.Result.StartedAt, CompletedAt: r.Result.CompletedAt,
		ModelUsage: r.Result.ModelUsage}
	for _, rr := range r.Result.Repositories {
		k.Result.Repositories = append(k.Result.Repositories, protocol.RepositoryResult{
			Name: rr.Name, Status: rr.Status, PullRequest: rr.PullRequest, Report: rr.Report, ForEach: rr.ForEach,
			Error: rr.Error, ErrorKind: rr.ErrorKind,
		})
	}
	return k
}

// workerStopping reports whether this activity's worker is stopping.
func workerStopping(ctx context.Context) bool {
	if !sdkactivity.IsActivity(ctx) {
		return false
	}
	select {
	case <-sdkactivity.GetWorkerStopChannel(ctx):
		return true
	default:
		return false
	}
}

// NonRetryable are the error types RunSandboxed and RunUnits end with
// that another attempt would not mend: their retry policies' non-retryable
// types.
var NonRetryable = []string{ErrAgentTimedOut, ErrSandboxesLost, ErrResultTooLarge}

// retryable reports whether Temporal would retry err under a retry
// policy whose non-retryable types are NonRetryable.
func retryable(err error) bool {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		return true
	}
	return !ae.NonRetryable() && !slices.Contains(NonRetryable, ae.Type())
}
