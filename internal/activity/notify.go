package activity

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/notify"
)

// Notify delivers one message to the operator's service it names, once;
// the Notify workflow retries it. A service this worker does not have
// (--notify), and a refusal another try would meet again (a 4xx but 408
// and 429), fail for good; a 429 or 503 with Retry-After is tried again
// after the wait it asks for.
func (a *Activities) Notify(ctx context.Context, d notify.Delivery) error {
	err := a.notify(ctx, d)
	if a.NotifyTried != nil {
		outcome := "delivered"
		var ae *temporal.ApplicationError
		switch {
		case errors.As(err, &ae) && ae.NonRetryable():
			outcome = "failed"
		case err != nil:
			outcome = "retry"
		}
		a.NotifyTried(d.Service, d.Message.Event, outcome)
	}
	return err
}

func (a *Activities) notify(ctx context.Context, d notify.Delivery) error {
	s, ok := a.NotifyServices[d.Service]
	if !ok {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("no notification service %q on this worker: start it with --notify %s=slack,url-env=VAR or --notify %s=webhook,url=URL,secret-env=VAR", d.Service, d.Service, d.Service),
			"NotifyNoService", nil)
	}
	err := a.NotifyClient.Send(ctx, s, d.Message)
	var ne *notify.Error
	if err == nil || !errors.As(err, &ne) {
		return err
	}
	switch {
	case !ne.Retryable():
		return temporal.NewNonRetryableApplicationError(ne.Error(), "NotifyRefused", nil)
	case ne.RetryAfter > 0:
		return temporal.NewApplicationErrorWithOptions(ne.Error(), "NotifyRetryAfter", temporal.ApplicationErrorOptions{NextRetryDelay: ne.RetryAfter})
	}
	return temporal.NewApplicationError(ne.Error(), "NotifyFailed")
}
