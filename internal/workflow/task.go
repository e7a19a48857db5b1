package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/status"
)

// a is used only to name activities; workflows never call its methods.
var a *activity.Activities

// Task runs one task in one sandbox: provision, submit the manifest, wait
// for the agent, then, when approval is required, wait for approve, steer
// (any number of times), reject or cancel. A sandbox lost to a crash (its
// agent killed without finishing, or the sandbox gone) is provisioned
// again and the work run again, up to maxSandboxes in all: the steering
// already given is given again, and a result with the digest already
// approved is approved by that decision. The sandbox is removed whatever
// happens, including cancellation.
func Task(ctx workflow.Context, in TaskInput) (status.TaskResult, error) {
	t := newTaskRun(ctx, in)
	if err := workflow.SetQueryHandler(ctx, status.QueryStatus, func() (status.TaskState, error) { return *t.st, nil }); err != nil {
		return t.res, err
	}
	if workflow.GetInfo(ctx).ParentWorkflowExecution == nil && opensPullRequests(in) {
		// A task of its own (a campaign's units are followed by their
		// campaign): its pull requests are followed beside it.
		follow(ctx)
	}
	// Cleanup runs on a disconnected context: it must happen even when
	// the workflow is cancelled.
	defer t.cleanupOnFinish()
	return t.run()
}

// taskRun is one run of Task: what its steps share.
type taskRun struct {
	ctx workflow.Context
	in  TaskInput
	st  *status.TaskState
	res status.TaskResult
	// approvals are the approve records carried out: they count as
	// carried out only if the task then completes, so that a record
	// approving a change that was never pushed still applies to a retry.
	approvals []string
	// finished is set when the workflow ends (every return but one goes
	// through finish). The deferred cleanup runs only then: when a worker
	// stops, the SDK unwinds cached workflows with runtime.Goexit, which
	// runs deferred functions too, and a cleanup run then would remove the
	// sandbox of a task that is still going on elsewhere.
	finished bool
	// cleanedUp is the sandbox the last wait removed: the deferred
	// cleanup has nothing left to do for it.
	cleanedUp string
	// search keeps the run's phase search attribute current.
	search *searchAttributes
	// base names the first sandbox; ref is the sandbox in use.
	base string
	ref  activity.SandboxRef
	// The short sandbox steps (steer, clean up) go to the worker that
	// holds the sandbox (sandboxSteps); the wait for the agent, which can
	// take an hour and must move to another worker of that host if this
	// one dies, heartbeats.
	steps              sandboxSteps
	timeout, heartbeat time.Duration
	// unsubmitted is set while the sandbox's agent awaits the manifest
	// the next wait hands it.
	unsubmitted bool
	// approvedResult is the result a decision approved: the worker
	// proposes its trees, and no other (activity.Delivery).
	approvedResult *protocol.Result
	// iteration is the steering iteration of the sandbox's work. steers
	// are the prompts given so far, and approved the digest of the
	// result approved: a new sandbox's work is steered and approved again
	// by the decisions already taken.
	iteration int
	steers    []string
	approved  string
}

