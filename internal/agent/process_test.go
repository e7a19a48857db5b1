package agent_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// Nothing a command starts may outlive it: not on timeout, not on cancel,
// not a background process of a command that finished.
func TestNoProcessOutlivesItsCommand(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(pidFile string) []string
		command func(pidFile string) []string
		cancel  bool
		timeout int
		phase   protocol.Phase
		message string
	}{
		{
			name:    "timeout",
			command: func(p string) []string { return sh(`sleep 1000 & echo $! > ` + p + `; sleep 1000`) },
			timeout: 1,
			phase:   protocol.PhaseFailed,
			message: "timed out after 1s",
		},
		{
			name:    "cancel while running",
			command: func(p string) []string { return sh(`sleep 1000 & echo $! > ` + p + `; sleep 1000`) },
			cancel:  true,
			timeout: 60,
			phase:   protocol.PhaseCancelled,
			message: "cancelled",
		},
		{
			name:    "background process of a finished setup command",
			setup:   func(p string) []string { return []string{`sleep 1000 > /dev/null 2>&1 & echo $! > ` + p} },
			command: func(string) []string { return []string{"true"} },
			timeout: 60,
			phase:   protocol.PhaseComplete,
		},
		{
			name:    "background process holding the output pipe",
			command: func(p string) []string { return sh(`sleep 1000 & echo $! > ` + p + `; echo started`) },
			timeout: 60,
			phase:   protocol.PhaseComplete,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			pidFile := filepath.Join(t.TempDir(), "pid")
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			r := repo("svc", remote)
			if tt.setup != nil {
				r.Setup = tt.setup(pidFile)
			}
			m := manifest(r)
			m.Execution.Command = tt.command(pidFile)
			m.TimeoutSeconds = tt.timeout
			start := time.Now()
			wait := startRun(t, o, m)
			if tt.cancel {
				waitStatus(t, o.Workspace, "executing", func(st protocol.Status) bool { return st.Phase == protocol.PhaseExecuting })
				for !fileExists(pidFile) && time.Since(start) < 20*time.Second {
					time.Sleep(10 * time.Millisecond)
				}
				steer(t, o.Workspace, protocol.Steering{Action: protocol.ActionCancel})
			}
			res := wait()
			if res.Status != tt.phase || !strings.Contains(status(t, o.Workspace).Message, tt.message) {
				t.Fatalf("phase %s %q (%s), want %s %q", res.Status, status(t, o.Workspace).Message, res.Error, tt.phase, tt.message)
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("run took %s", took)
			}
			data, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatalf("the command did not start its background process: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for !processGone(pid) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if !processGone(pid) {
				t.Fatalf("background process %d is still running", pid)
			}
		})
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
