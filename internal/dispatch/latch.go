package dispatch

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// Latch is a reconcile.Latch kept in Temporal: it is set while a
// workflow.Latch runs under ID. Temporal is the operator's: someone who
// can push to the campaigns repository, but holds no Temporal
// credentials, can neither set nor clear it.
type Latch struct {
	Client client.Client
	// ID is the latch's workflow id (workflow.ReviewedMergeLatchID).
	ID string
	// Name says what the latch holds, for people reading it in Temporal.
	Name string
}

var _ reconcile.Latch = (*Latch)(nil)

// Latched reports whether the latch's workflow runs.
func (l *Latch) Latched(ctx context.Context) (bool, error) {
	d, err := l.Client.DescribeWorkflowExecution(ctx, l.ID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("describe %s: %w", l.ID, err)
	}
	return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// Set starts the latch's workflow, or finds it running.
func (l *Latch) Set(ctx context.Context, rev string) error {
	_, err := l.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       l.ID,
		TaskQueue:                workflow.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, workflow.Latch, workflow.LatchInput{Name: l.Name, Revision: rev})
	if err != nil {
		return fmt.Errorf("start %s: %w", l.ID, err)
	}
	return nil
}

// Clear terminates the latch's workflow; a latch already clear stays so.
func (l *Latch) Clear(ctx context.Context, rev string) error {
	err := l.Client.TerminateWorkflow(ctx, l.ID, "", fmt.Sprintf("revision %s, merged from a reviewed pull request, no longer requires reviewed merges", rev))
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("terminate %s: %w", l.ID, err)
	}
	return nil
}
