package dispatch

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/notify"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// Notifications is a reconcile.Notifier on Temporal: each message is a
// Notify workflow whose id is the message's key (workflow.NotifyID), so
// a message already handed over, delivered or not, is never started
// again while Temporal keeps its workflow; a worker delivers it with
// retries, apart from the reconciler and the campaign.
type Notifications struct {
	Client client.Client
}

var _ reconcile.Notifier = Notifications{}

// Deliver starts a Notify workflow per message not started before; the
// error joins those of the starts that failed (the others stand).
func (n Notifications) Deliver(ctx context.Context, ds []notify.Delivery) error {
	var errs []error
	for _, d := range ds {
		id := workflow.NotifyID(d.Message.Campaign, d.Message.Key)
		_, err := n.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: workflow.TaskQueue,
			WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
			WorkflowExecutionErrorWhenAlreadyStarted: true,
		}, workflow.Notify, d)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if err != nil && !errors.As(err, &started) {
			errs = append(errs, fmt.Errorf("start %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
