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
)

// QueryMayStart is the query a campaign answers for RunUnits before each
// unit of a run but the first: whether unit key, taken into the run at
// the campaign's revision rev, may start now (arguments key and rev; a
// bool).
const QueryMayStart = "may-start"

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
	// Rev is the campaign's revision when it made the run, which
	// QueryMayStart is asked with.
	Rev int
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
	Done []UnitOutcome `json:"done"`
}

// UnitOutcome is how one unit of a run ended: the agent's outcome, with
// only what the campaign keeps of its result (no diffs, no output), or
// the error that ended it. Took is how long it worked.
type UnitOutcome struct {
	Key     string     `json:"key"`
	Outcome RunOutcome `json:"outcome"`
	Error   string     `json:"error,omitempty"`
	// Cancelled: the run was cancelled while the unit worked.
	Cancelled bool          `json:"cancelled,omitempty"`
	Took      time.Duration `json:"took"`
}

// Failed reports whether the unit did not complete.
func (u UnitOutcome) Failed() bool {
	return u.Error != "" || u.Outcome.Status.Phase != protocol.PhaseComplete
}

// unitsProgress is RunUnits' heartbeat: the units done, and the sandbox
// of the one at work (empty between units), which an attempt that takes
// over goes on from.
type unitsProgress struct {
	Done    []UnitOutcome `json:"done,omitempty"`
	Current runProgress   `json:"current"`
}

// RunUnits runs a campaign's units one after another, each as
// RunSandboxed runs a task: its own sandbox, its agent waited for, its
// result read, the sandbox removed. A campaign that runs many short
// units spares the server a dispatch of an activity and a workflow task
// for each unit after a run's first.
//
// Before each unit but the first, the campaign is asked (QueryMayStart)
// whether it may start: a campaign stopped, suspended or paused since,
// or whose spec changed, says no, and the units left go back to it, as
// they do once the run has worked Within, or after a unit that failed
// when StopAtFailure is set, or when the answer cannot be had.
//
// A unit's error does not end the run: it is that unit's outcome. Only
// an error Temporal would retry, before the last attempt, fails the
// activity; the attempt after starts from the heartbeat, which holds the
// units done and the sandbox at work. A cancelled run removes the
// sandbox at work and reports what was done, that unit cancelled.
func (a *Activities) RunUnits(ctx context.Context, in UnitsInput) (UnitsOutcome, error) {
	var p unitsProgress
	lastProgress(ctx, &p)
	beat := newBeat(ctx)
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
		if i > 0 && !resumed && !a.mayGoOn(ctx, in, out.Done, began, u.Key) {
			break
		}
		var lost []string
		if resumed {
			lost = p.Current.Lost
		}
		start := time.Now()
		first := i == len(p.Done)
		r, err := a.runSandboxed(ctx, in.input(u), lost, func(c runProgress) {
			// The units done before this one are told at once: an
			// attempt after a dead worker must not run them again.
			// (Temporal's client holds back all but one heartbeat in 80%
			// of the timeout, and sends the latest should the attempt
			// fail.)
			beat.set(unitsProgress{Done: out.Done, Current: c}, len(c.Lost) > 0 || !first)
		})
		done := UnitOutcome{Key: u.Key, Outcome: keptOf(r), Took: time.Since(start)}
		switch {
		case err == nil:
		case ctx.Err() != nil && (workerStopping(ctx) || errors.Is(ctx.Err(), context.DeadlineExceeded)):
			// The attempt that takes over goes on from the heartbeat.
			return out, err
		case ctx.Err() != nil:
			done.Error, done.Cancelled = "cancelled", true
			out.Done = append(out.Done, done)
			return out, nil
		case !lastAttempt && retryable(err):
			return out, err
		default:
			done.Error = appMessage(err)
		}
		out.Done = append(out.Done, done)
		beat.set(unitsProgress{Done: out.Done}, false)
	}
	return out, nil
}

// mayGoOn reports whether the run goes on to unit key after the units
// done.
func (a *Activities) mayGoOn(ctx context.Context, in UnitsInput, done []UnitOutcome, began time.Time, key string) bool {
	if ctx.Err() != nil {
		return false
	}
	if in.Within > 0 && time.Since(began) >= in.Within {
		return false
	}
	if in.StopAtFailure && len(done) > 0 && done[len(done)-1].Failed() {
		return false
	}
	ask := a.MayStart
	if ask == nil {
		ask = askCampaign
	}
	ok, err := ask(ctx, key, in.Rev)
	if err != nil {
		sdkactivity.GetLogger(ctx).Warn("campaign did not say whether the next unit may start; the rest go back to it", "unit", key, "error", err)
		return false
	}
	return ok
}

// askCampaign asks the campaign that scheduled this activity whether
// unit key may start (QueryMayStart).
func askCampaign(ctx context.Context, key string, rev int) (bool, error) {
	if !sdkactivity.IsActivity(ctx) {
		return false, errors.New("not an activity: no campaign to ask")
	}
	info := sdkactivity.GetInfo(ctx)
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := sdkactivity.GetClient(ctx).QueryWorkflow(qctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, QueryMayStart, key, rev)
	if err != nil {
		return false, err
	}
	var ok bool
	if err := v.Get(&ok); err != nil {
		return false, fmt.Errorf("decode %s: %w", QueryMayStart, err)
	}
	return ok, nil
}

// keptOf is what a campaign keeps of a unit's outcome: its phase, error,
// notes and lost sandboxes, and of each repository its status, pull
// request, report and errors. The diffs and the agent's output stay out
// of the campaign's history.
func keptOf(r RunOutcome) RunOutcome {
	k := RunOutcome{Lost: r.Lost, Notes: r.Notes}
	k.Status = protocol.Status{Phase: r.Status.Phase, Message: r.Status.Message}
	k.Result = protocol.Result{Status: r.Result.Status, Error: r.Result.Error, StartedAt: r.Result.StartedAt, CompletedAt: r.Result.CompletedAt}
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
