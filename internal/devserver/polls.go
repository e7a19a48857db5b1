package devserver

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// longPolls ends the frontend's long polls when the server stops. The
// frontend drains for as long as a call is in flight, a second at least,
// and the server's own workers keep polling it to the end: its parent
// close policy processor is never stopped. Without this every stop of the
// embedded server (the end of each `fleetlift run`) took a second more.
type longPolls struct {
	mu       sync.Mutex
	stopping bool
	next     uint64
	cancels  map[uint64]context.CancelFunc
}

// isLongPoll reports whether method (a gRPC full method name) may wait
// for work to come: the task queue polls, and a history read that waits
// for new events.
func isLongPoll(method string) bool {
	const svc = "/temporal.api.workflowservice.v1.WorkflowService/"
	name, ok := strings.CutPrefix(method, svc)
	return ok && (strings.HasPrefix(name, "Poll") || name == "GetWorkflowExecutionHistory")
}

// intercept is the frontend interceptor: a long poll runs on a context
// stop can end; a long poll that comes after stop began is refused at
// once, as cancelled (an error the server neither logs nor counts as a failure), which pollers wait out and retry.
func (p *longPolls) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !isLongPoll(info.FullMethod) {
		return handler(ctx, req)
	}
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return nil, status.Error(codes.Canceled, "the server is stopping")
	}
	ctx, cancel := context.WithCancel(ctx)
	id := p.next
	p.next++
	if p.cancels == nil {
		p.cancels = map[uint64]context.CancelFunc{}
	}
	p.cancels[id] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.cancels, id)
		p.mu.Unlock()
		cancel()
	}()
	return handler(ctx, req)
}

// stop ends every long poll in flight and refuses the ones to come.
func (p *longPolls) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = true
	for _, cancel := range p.cancels {
		cancel()
	}
}
