package workflow

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/notify"
)

// NotifyRetention is how long a message keeps being tried: a service
// down for longer misses it (the worker logs each failed try).
const NotifyRetention = 24 * time.Hour

// Notify delivers one notification message (package notify): the
// reconciler starts one per message key, as notify/<campaign>/<key>, so
// that a message is delivered once however many passes find it due. It
// runs beside the campaign it is about and holds nothing up: a service
// that is down delays only its own message, tried again with backoff
// (5 s doubling to 10 min) for NotifyRetention.
func Notify(ctx workflow.Context, d notify.Delivery) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: NotifyRetention,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2,
			MaximumInterval: 10 * time.Minute},
	})
	return workflow.ExecuteActivity(ctx, a.Notify, d).Get(ctx, nil)
}

// NotifyID is the workflow id of the message with key, about campaign.
func NotifyID(campaign, key string) string { return "notify/" + campaign + "/" + key }
