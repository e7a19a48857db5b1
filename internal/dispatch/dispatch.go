// Package dispatch carries plans out on Temporal: it starts Task and
// Campaign workflows under their deterministic IDs with the memo the state
// reader reads back, signals running ones (in-place updates, suspend and
// resume, approval decisions) and cancels them. Every operation is
// idempotent, so the reconciler may repeat it: a start finds the run it
// already started, a decision names the result or record it is about.
// Latch keeps the reconciler's launch gate (watch.require_reviewed_merge)
// in Temporal, so that it survives restarts.
//
// The reconciler plans from Temporal's visibility store, which lags: a
// run it does not show yet may have started, even finished. So a start
// never trusts the plan for what ran: it reads the workflow's current run
// by ID (Temporal's own record, which does not lag) and starts a run only
// for a generation newer than that run's, with ID policies that refuse a
// second run beside a running one, or a first generation after any run.
//
// dispatch imports the Temporal SDK client, spec, state, plan and
// workflow; never the server (its tests start the embedded one).
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// Temporal is a reconcile.Dispatcher over a Temporal client.
type Temporal struct {
	Client client.Client
	// Options carry what definitions do not say (forge, approval timeout).
	Options workflow.Options
}

var _ reconcile.Dispatcher = (*Temporal)(nil)

// ErrAlreadyRunning is returned (wrapped) by StartRun when a run of the
// same workflow ID is going: the start is refused, not repeated.
var ErrAlreadyRunning = errors.New("already running")

// ErrAlreadyStarted is returned (wrapped) by StartRun when the workflow
// ID's current run, finished or not, is of the generation asked for or a
// later one: that start happened already.
var ErrAlreadyStarted = errors.New("already started")

// Generation is the generation a run records in its memo; 0 when it
// records none.
func Generation(info *workflowpb.WorkflowExecutionInfo) int64 {
	var g int64
	if p, ok := info.GetMemo().GetFields()[status.MemoGeneration]; ok {
		if payload.Converter.FromPayload(p, &g) != nil {
			return 0
		}
	}
	return g
}

// SpecDigest is the digest of the definition a run records in its memo
// (the spec it last took in place); "" when it records none.
func SpecDigest(info *workflowpb.WorkflowExecutionInfo) string {
	var d string
	if p, ok := info.GetMemo().GetFields()[status.MemoDigest]; ok {
		if payload.Converter.FromPayload(p, &d) != nil {
			return ""
		}
	}
	return d
}

// Memo is the memo a run of d records: identity, digest, normalised spec,
// generation and the campaigns revision it came from.
func Memo(d spec.Definition, rev string, generation int64) (map[string]any, error) {
	var specJSON []byte
	var err error
	if d.Campaign != nil {
		specJSON, err = json.Marshal(d.Campaign)
	} else {
		specJSON, err = json.Marshal(d.Task)
	}
	if err != nil {
		return nil, fmt.Errorf("encode spec %s: %w", d.ID, err)
	}
	m := map[string]any{
		status.MemoKind: string(d.Kind), status.MemoID: d.ID, status.MemoDigest: d.Digest, status.MemoFile: d.File,
		status.MemoSpec: json.RawMessage(specJSON), status.MemoGeneration: generation,
	}
	if rev != "" {
		m[status.MemoRevision] = rev
	}
	return m, nil
}

// StartRun starts run generation of d and returns it. It reads the
// workflow ID's current run first, from Temporal's record of it rather
// than from visibility: a run still going makes it fail with
// ErrAlreadyRunning, a run of this generation or a later one, finished or
// not, with ErrAlreadyStarted; a finished run of an earlier generation is
// followed by the new run. The start itself refuses a run beside a
// running one (conflict policy fail) and, for generation 1, a run after
// any other (reuse policy reject duplicate), so that a start racing
// another for the first generation starts one run.
func StartRun(ctx context.Context, c client.Client, d spec.Definition, opts workflow.Options, rev string, generation int64) (client.WorkflowRun, error) {
	s, err := workflow.ForDefinition(d, opts)
	if err != nil {
		return nil, err
	}
	memo, err := Memo(d, rev, generation)
	if err != nil {
		return nil, err
	}
	cur, err := c.DescribeWorkflowExecution(ctx, s.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return nil, fmt.Errorf("start %s: read its current run: %w", s.WorkflowID, err)
	case cur.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return nil, fmt.Errorf("%s: %w", s.WorkflowID, ErrAlreadyRunning)
	default:
		if g := Generation(cur.GetWorkflowExecutionInfo()); g >= generation {
			return nil, fmt.Errorf("%s: generation %d: its run %s is of generation %d: %w",
				s.WorkflowID, generation, cur.GetWorkflowExecutionInfo().GetExecution().GetRunId(), g, ErrAlreadyStarted)
		}
	}
	reuse := enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	if generation <= 1 {
		reuse = enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE
	}
	so := client.StartWorkflowOptions{
		ID:                       s.WorkflowID,
		TaskQueue:                workflow.TaskQueue,
		WorkflowIDReusePolicy:    reuse,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without it the SDK hands back the running workflow's handle
		// and no error.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		Memo:                                     memo,
	}
	var run client.WorkflowRun
	if s.Campaign != nil {
		in := *s.Campaign
		in.Generation = generation
		so.TypedSearchAttributes = workflow.StartAttributes(string(d.Kind), d.ID, d.ID, d.Digest, string(status.CampaignRunning))
		run, err = startCampaign(ctx, c, so, in)
		if err != nil && run != nil {
			// It started; some of its units did not reach it.
			return run, err
		}
	} else {
		so.TypedSearchAttributes = workflow.StartAttributes(string(d.Kind), d.ID, "", d.Digest, string(status.TaskProvisioning))
		run, err = Execute(ctx, c, so, workflow.Task, *s.Task)
	}
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		// Another start got there between the read and this one: a run
		// is going, or (generation 1) one ran.
		return nil, fmt.Errorf("%s: %w", s.WorkflowID, ErrAlreadyStarted)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.WorkflowID, err)
	}
	return run, nil
}

