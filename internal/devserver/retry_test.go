package devserver

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A probe the deadline cuts off after the server answered Unavailable
// reports why the server could not answer, not the deadline; one that
// never heard Unavailable reports what it got.
func TestRetryUnavailableKeepsTheReason(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	calls := 0
	err := retryUnavailable(ctx, time.Hour, func(context.Context) error {
		calls++
		if calls < 3 {
			return status.Error(codes.Unavailable, "database disk image is malformed")
		}
		<-ctx.Done()
		return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	})
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "database disk image is malformed" {
		t.Errorf("got %v, want the server's Unavailable with its reason", err)
	}

	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	err = retryUnavailable(ctx2, time.Hour, func(context.Context) error {
		<-ctx2.Done()
		return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("got %v, want the deadline", err)
	}

	// A first call the loaded server does not answer within its own
	// deadline is asked again, and the reason the next one hears wins
	// over the deadline that ends the wait.
	ctx3, cancel3 := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel3()
	calls = 0
	err = retryUnavailable(ctx3, 100*time.Millisecond, func(c context.Context) error {
		calls++
		if calls == 2 {
			return status.Error(codes.Unavailable, "no such table: executions_visibility")
		}
		<-c.Done()
		return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	})
	if status.Convert(err).Message() != "no such table: executions_visibility" || calls < 3 {
		t.Errorf("after %d calls got %v, want the reason the second call heard", calls, err)
	}
}