// newTaskRun starts a run of Task in ctx: in the provisioning phase,
// its first sandbox named after the workflow execution.
func newTaskRun(ctx workflow.Context, in TaskInput) *taskRun {
	info := workflow.GetInfo(ctx)
	base := sandboxID(info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	hostTimeout := in.HostTimeout
	if hostTimeout <= 0 {
		hostTimeout = DefaultHostTimeout
	}
	return &taskRun{
		ctx: ctx, in: in,
		st:     &status.TaskState{ID: in.ID, Phase: status.TaskProvisioning, Merge: in.Merge, KeepCurrent: in.KeepCurrent, Done: in.Done},
		res:    status.TaskResult{ID: in.ID, Merge: in.Merge, KeepCurrent: in.KeepCurrent, Done: in.Done},
		search: newSearchAttributes(ctx),
		base:   base, ref: activity.SandboxRef{ID: base},
		steps:   sandboxSteps{hostTimeout: hostTimeout},
		timeout: in.agentTimeout(), heartbeat: in.heartbeatTimeout(),
	}
}

// run provisions the first sandbox, waits for its agent and, while the
// agent awaits input, for the decisions on its results, replacing lost
// sandboxes on the way, until the task ends.
func (t *taskRun) run() (status.TaskResult, error) {
	// firstPhases end the agent's first run of the work in a sandbox.
	firstPhases := []protocol.Phase{protocol.PhaseAwaitingInput, protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled}
	var r *protocol.Result
	err := t.start(0)
	if err == nil {
		r, err = t.wait(0, firstPhases...)
	} else if !sandboxLost(err) {
		return t.finish(failedOrCancelled(t.ctx), errText(err), nil)
	}
	for {
		if err != nil {
			again, ferr := t.startOver(err)
			if !again {
				return t.finish(failedOrCancelled(t.ctx), errText(ferr), t.lastLost(ferr, r))
			}
			t.iteration = 0
			r, err = t.wait(0, firstPhases...)
			continue
		}
		switch t.st.AgentPhase {
		case protocol.PhaseComplete:
			if msg := unapprovedPushes(t.approvedResult, r); msg != "" {
				return t.finish(status.TaskFailed, msg, r)
			}
			return t.finish(status.TaskCompleted, "", r)
		case protocol.PhaseFailed:
			return t.finish(status.TaskFailed, "", r)
		case protocol.PhaseCancelled:
			return t.finish(status.TaskCancelled, "", r)
		}
		// awaiting_input: the approval loop.
		digest, act, prompt, timedOut := t.awaitApproval(r)
		if t.ctx.Err() != nil || timedOut {
			return t.abandon(timedOut, r)
		}
		switch act {
		case protocol.ActionApprove:
			r, err = t.approve(digest, r)
		case protocol.ActionSteer:
			r, err = t.steerAgain(prompt, r)
		default: // reject, cancel
			return t.reject(act, r)
		}
	}
}

// finish ends the task in phase p: it records the result, says why (msg,
// or else the agent's error in r) and, unless the task completed, takes
// back the approvals it carried out.
func (t *taskRun) finish(p status.TaskPhase, msg string, r *protocol.Result) (status.TaskResult, error) {
	st, res := t.st, &t.res
	t.finished = true
	t.search.setPhase(t.ctx, string(p))
	st.Phase = p
	res.Phase = p
	res.Error = msg
	res.ModelUsage = st.LostUsage
	if r != nil {
		res.Repositories = status.RepoResults(*r)
		res.ModelUsage = r.ModelUsage.Plus(st.LostUsage)
		if res.Error == "" {
			res.Error = r.Error
		}
	}
	res.Applied = st.Applied
	if p != status.TaskCompleted && len(t.approvals) > 0 {
		res.Applied = slices.DeleteFunc(slices.Clone(st.Applied), func(rec string) bool { return slices.Contains(t.approvals, rec) })
		st.Applied = res.Applied
	}
	res.SandboxesLost = len(st.Lost)
	res.Notes = st.Notes
	st.Final = res
	return *res, nil
}

// cleanupOnFinish removes the sandbox in use once the task has
// finished, unless the last wait removed it already.
func (t *taskRun) cleanupOnFinish() {
	if !t.finished || t.cleanedUp == t.ref.ID {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(t.ctx)
	if _, err := t.steps.cleanup(dctx, t.ref); err != nil {
		workflow.GetLogger(t.ctx).Error("sandbox cleanup failed", "sandbox", t.ref.ID, "error", err)
	}
}

// start provisions sandbox n (0, then 1, 2, ... for the ones that
// replace a lost sandbox) and leaves handing its agent the manifest to
// the first wait, on the sandbox's host.
func (t *taskRun) start(n int) error {
	id := t.base
	if n > 0 {
		id = fmt.Sprintf("%s-%d", t.base, n)
	}
	got, err := t.steps.provision(t.ctx, t.in.provision(id), func(why string) { t.st.Message = why })
	if err != nil {
		return &stepError{"provision sandbox", err}
	}
	// What the sandbox could not apply is said once per task, in the
	// worker's log and the task's notes.
	for _, n := range got.Notes {
		if !slices.Contains(t.st.Notes, n) {
			t.st.Notes = append(t.st.Notes, n)
			workflow.GetLogger(t.ctx).Warn(n, "task", t.in.ID, "sandbox", got.ID)
		}
	}
	got.Notes = nil
	t.ref = got
	t.st.Sandbox = t.ref.ID
	t.unsubmitted = true
	t.st.Phase = status.TaskRunning
	return nil
}

// wait waits for the agent to reach one of phases (at steering iteration
// minIteration or later) and reads its result in one activity
// (AwaitAgentResult). A worker that dies while waiting is noticed at the
// heartbeat timeout and the wait goes on elsewhere, as often as that
// happens within the agent's timeout.
func (t *taskRun) wait(minIteration int, phases ...protocol.Phase) (*protocol.Result, error) {
	t.search.setPhase(t.ctx, string(t.st.Phase))
	wctx := workflow.WithActivityOptions(t.ctx, t.steps.onHost(t.ref, workflow.ActivityOptions{
		StartToCloseTimeout:    t.timeout,
		ScheduleToCloseTimeout: t.timeout,
		HeartbeatTimeout:       t.heartbeat,
		RetryPolicy: &temporal.RetryPolicy{NonRetryableErrorTypes: []string{
			activity.ErrAgentExited, activity.ErrSandboxGone, activity.ErrResultTooLarge}},
	}))
	waitIn := activity.WaitInput{Sandbox: t.ref, Phases: phases, MinIteration: minIteration, Reports: activity.ReportCheckOf(t.in.Manifest),
		// A finished agent ends the task (every terminal phase
		// finishes in run): the wait that finds it so removes the
		// sandbox as well.
		CleanUp: true,
		// A completed transform's changes are proposed by the
		// worker, on the sandbox's host, before the sandbox goes.
		Deliver: activity.DeliveryOf(t.in.Manifest, t.approvedResult)}
	if t.unsubmitted {
		m := t.in.Manifest
		// The budgets count on from what the sandboxes lost before used.
		m.Limits.Spent = t.st.LostUsage
		waitIn.Manifest = &m
	}
	var out activity.AgentOutcome
	if err := workflow.ExecuteActivity(wctx, a.AwaitAgentResult, waitIn).Get(t.ctx, &out); err != nil {
		return nil, &stepError{"agent", err}
	}
	t.unsubmitted = false
	if out.CleanedUp {
		t.cleanedUp = t.ref.ID
	}
	t.st.AgentPhase, t.st.Message, t.st.Iteration = out.Status.Phase, out.Status.Message, out.Status.Iteration
	t.st.Result = &out.Result
	return &out.Result, nil
}

// steer writes steering s for the sandbox's agent, on ctx (which may be
// disconnected), tried up to attempts times.
func (t *taskRun) steer(ctx workflow.Context, attempts int32, s protocol.Steering) error {
	s.Timestamp = workflow.Now(ctx)
	return t.steps.run(ctx, t.ref, attempts, a.SubmitSteering, activity.SteeringInput{Sandbox: t.ref, Steering: s}, nil)
}

// startOver replaces a lost sandbox: while err says the sandbox was lost
// (not that the work failed) and fewer than maxSandboxes were used, it
// removes the lost one, provisions another and hands it the manifest. It
// reports whether the work starts over, and the error that ends the task
// otherwise.
func (t *taskRun) startOver(err error) (bool, error) {
	for {
		if !sandboxLost(err) || len(t.st.Lost)+1 >= maxSandboxes {
			return false, err
		}
		workflow.GetLogger(t.ctx).Warn("sandbox lost; provisioning another", "sandbox", t.ref.ID, "error", err)
		// What its model calls used is the task's: counted in its
		// result, and in the budgets of the sandboxes after it.
		t.countLost(fmt.Sprintf("sandbox %s lost (%s): the work runs again in a new one", t.ref.ID, errText(err)))
		t.st.AgentPhase, t.st.Result = "", nil
		if err = t.start(len(t.st.Lost)); err == nil {
			return true, nil
		}
	}
}

// lastLost counts the sandbox a task that gives up on lost sandboxes
// lost last (err says it was lost), as startOver counts the others: among
// the sandboxes lost, and what its model calls used (removing it now,
// which tells) in the task's usage. It returns r, the last result, to
// finish with: without its usage when the sandbox's count replaced it.
func (t *taskRun) lastLost(err error, r *protocol.Result) *protocol.Result {
	if !sandboxLost(err) || t.ctx.Err() != nil || t.cleanedUp == t.ref.ID {
		// Not lost, cancelled, or the sandbox lost is one already
		// counted (another could not be provisioned).
		return r
	}
	if !t.countLost(fmt.Sprintf("sandbox %s lost (%s): %d sandboxes used, no more are provisioned", t.ref.ID, errText(err), maxSandboxes)) {
		return r
	}
	// What its calls used, r's share included when r is its result.
	if r != nil && r.ModelUsage != nil {
		rr := *r
		rr.ModelUsage = nil
		return &rr
	}
	return r
}

// countLost records the loss of sandbox t.ref, saying why, removes it
// and adds what the gateway counted of its model calls to the task's
// usage. It reports whether there was such a count.
func (t *taskRun) countLost(why string) bool {
	t.st.Lost = append(t.st.Lost, why)
	used, err := t.steps.cleanup(t.ctx, t.ref)
	if err != nil {
		workflow.GetLogger(t.ctx).Error("clean up the lost sandbox", "sandbox", t.ref.ID, "error", err)
		return false
	}
	t.cleanedUp = t.ref.ID
	t.st.LostUsage = t.st.LostUsage.Plus(used)
	return used != nil
}

// awaitApproval puts result r, which awaits input, up for a decision and
// returns its digest and the decision: the one already taken on a lost
// sandbox's work (steer as it was steered, approve the same digest), or
// else one awaited (awaitDecision); timedOut when none came in time.
func (t *taskRun) awaitApproval(r *protocol.Result) (digest string, act protocol.Action, prompt string, timedOut bool) {
	st := t.st
	st.Phase = status.TaskAwaitingApproval
	t.search.setPhase(t.ctx, string(st.Phase))
	digest = ResultDigest(t.iteration, r)
	st.ResultDigest = digest
	st.AwaitingSince = workflow.Now(t.ctx)
	switch {
	case t.iteration < len(t.steers):
		// A new sandbox's work, steered as the one lost was.
		act, prompt = protocol.ActionSteer, t.steers[t.iteration]
	case t.approved != "" && digest == t.approved:
		// A new sandbox's work came out as the result approved.
		act = protocol.ActionApprove
	default:
		if t.approved != "" {
			st.Ignored = appendNote(st.Ignored, fmt.Sprintf("the work run again in a new sandbox came out as result %s, not %s, which was approved: it awaits a decision of its own", digest, t.approved))
			t.approved = ""
		}
		t.approvalStatus(forge.StatusPending, t.in.Open, fmt.Sprintf("its change, made again on the base as it is now, awaits approval: fleetlift status %s", t.in.ID))
		act, prompt, timedOut = awaitDecision(t.ctx, t.in.ApprovalTimeout, st, &t.approvals)
	}
	st.ResultDigest = ""
	return digest, act, prompt, timedOut
}

// abandon ends a task cancelled, or given no decision in time, while
// awaiting approval: it tells the agent to stop, on a context that
// survives the cancellation.
func (t *taskRun) abandon(timedOut bool, r *protocol.Result) (status.TaskResult, error) {
	dctx, _ := workflow.NewDisconnectedContext(t.ctx)
	_ = t.steer(dctx, 3, protocol.Steering{Action: protocol.ActionCancel, Iteration: t.iteration})
	msg := "cancelled while awaiting approval"
	if timedOut {
		msg = fmt.Sprintf("no approval within %s", t.in.ApprovalTimeout)
	}
	t.approvalStatus(forge.StatusError, t.in.Open, "the change made again was "+msg+": this pull request holds the earlier change")
	return t.finish(status.TaskCancelled, msg, r)
}

// approve carries out the approval of result r (digest): the agent
// pushes and proposes its changes, and the wait returns its final result.
// A steering not delivered leaves r and says why.
func (t *taskRun) approve(digest string, r *protocol.Result) (*protocol.Result, error) {
	t.st.Phase = status.TaskCreatingPRs
	t.approved, t.approvedResult = digest, r
	if err := t.steer(t.ctx, 5, protocol.Steering{Action: protocol.ActionApprove, Iteration: t.iteration}); err != nil {
		return r, &stepError{"approve", err}
	}
	final, err := t.wait(0, protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled)
	if err == nil && final != nil && len(t.in.Open) > 0 {
		var pushed []protocol.PullRequestInfo
		for _, rr := range final.Repositories {
			if rr.PullRequest != nil && rr.PullRequest.NotOverwritten == "" {
				pushed = append(pushed, *rr.PullRequest)
			}
		}
		t.approvalStatus(forge.StatusSuccess, pushed, "the change made again was approved, result "+approval.ShortDigest(digest))
	}
	return final, err
}

// steerAgain hands the agent prompt for its next iteration and waits for
// the result it comes to. A steering not delivered leaves r and says why.
func (t *taskRun) steerAgain(prompt string, r *protocol.Result) (*protocol.Result, error) {
	if t.iteration == len(t.steers) {
		t.steers = append(t.steers, prompt)
		t.res.Steers++
	}
	t.iteration++
	t.st.Phase = status.TaskRunning
	if err := t.steer(t.ctx, 5, protocol.Steering{Action: protocol.ActionSteer, Prompt: prompt, Iteration: t.iteration}); err != nil {
		return r, &stepError{"steer", err}
	}
	return t.wait(t.iteration, protocol.PhaseAwaitingInput, protocol.PhaseFailed, protocol.PhaseCancelled)
}

// reject ends the task on a reject or cancel decision (act), telling the
// agent to stop.
func (t *taskRun) reject(act protocol.Action, r *protocol.Result) (status.TaskResult, error) {
	if err := t.steer(t.ctx, 5, protocol.Steering{Action: protocol.ActionCancel, Iteration: t.iteration}); err != nil {
		workflow.GetLogger(t.ctx).Warn("cancel steering not delivered", "error", err)
	}
	msg := "rejected"
	if act == protocol.ActionCancel {
		msg = "cancelled"
	}
	t.approvalStatus(forge.StatusFailure, t.in.Open, "the change made again was "+msg+": this pull request holds the earlier change")
	return t.finish(status.TaskCancelled, msg, r)
}

// approvalStatus sets the fleetlift/approval status of prs, the pull
// requests of a change made again: best effort, as a status is a
// courtesy to the people looking at them and never decides the task.
func (t *taskRun) approvalStatus(state string, prs []protocol.PullRequestInfo, description string) {
	if len(prs) == 0 {
		return
	}
	actx := workflow.WithActivityOptions(t.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	in := activity.ApprovalStatusInput{PRs: prs, State: state, Description: description}
	if err := workflow.ExecuteActivity(actx, a.SetApprovalStatus, in).Get(t.ctx, nil); err != nil {
		workflow.GetLogger(t.ctx).Warn("fleetlift/approval status not set", "task", t.in.ID, "error", err)
	}
}

// maxSandboxes bounds the sandboxes one task uses: the first, and those
// that replace sandboxes lost to crashes.
const maxSandboxes = 6

// appendNote adds note to notes, keeping the latest 20.
func appendNote(notes []string, note string) []string {
	notes = append(notes, note)
	if len(notes) > 20 {
		notes = notes[len(notes)-20:]
	}
	return notes
}

// Versions: no release of fleetlift has run its workflows yet, so Task
// and Campaign have one code path each and record no version marker.
// From the first release on, every change to the commands a workflow
// issues (an activity, timer, child, marker or search attribute added,
// removed, reordered or given other options) goes behind
// workflow.GetVersion, and the replay tests keep a recorded run of the
// version before it: a run in flight must replay on the code that takes
// it over.

// unapprovedPushes compares what the agent pushed after an approval with
// the result approved: every pull request must propose exactly the tree
// the approved result showed for its repository. It describes the first
// mismatch, "" when there is none.
func unapprovedPushes(approved, final *protocol.Result) string {
	if approved == nil || final == nil {
		return ""
	}
	trees := map[string]string{}
	for _, rr := range approved.Repositories {
		trees[rr.Name] = rr.Tree
	}
	for _, rr := range final.Repositories {
		pr := rr.PullRequest
		if pr == nil || pr.NotOverwritten != "" {
			// Nothing pushed: someone else's branch, taken over as it is.
			continue
		}
		want, ok := trees[rr.Name]
		switch {
		case !ok:
			return fmt.Sprintf("the agent pushed %s to %s, a repository the approved result did not change", pr.Commit, rr.Name)
		case want == "":
			// An agent from before trees were reported: nothing to compare.
		case pr.Tree != want:
			return fmt.Sprintf("the agent pushed %s to %s with tree %q, not the approved tree %s: the pull request does not hold what was approved", pr.Commit, rr.Name, pr.Tree, want)
		}
	}
	return ""
}

// awaitDecision waits for approve, steer, reject or cancel, the approval
// timeout, or the workflow's cancellation. A decision that names no
// result, or a result other than the one awaiting approval
// (st.ResultDigest), is recorded as ignored and the wait goes on: whoever
// can signal the workflow must still know what the result is.
func awaitDecision(ctx workflow.Context, timeout time.Duration, st *status.TaskState, approvals *[]string) (act protocol.Action, prompt string, timedOut bool) {
	sel := workflow.NewSelector(ctx)
	decided := false
	current := func(name string, d DecisionSignal) bool {
		if d.ResultDigest == "" {
			note := fmt.Sprintf("%s without a result digest refused: a decision names the result it decides (`fleetlift status %s` shows it)", name, st.ID)
			if d.Record != "" {
				note += " (" + d.Record + ")"
			}
			st.Ignored = appendNote(st.Ignored, note)
			workflow.GetLogger(ctx).Warn("decision without a digest refused", "signal", name)
			return false
		}
		if d.ResultDigest == st.ResultDigest {
			if d.Record != "" {
				st.Applied = append(st.Applied, d.Record)
			}
			return true
		}
		note := fmt.Sprintf("%s for result %s ignored: the result awaiting approval is %s", name, d.ResultDigest, st.ResultDigest)
		if d.Record != "" {
			note += " (" + d.Record + ")"
		}
		st.Ignored = appendNote(st.Ignored, note)
		workflow.GetLogger(ctx).Info("stale decision ignored", "signal", name, "digest", d.ResultDigest, "current", st.ResultDigest)
		return false
	}
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalApprove), func(c workflow.ReceiveChannel, _ bool) {
		var d DecisionSignal
		c.Receive(ctx, &d)
		if current(SignalApprove, d) {
			act, decided = protocol.ActionApprove, true
			if d.Record != "" {
				*approvals = append(*approvals, d.Record)
			}
		}
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalSteer), func(c workflow.ReceiveChannel, _ bool) {
		var s SteerSignal
		c.Receive(ctx, &s)
		if current(SignalSteer, s.DecisionSignal) {
			act, prompt, decided = protocol.ActionSteer, s.Prompt, true
		}
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalReject), func(c workflow.ReceiveChannel, _ bool) {
		var d DecisionSignal
		c.Receive(ctx, &d)
		if current(SignalReject, d) {
			act, decided = protocol.ActionReject, true
		}
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalCancel), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		act, decided = protocol.ActionCancel, true
	})
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { decided = true })
	if timeout > 0 {
		tctx, cancel := workflow.WithCancel(ctx)
		defer cancel()
		sel.AddFuture(workflow.NewTimer(tctx, timeout), func(f workflow.Future) {
			if f.Get(tctx, nil) == nil {
				timedOut, decided = true, true
			}
		})
	}
	for !decided {
		sel.Select(ctx)
	}
	return act, prompt, timedOut
}