// Execute starts a workflow with its search attributes, or without
// them when the namespace has not registered them (a Temporal cluster
// whose operator has not run `temporal operator search-attribute create`
// for workflow.SearchAttributeNames): the run then carries its memo
// alone, and keeps no search attribute current.
func Execute(ctx context.Context, c client.Client, so client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	run, err := c.ExecuteWorkflow(ctx, so, wf, args...)
	if err != nil && so.TypedSearchAttributes.Size() > 0 && unregisteredAttribute(err) {
		so.TypedSearchAttributes = temporal.SearchAttributes{}
		return c.ExecuteWorkflow(ctx, so, wf, args...)
	}
	return run, err
}

// unregisteredAttribute reports whether a start was refused for a search
// attribute the namespace does not define.
func unregisteredAttribute(err error) bool {
	var ia *serviceerror.InvalidArgument
	return errors.As(err, &ia) && strings.Contains(strings.ToLower(ia.Message), "search attribute")
}

// Start starts a run of d; a run already going under its ID, or one of
// this generation or a later one that finished, counts as started
// (another pass, or another replica, got there first, and the recorded
// state the plan came from did not show it yet).
func (t *Temporal) Start(ctx context.Context, d spec.Definition, rev string, generation int64) error {
	_, err := StartRun(ctx, t.Client, d, t.Options, rev, generation)
	if errors.Is(err, ErrAlreadyRunning) || errors.Is(err, ErrAlreadyStarted) {
		return nil
	}
	return err
}

// UpdateInPlace signals a running campaign its new spec and memo.
func (t *Temporal) UpdateInPlace(ctx context.Context, d spec.Definition, rec state.Campaign, rev string) error {
	s, err := workflow.ForDefinition(d, t.Options)
	if err != nil {
		return err
	}
	if s.Campaign == nil {
		return fmt.Errorf("%s: only a campaign takes a new spec in place", d.ID)
	}
	memo, err := Memo(d, rev, rec.Generation+1)
	if err != nil {
		return err
	}
	in := *s.Campaign
	in.Suspend = false // suspension follows the spec through Suspend
	in.Generation = rec.Generation + 1
	head, pieces := workflow.Split(in)
	if err := t.signal(ctx, rec, workflow.SignalUpdate, workflow.UpdateSignal{Input: head, Memo: memo}); err != nil {
		return err
	}
	return sendPieces(ctx, t.Client, rec.WorkflowID, "", pieces)
}

// Cancel asks the run to stop; its tasks clean up their sandboxes.
func (t *Temporal) Cancel(ctx context.Context, rec state.Campaign, reason string) error {
	err := t.Client.CancelWorkflow(ctx, rec.WorkflowID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cancel %s (%s): %w", rec.WorkflowID, reason, err)
	}
	return nil
}

// Suspend suspends or resumes a running campaign. A task has nothing to
// suspend once started.
func (t *Temporal) Suspend(ctx context.Context, rec state.Campaign, suspend bool) error {
	if rec.Kind != state.KindCampaign {
		return nil
	}
	name := workflow.SignalResume
	if suspend {
		name = workflow.SignalSuspend
	}
	return t.signal(ctx, rec, name, nil)
}

// Decide sends an applying approval record to the run it is about.
// Continue, abort and retry name the record's generation, so that a run
// of another generation (one that started after the plan was made)
// ignores them.
func (t *Temporal) Decide(ctx context.Context, a plan.ApprovalChange, rec state.Campaign) error {
	r := a.Record
	d := workflow.DecisionSignal{ResultDigest: r.ResultDigest, By: r.By, Record: r.ID()}
	if r.Action.BindsResult() {
		p, ok := rec.Pending(r.Target)
		if !ok || p.WorkflowID == "" {
			return fmt.Errorf("nothing awaits approval for %s", r.Target)
		}
		var name string
		var arg any = d
		switch r.Action {
		case approval.Approve:
			name = workflow.SignalApprove
		case approval.Reject:
			name = workflow.SignalReject
		case approval.Steer:
			name, arg = workflow.SignalSteer, workflow.SteerSignal{Prompt: r.Prompt, DecisionSignal: d}
		}
		err := t.Client.SignalWorkflow(ctx, p.WorkflowID, "", name, arg)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			// The task finished between the read the plan came from and
			// now (with this decision, mostly: its campaign has not
			// recorded it yet). Nothing is decided here; the next pass
			// reads what the task did.
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.Action, p.WorkflowID, err)
		}
		return nil
	}
	switch r.Action {
	case approval.Continue:
		return t.signal(ctx, rec, workflow.SignalContinue, workflow.ContinueSignal{Record: d.Record, Generation: r.Generation})
	case approval.Abort:
		return t.signal(ctx, rec, workflow.SignalAbort, workflow.RecordSignal{Record: d.Record, Generation: r.Generation})
	case approval.Retry:
		return t.signal(ctx, rec, workflow.SignalRetryFailed, workflow.RecordSignal{Record: d.Record, Unit: r.Unit(), Generation: r.Generation})
	}
	return fmt.Errorf("unknown action %q", r.Action)
}

func (t *Temporal) signal(ctx context.Context, rec state.Campaign, name string, arg any) error {
	if err := t.Client.SignalWorkflow(ctx, rec.WorkflowID, "", name, arg); err != nil {
		return fmt.Errorf("signal %s to %s: %w", name, rec.WorkflowID, err)
	}
	return nil
}
