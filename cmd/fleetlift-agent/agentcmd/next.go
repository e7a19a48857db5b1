package agentcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// serveOne serves one sandbox: SIGINT and SIGTERM end its work, as they
// end the agent while it waits for the next sandbox (default handling,
// restored when serveOne returns).
func serveOne(ctx context.Context, opts agent.Options) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return agent.Serve(ctx, opts)
}

// maxNextBytes bounds a protocol.Next line.
const maxNextBytes = 64 << 10

// newNextReader reads the lines of the control socket ctl, each up to
// maxNextBytes.
func newNextReader(ctl io.Reader) *bufio.Reader { return bufio.NewReaderSize(ctl, maxNextBytes) }

// awaitNext says on ctl that the agent is idle and reads the sandbox it
// serves next from r (newNextReader): ok is false when the provider closed the socket (or is
// gone), and the agent exits.
func awaitNext(ctl io.Writer, r *bufio.Reader) (n protocol.Next, ok bool, err error) {
	if _, err := io.WriteString(ctl, protocol.Idle+"\n"); err != nil {
		// The provider that started the agent is gone: nobody will
		// hand it a sandbox.
		return n, false, nil
	}
	// r holds maxNextBytes: a line that does not fit is too long.
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return n, false, fmt.Errorf("next sandbox: over %d bytes", maxNextBytes)
	}
	if err != nil {
		// Closed, with or without a partial line: no next sandbox.
		return n, false, nil
	}
	if err := json.Unmarshal(line, &n); err != nil {
		return n, false, fmt.Errorf("next sandbox: %w", err)
	}
	for name, p := range map[string]string{"workspace": n.Workspace, "home": n.Home, "lease": n.Lease, "log": n.Log} {
		if p == "" && (name == "lease" || name == "log") {
			continue
		}
		if !filepath.IsAbs(p) {
			return n, false, fmt.Errorf("next sandbox: %s %q is not an absolute path", name, p)
		}
	}
	return n, true, nil
}

// moveTo makes the agent the next sandbox's: its output goes to n.Log (if
// set), it works in n.Workspace, and its commands get n.Home as HOME.
func moveTo(n protocol.Next) error {
	if n.Log != "" {
		if err := redirectOutput(n.Log); err != nil {
			return fmt.Errorf("log %s: %w", n.Log, err)
		}
	}
	if err := os.Chdir(n.Workspace); err != nil {
		return err
	}
	return os.Setenv("HOME", n.Home)
}
