package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
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
func Task(ctx workflow.Context, in TaskInput) (TaskResult, error) {
	st := &TaskState{ID: in.ID, Phase: TaskProvisioning}
	res := TaskResult{ID: in.ID}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (TaskState, error) { return *st, nil }); err != nil {
		return res, err
	}
	// approvals are the approve records carried out: they count as
	// carried out only if the task then completes, so that a record
	// approving a change that was never pushed still applies to a retry.
	var approvals []string
	// finished is set when the workflow ends (every return but one goes
	// through finish). The deferred cleanup runs only then: when a worker
	// stops, the SDK unwinds cached workflows with runtime.Goexit, which
	// runs deferred functions too, and a cleanup run then would remove the
	// sandbox of a task that is still going on elsewhere.
	finished := false
	// cleanedUp is the sandbox the last wait removed (waitCleansUpChange):
	// the deferred cleanup has nothing left to do for it.
	cleanedUp := ""
	// changes says which version of each change this run takes: one
	// marker for all of them in a run started now.
	changes := taskChangesOf(ctx)
	// search keeps the run's phase search attribute current.
	search := newSearchAttributes(ctx, changes.version)
	finish := func(p TaskPhase, msg string, r *protocol.Result) (TaskResult, error) {
		finished = true
		search.setPhase(ctx, string(p))
		st.Phase = p
		res.Phase = p
		res.Error = msg
		if r != nil {
			res.Repositories = repoResults(*r)
			res.ModelUsage = r.ModelUsage
			if res.Error == "" {
				res.Error = r.Error
			}
		}
		res.Applied = st.Applied
		if p != TaskCompleted && len(approvals) > 0 {
			res.Applied = slices.DeleteFunc(slices.Clone(st.Applied), func(rec string) bool { return slices.Contains(approvals, rec) })
			st.Applied = res.Applied
		}
		res.SandboxesLost = len(st.Lost)
		res.Notes = st.Notes
		st.Final = &res
		return res, nil
	}

	info := workflow.GetInfo(ctx)
	base := sandboxID(info.WorkflowExecution.ID, info.WorkflowExecution.RunID)
	ref := activity.SandboxRef{ID: base}
	// The short sandbox steps (provision, write a file, read a file, clean
	// up) go to the worker that holds the sandbox (sandboxSteps); the wait
	// for the agent, which can take an hour and must move to another
	// worker of that host if this one dies, heartbeats.
	hostTimeout := in.HostTimeout
	if hostTimeout <= 0 {
		hostTimeout = DefaultHostTimeout
	}
	steps := sandboxSteps{
		routed:      changes.version(ctx, hostRoutedChange) == 1,
		hostTimeout: hostTimeout,
	}

	// Cleanup runs on a disconnected context: it must happen even when
	// the workflow is cancelled.
	defer func() {
		if !finished || cleanedUp == ref.ID {
			return
		}
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		in := activity.CleanupInput{Sandbox: ref}
		var err error
		// Cleanup is a regular activity (version 1): it runs only once
		// the workflow task that scheduled it is recorded, with the
		// results of the local activities before it. As a local activity
		// (runs before version 1) it removed the sandbox at once; when
		// that workflow task then failed to complete (the server's
		// database busy, say), its retry ran those local activities again
		// and found the sandbox gone.
		if changes.version(dctx, cleanupChange) == workflow.DefaultVersion {
			lctx := workflow.WithLocalActivityOptions(dctx, shortOptions(10))
			err = workflow.ExecuteLocalActivity(lctx, a.CleanupSandbox, in).Get(lctx, nil)
		} else {
			err = steps.cleanup(dctx, ref)
		}
		if err != nil {
			workflow.GetLogger(ctx).Error("sandbox cleanup failed", "sandbox", ref.ID, "error", err)
		}
	}()

	timeout := in.agentTimeout()
	// unsubmitted is set while the sandbox's agent awaits the manifest
	// the next wait hands it (waitSubmitsChange).
	unsubmitted := false
	// start provisions sandbox n (0, then 1, 2, ... for the ones that
	// replace a lost sandbox) and hands its agent the manifest, or leaves
	// that to the first wait.
	start := func(n int) error {
		id := base
		if n > 0 {
			id = fmt.Sprintf("%s-%d", base, n)
		}
		got, err := steps.provision(ctx, in.provision(id), func(why string) { st.Message = why })
		if err != nil {
			return &stepError{"provision sandbox", err}
		}
		// What the sandbox could not apply is said once per task, in
		// the worker's log and the task's notes.
		for _, n := range got.Notes {
			if !slices.Contains(st.Notes, n) {
				st.Notes = append(st.Notes, n)
				workflow.GetLogger(ctx).Warn(n, "task", in.ID, "sandbox", got.ID)
			}
		}
		got.Notes = nil
		ref = got
		st.Sandbox = ref.ID
		if changes.folds(waitSubmitsChange) {
			// The first wait on this sandbox hands its agent the
			// manifest, on the sandbox's host.
			unsubmitted = true
			st.Phase = TaskRunning
			return nil
		}
		if err := steps.run(ctx, ref, 5, a.SubmitManifest, activity.SubmitManifestInput{Sandbox: ref, Manifest: in.Manifest}, nil); err != nil {
			return &stepError{"submit manifest", err}
		}
		st.Phase = TaskRunning
		return nil
	}

	heartbeat := in.heartbeatTimeout()
	// approvedResult is the result a decision approved: the worker
	// proposes its trees, and no other (activity.Delivery).
	var approvedResult *protocol.Result
	// wait waits for the agent and reads its result. A worker that dies
	// while waiting is noticed at the heartbeat timeout and the wait goes
	// on elsewhere, as often as that happens within the budget.
	wait := func(budget time.Duration, minIteration int, phases ...protocol.Phase) (*protocol.Result, error) {
		search.setPhase(ctx, string(st.Phase))
		wctx := workflow.WithActivityOptions(ctx, steps.onHost(ref, workflow.ActivityOptions{
			StartToCloseTimeout:    budget,
			ScheduleToCloseTimeout: budget,
			HeartbeatTimeout:       heartbeat,
			RetryPolicy: &temporal.RetryPolicy{NonRetryableErrorTypes: []string{
				activity.ErrAgentExited, activity.ErrSandboxGone, activity.ErrResultTooLarge}},
		}))
		waitIn := activity.WaitInput{Sandbox: ref, Phases: phases, MinIteration: minIteration, Reports: activity.ReportCheckOf(in.Manifest)}
		if changes.version(ctx, awaitResultChange) == 1 {
			if unsubmitted {
				waitIn.Manifest = &in.Manifest
			}
			// A finished agent ends the task (every terminal phase
			// finishes below): the wait that finds it so removes the
			// sandbox as well.
			waitIn.CleanUp = changes.folds(waitCleansUpChange)
			// A completed transform's changes are proposed by the
			// worker, on the sandbox's host, before the sandbox goes.
			waitIn.Deliver = activity.DeliveryOf(in.Manifest, approvedResult)
			var out activity.AgentOutcome
			if err := workflow.ExecuteActivity(wctx, a.AwaitAgentResult, waitIn).Get(ctx, &out); err != nil {
				return nil, &stepError{"agent", err}
			}
			unsubmitted = false
			if out.CleanedUp {
				cleanedUp = ref.ID
			}
			st.AgentPhase, st.Message, st.Iteration = out.Status.Phase, out.Status.Message, out.Status.Iteration
			st.Result = &out.Result
			return &out.Result, nil
		}
		var s protocol.Status
		if err := workflow.ExecuteActivity(wctx, a.WaitForAgentPhase, waitIn).Get(ctx, &s); err != nil {
			return nil, &stepError{"agent", err}
		}
		st.AgentPhase, st.Message, st.Iteration = s.Phase, s.Message, s.Iteration
		var r protocol.Result
		if err := steps.run(ctx, ref, 5, a.ReadResult, activity.ReadResultInput{Sandbox: ref, Reports: activity.ReportCheckOf(in.Manifest)}, &r); err != nil {
			return nil, &stepError{"read result", err}
		}
		st.Result = &r
		return &r, nil
	}
	steer := func(sctx workflow.Context, attempts int32, s protocol.Steering) error {
		s.Timestamp = workflow.Now(sctx)
		return steps.run(sctx, ref, attempts, a.SubmitSteering, activity.SteeringInput{Sandbox: ref, Steering: s}, nil)
	}
	// startOver replaces a lost sandbox: while err says the sandbox was
	// lost (not that the work failed) and fewer than maxSandboxes were
	// used, it removes the lost one, provisions another and hands it the
	// manifest. It reports whether the work starts over, and the error
	// that ends the task otherwise.
	startOver := func(err error) (bool, error) {
		for {
			if !sandboxLost(err) || len(st.Lost)+1 >= maxSandboxes ||
				changes.version(ctx, reprovisionChange) == workflow.DefaultVersion {
				return false, err
			}
			st.Lost = append(st.Lost, fmt.Sprintf("sandbox %s lost (%s): the work runs again in a new one", ref.ID, errText(err)))
			workflow.GetLogger(ctx).Warn("sandbox lost; provisioning another", "sandbox", ref.ID, "error", err)
			if cerr := steps.cleanup(ctx, ref); cerr != nil {
				workflow.GetLogger(ctx).Error("clean up the lost sandbox", "sandbox", ref.ID, "error", cerr)
			}
			st.AgentPhase, st.Result = "", nil
			if err = start(len(st.Lost)); err == nil {
				return true, nil
			}
		}
	}

	firstPhases := []protocol.Phase{protocol.PhaseAwaitingInput, protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled}
	var r *protocol.Result
	err := start(0)
	if err == nil {
		r, err = wait(timeout, 0, firstPhases...)
	} else if !sandboxLost(err) {
		return finish(failedOrCancelled(ctx), errText(err), nil)
	}
	iteration := 0
	// steers are the prompts given so far, and approved the digest of the
	// result approved: a new sandbox's work is steered and approved again
	// by the decisions already taken.
	var steers []string
	approved := ""
	for {
		if err != nil {
			again, ferr := startOver(err)
			if !again {
				return finish(failedOrCancelled(ctx), errText(ferr), r)
			}
			iteration = 0
			r, err = wait(timeout, 0, firstPhases...)
			continue
		}
		switch st.AgentPhase {
		case protocol.PhaseComplete:
			if approvedResult != nil && changes.version(ctx, pushedTreeChange) == 1 {
				if msg := unapprovedPushes(approvedResult, r); msg != "" {
					return finish(TaskFailed, msg, r)
				}
			}
			return finish(TaskCompleted, "", r)
		case protocol.PhaseFailed:
			return finish(TaskFailed, "", r)
		case protocol.PhaseCancelled:
			return finish(TaskCancelled, "", r)
		}
		// awaiting_input: the approval loop.
		st.Phase = TaskAwaitingApproval
		search.setPhase(ctx, string(st.Phase))
		digest := ResultDigest(iteration, r)
		st.ResultDigest = digest
		st.AwaitingSince = workflow.Now(ctx)
		var act protocol.Action
		var prompt string
		var timedOut bool
		switch {
		case iteration < len(steers):
			// A new sandbox's work, steered as the one lost was.
			act, prompt = protocol.ActionSteer, steers[iteration]
		case approved != "" && digest == approved:
			// A new sandbox's work came out as the result approved.
			act = protocol.ActionApprove
		default:
			if approved != "" {
				st.Ignored = appendNote(st.Ignored, fmt.Sprintf("the work run again in a new sandbox came out as result %s, not %s, which was approved: it awaits a decision of its own", digest, approved))
				approved = ""
			}
			act, prompt, timedOut = awaitDecision(ctx, in.ApprovalTimeout, st, &approvals, changes)
		}
		st.ResultDigest = ""
		if ctx.Err() != nil || timedOut {
			// Cancelled or no decision in time: tell the agent to stop,
			// on a context that survives the cancellation.
			dctx, _ := workflow.NewDisconnectedContext(ctx)
			_ = steer(dctx, 3, protocol.Steering{Action: protocol.ActionCancel, Iteration: iteration})
			msg := "cancelled while awaiting approval"
			if timedOut {
				msg = fmt.Sprintf("no approval within %s", in.ApprovalTimeout)
			}
			return finish(TaskCancelled, msg, r)
		}
		switch act {
		case protocol.ActionApprove:
			st.Phase = TaskCreatingPRs
			approved, approvedResult = digest, r
			if err = steer(ctx, 5, protocol.Steering{Action: protocol.ActionApprove, Iteration: iteration}); err != nil {
				err = &stepError{"approve", err}
				continue
			}
			r, err = wait(timeout, 0, protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled)
		case protocol.ActionSteer:
			if iteration == len(steers) {
				steers = append(steers, prompt)
				res.Steers++
			}
			iteration++
			st.Phase = TaskRunning
			if err = steer(ctx, 5, protocol.Steering{Action: protocol.ActionSteer, Prompt: prompt, Iteration: iteration}); err != nil {
				err = &stepError{"steer", err}
				continue
			}
			r, err = wait(timeout, iteration, protocol.PhaseAwaitingInput, protocol.PhaseFailed, protocol.PhaseCancelled)
		default: // reject, cancel
			if err := steer(ctx, 5, protocol.Steering{Action: protocol.ActionCancel, Iteration: iteration}); err != nil {
				workflow.GetLogger(ctx).Warn("cancel steering not delivered", "error", err)
			}
			msg := "rejected"
			if act == protocol.ActionCancel {
				msg = "cancelled"
			}
			return finish(TaskCancelled, msg, r)
		}
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

// Changes to the Task workflow, named for workflow.GetVersion.
const (
	// cleanupChange made the sandbox cleanup a regular activity.
	cleanupChange = "cleanup-after-commit"
	// reprovisionChange replaces a sandbox lost to a crash.
	reprovisionChange = "reprovision-lost-sandbox"
	// hostRoutedChange sends the short sandbox steps to the worker that
	// holds the sandbox, as regular activities (sandboxSteps).
	hostRoutedChange = "host-routed-sandbox-steps"
	// digestChange refuses decisions that name no result digest.
	digestChange = "decision-needs-digest"
	// pushedTreeChange checks what was pushed against what was approved.
	pushedTreeChange = "pushed-tree-is-approved"
	// awaitResultChange waits for the agent and reads its result in one
	// activity (AwaitAgentResult) rather than two.
	awaitResultChange = "await-agent-result"
	// waitSubmitsChange hands the agent its manifest in the first
	// AwaitAgentResult on its sandbox rather than in a SubmitManifest of
	// its own. Only runs at allTaskChanges 2 take it (taskChanges.folds):
	// it is never asked for on its own.
	waitSubmitsChange = "wait-submits-manifest"
	// waitCleansUpChange has the wait that finds the agent finished
	// remove the sandbox too (WaitInput.CleanUp) rather than leave it to
	// a CleanupSandbox of its own. Only runs at allTaskChanges 3 take it.
	waitCleansUpChange = "wait-cleans-up"
	// allTaskChanges, at version n, stands for every change in
	// foldedTaskChanges[n] at its version there (taskChanges).
	allTaskChanges = "task-changes-2026-11"
)

// foldedTaskChanges are, for each version of allTaskChanges, the changes
// it stands for and the version of each it means. Each is fixed once
// released: a later change gets a new version of allTaskChanges with a
// set of its own, and a run at an older one asks for it on its own.
var foldedTaskChanges = map[workflow.Version]map[string]workflow.Version{
	1: taskChangesV1,
	2: taskChangesV2,
	3: with(taskChangesV2, waitCleansUpChange, 1),
}

// taskChangesV2 is what allTaskChanges stands for at version 2.
var taskChangesV2 = with(taskChangesV1, waitSubmitsChange, 1)

// taskChangesV1 is what allTaskChanges stands for at version 1.
var taskChangesV1 = map[string]workflow.Version{
	cleanupChange:          1,
	reprovisionChange:      1,
	hostRoutedChange:       1,
	digestChange:           1,
	pushedTreeChange:       1,
	awaitResultChange:      1,
	searchAttributesChange: 1,
}

// with is changes and change id at version v.
func with(changes map[string]workflow.Version, id string, v workflow.Version) map[string]workflow.Version {
	out := maps.Clone(changes)
	out[id] = v
	return out
}

// latestTaskChanges is the newest version of allTaskChanges.
const latestTaskChanges workflow.Version = 3

// taskChanges says which version of each change a Task run takes. Each
// GetVersion records a marker and upserts the TemporalChangeVersion search
// attribute, a write to the visibility store each: a run started on this
// code records one, allTaskChanges, and takes every folded change at its
// version there; a run started before asks for each change as it always
// did.
type taskChanges struct{ all workflow.Version }

// taskChangesOf asks for allTaskChanges: call it before any other change.
func taskChangesOf(ctx workflow.Context) taskChanges {
	return taskChanges{all: workflow.GetVersion(ctx, allTaskChanges, workflow.DefaultVersion, latestTaskChanges)}
}

// folds reports whether this run takes change id by its allTaskChanges
// version, at version 1, without asking for it.
func (c taskChanges) folds(id string) bool {
	return foldedTaskChanges[c.all][id] == 1
}

// version is the version of change id this run takes.
func (c taskChanges) version(ctx workflow.Context, id string) workflow.Version {
	if v, ok := foldedTaskChanges[c.all][id]; ok {
		return v
	}
	max, ok := foldedTaskChanges[latestTaskChanges][id]
	if !ok {
		panic("workflow: change " + id + " is not a Task change")
	}
	return workflow.GetVersion(ctx, id, workflow.DefaultVersion, max)
}

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
		if pr == nil {
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

// shortOptions are the options of the short sandbox steps.
func shortOptions(attempts int32) workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: attempts},
	}
}

