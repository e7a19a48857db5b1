package leader

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// Forwarder hands the webhook hints a replica that does not lead
// receives to the one that does: it gathers them for a moment and
// signals them to the lease, whose holder takes them with its next
// renewal (Elector.Hints), within TTL/3. With several replicas behind
// one Service, the forge's deliveries reach any of them; without it, a
// standby's would be lost until the leader's next poll.
type Forwarder struct {
	Client client.Client
	// WorkflowID is the lease's (default workflow.LeaseWorkflowID).
	WorkflowID string
	// Gather is how long hints gather before one signal carries them
	// (default 500ms).
	Gather time.Duration
	Log    *slog.Logger

	mu      sync.Mutex
	pending workflow.LeaseHints
	wake    chan struct{}
	once    sync.Once
}

func (f *Forwarder) init() {
	f.once.Do(func() { f.wake = make(chan struct{}, 1) })
}

// Add gathers hints h for the next signal. It never blocks; beyond
// workflow.MaxLeaseHintKeys repositories until then, keys are dropped.
func (f *Forwarder) Add(h workflow.LeaseHints) {
	f.init()
	f.mu.Lock()
	f.pending.Merge(h)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run signals what Add gathered until ctx is done. A signal that fails
// is logged and dropped: with no lease running nobody leads, and the
// next leader reconciles in full when it starts.
func (f *Forwarder) Run(ctx context.Context) {
	f.init()
	id := f.WorkflowID
	if id == "" {
		id = workflow.LeaseWorkflowID
	}
	gather := f.Gather
	if gather <= 0 {
		gather = 500 * time.Millisecond
	}
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		if !sleep(ctx, gather) {
			return
		}
		f.mu.Lock()
		h := f.pending
		f.pending = workflow.LeaseHints{}
		f.mu.Unlock()
		if h.Empty() {
			continue
		}
		err := f.Client.SignalWorkflow(ctx, id, "", workflow.SignalLeaseHints, h)
		var nf *serviceerror.NotFound
		switch {
		case err == nil:
			log.Debug("forwarded webhook hints to the leader", "repository", h.Repository, "pull_request_repositories", len(h.PullRequests))
		case errors.As(err, &nf):
			log.Info("webhook hints dropped: nobody leads", "repository", h.Repository, "pull_request_repositories", len(h.PullRequests))
		case ctx.Err() == nil:
			log.Warn("forward webhook hints to the leader", "error", err)
		}
	}
}
