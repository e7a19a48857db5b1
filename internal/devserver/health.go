package devserver

import (
	"context"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// healthWait bounds how long a start waits for the server to answer the
// health check while it reports itself unavailable (warming up).
const healthWait = 15 * time.Second

// probeWorkflowID names a workflow that never exists: looking it up
// reads the run tables through the history service.
const probeWorkflowID = "fleetlift-start-check"

// probe is one request of the health check.
type probe struct {
	what string
	call func(ctx context.Context, c workflowservice.WorkflowServiceClient) error
}

// probes read each store fleetlift's commands use first: the namespace,
// the runs and their visibility records.
var probes = []probe{
	{"describe namespace " + Namespace, func(ctx context.Context, c workflowservice.WorkflowServiceClient) error {
		_, err := c.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: Namespace})
		return err
	}},
	{"look up a workflow", func(ctx context.Context, c workflowservice.WorkflowServiceClient) error {
		_, err := c.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: probeWorkflowID}})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return err
	}},
	{"list workflows", func(ctx context.Context, c workflowservice.WorkflowServiceClient) error {
		_, err := c.ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: Namespace, PageSize: 1})
		return err
	}},
}

// checkServes asks the started server what fleetlift's commands ask
// first, as a client of the install would. A server that answers with an
// error (a database missing a table, damaged, or unreadable) fails the
// start with that error, rather than failing every request after it.
// Answers that the server is not ready yet are retried for up to wait.
func (s *Server) checkServes(wait time.Duration) error {
	conn, err := grpc.NewClient(s.address, grpc.WithTransportCredentials(credentials.NewTLS(s.creds.ClientTLS())))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", s.address, err)
	}
	defer conn.Close()
	c := workflowservice.NewWorkflowServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, p := range probes {
		if err := retryUnavailable(ctx, wait/4, func(ctx context.Context) error { return p.call(ctx, c) }); err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
	}
	return nil
}

// retryUnavailable calls call, each call for at most perCall, until it
// returns anything but Unavailable or its own deadline, or ctx ends; it
// returns the last error. A call cut off by ctx's end after earlier calls
// were Unavailable returns the last Unavailable: it says why the server
// could not answer (a damaged database, say), where the deadline says
// nothing (a loaded machine ends the wait mid-call). A call that
// outlives perCall is asked again, so that a server slow to answer its
// first request under load still gets to say why it cannot serve.
func retryUnavailable(ctx context.Context, perCall time.Duration, call func(context.Context) error) error {
	var unavailable error
	for {
		cctx, cancel := context.WithTimeout(ctx, perCall)
		err := call(cctx)
		cancel()
		if unavailable != nil && ctx.Err() != nil && status.Code(err) == codes.DeadlineExceeded {
			return unavailable
		}
		if ctx.Err() == nil && status.Code(err) == codes.DeadlineExceeded {
			continue // this call's own deadline: ask again
		}
		if status.Code(err) != codes.Unavailable {
			return err
		}
		unavailable = err
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
