package agent

import (
	"context"
	"fmt"
	"os"
	"time"
)

// errOrphaned ends a run whose sandbox no worker watches any more.
type errOrphaned struct{ after time.Duration }

func (e errOrphaned) Error() string {
	return fmt.Sprintf("no worker has watched this sandbox for %s: the agent stops so that nothing runs on unattended", e.after)
}

// watchLease cancels ctx with errOrphaned once the lease file (which the
// sandbox provider touches while a worker watches the sandbox) is older
// than after, or gone. A worker that comes back in time touches it again
// and the run goes on.
func watchLease(ctx context.Context, cancel context.CancelCauseFunc, lease string, after time.Duration) {
	every := min(after/4, 30*time.Second)
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fi, err := os.Stat(lease)
		if err != nil || time.Since(fi.ModTime()) > after {
			cancel(errOrphaned{after})
			return
		}
	}
}
