package dispatch_test

import (
	"context"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// A decision the plan read as pending can reach its task just after the
// task finished (with that very decision, mostly, which its campaign has
// not recorded yet): that is no failure to report on every pass. A task
// still running gets the signal.
func TestDecisionReachingAFinishedTaskIsNoError(t *testing.T) {
	c := embedded(t)
	ctx := context.Background()
	const digest = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
	start := func(id string) {
		t.Helper()
		// No worker runs it: it stays as started until terminated.
		if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "nobody"}, workflow.Task, workflow.TaskInput{ID: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	start("task/finished")
	if err := c.TerminateWorkflow(ctx, "task/finished", "", "finished"); err != nil {
		t.Fatal(err)
	}
	start("task/running")
	d := &dispatch.Temporal{Client: c}
	decide := func(wid string) error {
		rec := state.Campaign{ID: "t", Kind: state.KindTask, WorkflowID: wid,
			PendingApprovals: []state.PendingApproval{{Target: "t", ResultDigest: digest, WorkflowID: wid}}}
		return d.Decide(ctx, plan.ApprovalChange{Record: approval.Record{File: "approvals/t.yaml", Target: "t", ResultDigest: digest, By: "alice", Action: approval.Approve}}, rec)
	}
	if err := decide("task/finished"); err != nil {
		t.Errorf("a decision reaching a finished task: %v; want no error", err)
	}
	if err := decide("task/running"); err != nil {
		t.Errorf("a decision reaching a running task: %v", err)
	}
	hist := c.GetWorkflowHistory(ctx, "task/running", "", false, 0)
	signalled := false
	for hist.HasNext() {
		ev, err := hist.Next()
		if err != nil {
			t.Fatal(err)
		}
		if s := ev.GetWorkflowExecutionSignaledEventAttributes(); s != nil && s.SignalName == workflow.SignalApprove {
			signalled = true
		}
	}
	if !signalled {
		t.Error("the running task was not signalled")
	}
}
