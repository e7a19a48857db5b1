package leader

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// stickyTimeout is how long a lease's workflow task waits for the replica
// that ran its last one before any replica may take it: after a replica
// dies without stopping its worker, the expiry of the lease it held is
// handled at most this late.
const stickyTimeout = time.Second

// Serve starts a worker that runs the Lease workflow on
// workflow.LeaseTaskQueue. Every replica that campaigns serves it, so the
// replicas elect a leader among themselves: no fleetlift worker need run.
// Stop the returned worker after Run has returned (a leader that steps
// down releases its lease through it).
func Serve(c client.Client) (worker.Worker, error) {
	w := worker.New(c, workflow.LeaseTaskQueue, worker.Options{
		StickyScheduleToStartTimeout: stickyTimeout,
	})
	w.RegisterWorkflow(workflow.Lease)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("serve the lease task queue %s: %w", workflow.LeaseTaskQueue, err)
	}
	return w, nil
}
