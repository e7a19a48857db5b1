package devserver

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Stopping ends the long polls in flight and refuses new ones, and leaves
// every other call alone: the frontend then has nothing left to drain.
func TestStopEndsLongPollsOnly(t *testing.T) {
	var p longPolls
	const (
		poll    = "/temporal.api.workflowservice.v1.WorkflowService/PollWorkflowTaskQueue"
		history = "/temporal.api.workflowservice.v1.WorkflowService/GetWorkflowExecutionHistory"
		start   = "/temporal.api.workflowservice.v1.WorkflowService/StartWorkflowExecution"
	)
	// A handler that waits for work, as matching does, until its context
	// ends.
	waiting := func(entered chan<- struct{}) grpc.UnaryHandler {
		return func(ctx context.Context, req any) (any, error) {
			entered <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	call := func(ctx context.Context, method string, h grpc.UnaryHandler) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := p.intercept(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, h)
			done <- err
		}()
		return done
	}
	entered := make(chan struct{}, 3)
	polls := []<-chan error{call(context.Background(), poll, waiting(entered)), call(context.Background(), history, waiting(entered))}
	// A call that is not a long poll is not the stop's to end.
	other, cancelOther := context.WithCancel(context.Background())
	defer cancelOther()
	startDone := call(other, start, waiting(entered))
	for range 3 {
		<-entered
	}

	p.stop()
	for i, done := range polls {
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("long poll %d ended with %v, want its context cancelled", i, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("long poll %d still in flight after stop", i)
		}
	}
	select {
	case err := <-startDone:
		t.Fatalf("a call that is not a long poll was ended by stop: %v", err)
	default:
	}
	_, err := p.intercept(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: poll}, func(context.Context, any) (any, error) {
		t.Error("a long poll after stop reached the handler")
		return nil, nil
	})
	if status.Code(err) != codes.Canceled {
		t.Errorf("long poll after stop: %v, want Canceled", err)
	}
	got, err := p.intercept(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: start}, func(_ context.Context, req any) (any, error) { return req, nil })
	if err != nil || got != "req" {
		t.Errorf("a call after stop that is not a long poll: %v, %v; want it served", got, err)
	}
}
