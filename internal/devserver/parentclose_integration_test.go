package devserver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"
)

// wideParent starts n children that wait to be cancelled, asking the
// server to cancel them should it close first, and waits for them.
func wideParent(ctx sdkworkflow.Context, n int) error {
	var futures []sdkworkflow.ChildWorkflowFuture
	for i := range n {
		cctx := sdkworkflow.WithChildOptions(ctx, sdkworkflow.ChildWorkflowOptions{
			WorkflowID:        fmt.Sprintf("%s/child-%02d", sdkworkflow.GetInfo(ctx).WorkflowExecution.ID, i),
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		})
		futures = append(futures, sdkworkflow.ExecuteChildWorkflow(cctx, waitingChild))
	}
	for _, f := range futures {
		if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			return err
		}
	}
	for _, f := range futures {
		_ = f.Get(ctx, nil)
	}
	return nil
}

func waitingChild(ctx sdkworkflow.Context) error {
	return sdkworkflow.Await(ctx, func() bool { return false })
}

// A parent terminated with more running children than Temporal hands to
// its system worker (ten), which the embedded server does not run: the
// history service cancels every child itself, as a campaign's tasks must
// stop when an operator terminates the campaign.
func TestTerminatedParentCancelsEveryChild(t *testing.T) {
	e := start(t)
	const queue, n = "parent-close", 12
	w := worker.New(e.c, queue, worker.Options{})
	w.RegisterWorkflow(wideParent)
	w.RegisterWorkflow(waitingChild)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "wide", TaskQueue: queue}, wideParent, n)
	if err != nil {
		t.Fatal(err)
	}
	child := func(i int) string { return fmt.Sprintf("wide/child-%02d", i) }
	// Every child has started before the parent goes.
	for i := range n {
		for {
			d, err := e.c.DescribeWorkflowExecution(ctx, child(i), "")
			if err == nil && d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("child %d did not start: %v", i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := e.c.TerminateWorkflow(ctx, "wide", run.GetRunID(), "operator"); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		err := e.c.GetWorkflow(ctx, child(i), "").Get(ctx, nil)
		// On a context of its own: the wait may have used up ctx.
		d, derr := e.c.DescribeWorkflowExecution(context.Background(), child(i), "")
		if derr != nil {
			t.Fatalf("child %d: %v", i, derr)
		}
		if st := d.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
			t.Errorf("child %d ended %s (%v); want cancelled with its parent", i, st, err)
		}
	}
}