// awaitDecision waits for approve, steer, reject or cancel, the approval
// timeout, or the workflow's cancellation. A decision that names no
// result, or a result other than the one awaiting approval
// (st.ResultDigest), is recorded as ignored and the wait goes on: whoever
// can signal the workflow must still know what the result is.
func awaitDecision(ctx workflow.Context, timeout time.Duration, st *TaskState, approvals *[]string, changes taskChanges) (act protocol.Action, prompt string, timedOut bool) {
	sel := workflow.NewSelector(ctx)
	decided := false
	needDigest := changes.version(ctx, digestChange) == 1
	current := func(name string, d DecisionSignal) bool {
		if d.ResultDigest == "" && needDigest {
			note := fmt.Sprintf("%s without a result digest refused: a decision names the result it decides (`fleetlift status %s` shows it)", name, st.ID)
			if d.Record != "" {
				note += " (" + d.Record + ")"
			}
			st.Ignored = appendNote(st.Ignored, note)
			workflow.GetLogger(ctx).Warn("decision without a digest refused", "signal", name)
			return false
		}
		if d.ResultDigest == "" || d.ResultDigest == st.ResultDigest {
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

func failedOrCancelled(ctx workflow.Context) TaskPhase {
	if errors.Is(ctx.Err(), workflow.ErrCanceled) {
		return TaskCancelled
	}
	return TaskFailed
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

func repoResults(r protocol.Result) []RepoResult {
	out := make([]RepoResult, 0, len(r.Repositories))
	for _, rr := range r.Repositories {
		out = append(out, RepoResult{
			Name: rr.Name, Status: rr.Status, FilesModified: rr.FilesModified,
			PullRequest: rr.PullRequest, Report: rr.Report, ForEach: rr.ForEach, Error: rr.Error, ErrorKind: rr.ErrorKind,
		})
	}
	return out
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