// ResultDigest identifies a result awaiting approval: the steering
// iteration and what the agent changed or reported in each repository.
// The same result read twice has the same digest; a result after a steer
// has another, even when the diffs came out the same, so an approval
// given for the earlier one never carries over.
func ResultDigest(iteration int, r *protocol.Result) string {
	h := sha256.New()
	fmt.Fprintf(h, "fleetlift result v1\niteration %d\n", iteration)
	if r != nil {
		enc := json.NewEncoder(h)
		for _, rr := range r.Repositories {
			_ = enc.Encode(struct {
				Name    string                   `json:"name"`
				Status  string                   `json:"status"`
				Diffs   []protocol.FileDiff      `json:"diffs"`
				Report  *protocol.Report         `json:"report"`
				ForEach []protocol.ForEachResult `json:"for_each"`
				Error   string                   `json:"error"`
				// The tree itself, not just the diffs shown, which may
				// be cut: an approval approves exactly one tree.
				Tree string `json:"tree,omitempty"`
			}{rr.Name, rr.Status, rr.Diffs, rr.Report, rr.ForEach, rr.Error, rr.Tree})
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func failedOrCancelled(ctx workflow.Context) status.TaskPhase {
	if errors.Is(ctx.Err(), workflow.ErrCanceled) {
		return status.TaskCancelled
	}
	return status.TaskFailed
}

// stepError is a step of the task that failed: its errText is the step's
// name and what went wrong.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

func errText(err error) string {
	var se *stepError
	if errors.As(err, &se) {
		// An activity's error may name its step already ("provision
		// sandbox: ...").
		inner := errText(se.err)
		if strings.HasPrefix(inner, se.step+": ") {
			return inner
		}
		return se.step + ": " + inner
	}
	// A child's failure wraps its cause: say the cause.
	var ce *temporal.ChildWorkflowExecutionError
	if errors.As(err, &ce) && errors.Unwrap(ce) != nil {
		err = errors.Unwrap(ce)
	}
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return "timed out (" + te.TimeoutType().String() + ")"
	}
	var cancelled *temporal.CanceledError
	if errors.As(err, &cancelled) {
		return "cancelled"
	}
	return err.Error()
}

var unsafeIDChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// sandboxID derives the sandbox's name from the workflow execution, so a
// retried provisioning finds the sandbox it made and a new run, however
// soon after, gets a new one.
func sandboxID(workflowID, runID string) string {
	id := strings.Trim(unsafeIDChars.ReplaceAllString(workflowID, "-"), "-.")
	if len(id) > 80 {
		id = id[:80]
	}
	return id + "-" + shortRunID(runID)
}
