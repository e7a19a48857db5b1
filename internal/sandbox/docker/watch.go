package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// watchOpTimeout bounds finding the container and opening its output.
const watchOpTimeout = 30 * time.Second

// Watch tells, through changed, when the agent of sandbox id may have
// written its files in path (relative to the workspace: a directory, or
// a file, which the engine's output cannot tell from the others the
// agent writes): whenever it writes
// to its standard output or error, which it does after each phase it
// records and at its end, and once more when the container stops. At most
// one wake-up is pending at a time; stop ends the watch. A wait for the
// agent then reads its status when there is news, not every tenth of a
// second through the engine's archive endpoint (an inspection, a stat and
// an archive a read).
//
// A wake-up is only a hint to read again: what is read still goes through
// CopyFrom's checks. The output itself is not read for anything: the
// agent's log is the work's business, not the worker's. An engine whose
// log driver keeps no output fails the watch, and the wait polls.
func (p *Provider) Watch(id, path string) (changed <-chan struct{}, stop func() error, err error) {
	fail := func(err error) (<-chan struct{}, func() error, error) {
		return nil, nil, fmt.Errorf("watch %s in sandbox %s: %w", path, id, err)
	}
	if _, err := workspacePath(path); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	octx, ocancel := context.WithTimeout(ctx, watchOpTimeout)
	defer ocancel()
	c, err := p.find(octx, id)
	if err != nil {
		cancel()
		return fail(err)
	}
	// From now on: what the agent writes after the watch began.
	out, err := p.cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Tail: "0"})
	if err != nil {
		cancel()
		return fail(err)
	}
	ch, wake := sandbox.Wakeup()
	go func() {
		defer out.Close()
		buf := make([]byte, 32<<10)
		for {
			_, err := out.Read(buf)
			// Output, or its end (the container stopped, the engine
			// went away, stop): read again either way.
			wake()
			if err != nil {
				return
			}
		}
	}()
	return ch, func() error { cancel(); return nil }, nil
}
