package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// Nothing a command starts may outlive it: not on timeout, not on cancel,
// not a background process of a command that finished, not one that left
// its process group and session.
func TestNoProcessOutlivesItsCommand(t *testing.T) {
	background := func(marker string) string { return lingering(marker, "", "</dev/null >/dev/null 2>&1") }
	tests := []struct {
		name      string
		setup     func(marker string) []string
		command   func(marker string) []string
		cancel    bool
		timeout   int
		phase     protocol.Phase
		message   string
		unjailed  bool
		holdsPipe bool
	}{
		{
			name:    "timeout",
			command: func(m string) []string { return sh(background(m) + ` sleep 1000`) },
			timeout: 1,
			phase:   protocol.PhaseFailed,
			message: "timed out after 1s",
		},
		{
			name:    "cancel while running",
			command: func(m string) []string { return sh(background(m) + ` sleep 1000`) },
			cancel:  true,
			timeout: 60,
			phase:   protocol.PhaseCancelled,
			message: "cancelled",
		},
		{
			name:    "background process of a finished setup command",
			setup:   func(m string) []string { return []string{background(m)} },
			command: func(string) []string { return []string{"true"} },
			timeout: 60,
			phase:   protocol.PhaseComplete,
		},
		{
			name:    "background process holding the output pipe",
			command: func(m string) []string { return sh(lingering(m, "", "") + ` echo started`) },
			timeout: 60,
			phase:   protocol.PhaseComplete,
		},
		{
			name: "a new session outside its process group",
			command: func(m string) []string {
				return sh(lingering(m, "setsid", "</dev/null >/dev/null 2>&1") + ` echo started`)
			},
			timeout: 60,
			phase:   protocol.PhaseComplete,
		},
		{
			name:     "without isolation, the process group still goes",
			command:  func(m string) []string { return sh(background(m) + ` echo started`) },
			timeout:  60,
			phase:    protocol.PhaseComplete,
			unjailed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			if tt.unjailed {
				o.Isolation = nil
			}
			marker := "fleetlift-outlive-" + strconv.Itoa(os.Getpid()) + "-" + strings.ReplaceAll(tt.name, " ", "-")
			if tt.unjailed {
				// Without a jail, the command's /tmp is the host's.
				t.Cleanup(func() { os.Remove(filepath.Join("/tmp", marker+".up")) })
			}
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			r := repo("svc", remote)
			if tt.setup != nil {
				r.Setup = tt.setup(marker)
			}
			m := manifest(r)
			m.Execution.Command = tt.command(marker)
			m.TimeoutSeconds = tt.timeout
			wait := startRun(t, o, m)
			if tt.cancel {
				waitStatus(t, o.Workspace, "executing", func(st protocol.Status) bool { return st.Phase == protocol.PhaseExecuting })
				for deadline := time.Now().Add(20 * time.Second); len(processesWith(t, marker)) == 0; {
					if time.Now().After(deadline) {
						t.Fatal("the command did not start its background process")
					}
					time.Sleep(10 * time.Millisecond)
				}
				steer(t, o.Workspace, protocol.Steering{Action: protocol.ActionCancel})
			}
			res := wait()
			if res.Status != tt.phase || !strings.Contains(status(t, o.Workspace).Message, tt.message) {
				t.Fatalf("phase %s %q (%s), want %s %q", res.Status, status(t, o.Workspace).Message, res.Error, tt.phase, tt.message)
			}
			// The agent waits for its commands' processes to be gone
			// before it moves on; a short grace covers the kernel reaping
			// a killed group.
			deadline := time.Now().Add(5 * time.Second)
			for len(processesWith(t, marker)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if left := processesWith(t, marker); len(left) > 0 {
				t.Fatalf("processes outlived the command: %v", left)
			}
		})
	}
}

// lingering is shell text that starts a process meant to outlive the
// command (with prefix before it, such as setsid, and redirections after
// it) and waits until it runs. The process is a shell whose command line
// carries marker (its $0), so the test finds it on the host whatever PID
// namespace it ran in; it says it started in a file named after marker
// in /tmp, which the command's jail keeps private.
func lingering(marker, prefix, redirect string) string {
	return fmt.Sprintf(`%s sh -c 'touch "/tmp/$0.up"; sleep 1000; :' %s %s &
while [ ! -e /tmp/%s.up ]; do sleep 0.01; done;`, prefix, marker, redirect, marker)
}

// processesWith lists the host's live processes whose command line
// contains marker.
func processesWith(t *testing.T, marker string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || processGone(pid) {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(data, []byte(marker)) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	return out
}

// A jail killed from outside the sandbox (its host going down kills every
// process) is not the work failing: the agent stops without writing a
// verdict, so that the worker sees a lost sandbox and runs the work again.
func TestJailKilledFromOutsideLeavesNoVerdict(t *testing.T) {
	o := options(t)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	m := manifest(repo("svc", remote))
	marker := "fleetlift-jail-killed-" + strconv.Itoa(os.Getpid())
	m.Execution.Command = sh(`sh -c 'sleep 1000; :' ` + marker)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := agent.Run(ctx, o, m)
		done <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); len(processesWith(t, marker)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command never ran")
		}
	}
	jails := processesWith(t, "\x00--uid\x00")
	var killed int
	for _, j := range jails {
		if strings.Contains(j, o.Workspace) {
			pid, _ := strconv.Atoi(strings.SplitN(j, ":", 2)[0])
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	if killed == 0 {
		t.Fatalf("no jail of this workspace among %v", jails)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "killed from outside the sandbox") {
		t.Fatalf("Run: %v; want it to stop saying the jail was killed from outside", err)
	}
	// No status at all (the agent may stop before its first settled) is
	// no verdict either.
	if _, err := os.Stat(filepath.Join(o.Workspace, protocol.Dir, protocol.StatusFile)); err == nil {
		if st := status(t, o.Workspace); st.Phase.Terminal() {
			t.Fatalf("status %s %q: the agent wrote a verdict for a sandbox going away", st.Phase, st.Message)
		}
	}
	if _, err := os.Stat(filepath.Join(o.Workspace, protocol.Dir, protocol.ResultFile)); err == nil {
		var res protocol.Result
		readJSON(t, filepath.Join(o.Workspace, protocol.Dir, protocol.ResultFile), &res)
		if res.Status.Terminal() {
			t.Fatalf("result %s: the agent wrote a verdict for a sandbox going away", res.Status)
		}
	}
}

// A jail the kernel will not make fails the run with the jail's reason,
// before any command ran; a command that exits with the status the jail
// uses for that is only a command that failed.
func TestJailThatCannotBeMadeFailsTheRun(t *testing.T) {
	t.Run("the kernel refuses", func(t *testing.T) {
		o := options(t)
		// A jail entry point that fails as one does on a kernel that
		// refuses its mounts: it says why on the jail's report (the
		// jail package's tests make a real one fail).
		o.Isolation = &agent.Isolation{Self: []string{"/bin/sh", "-c",
			`echo "make mounts private: operation not permitted" >&3; exit 126`, "jail"}}
		remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
		m := manifest(repo("svc", remote))
		m.Execution.Command = sh(`echo changed >> README.md`)
		res := run(t, o, m)
		if res.Status != protocol.PhaseFailed || !strings.Contains(res.Error, "cannot isolate the work: make mounts private: operation not permitted") {
			t.Fatalf("phase %s %q; want failed, saying the work cannot be isolated and why", res.Status, res.Error)
		}
	})
	t.Run("the command exits 126", func(t *testing.T) {
		o := options(t)
		remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
		m := manifest(repo("svc", remote))
		m.Execution.Command = sh(`echo "fleetlift jail: not really" >&2; echo changed >> README.md; exit 126`)
		res := run(t, o, m)
		if strings.Contains(res.Error, "cannot isolate") {
			t.Fatalf("phase %s %q: a command's own exit status was taken for the jail's", res.Status, res.Error)
		}
		if r := repoResult(t, res, "svc"); r.Status != "failed" || !strings.Contains(r.Error, "126") {
			t.Fatalf("repository %s %q; want failed with the command's status 126", r.Status, r.Error)
		}
	})
}

// TestCommandStoppedWhenTheDiskRunsLow: the agent keeps
// Isolation.DiskReserve free on the workspace's disk; a command that
// leaves less (here: any, the reserve being more than the disk has) is
// stopped, and the task fails saying why (every command after it would
// meet the same disk).
func TestCommandStoppedWhenTheDiskRunsLow(t *testing.T) {
	o := options(t)
	var st syscall.Statfs_t
	if err := syscall.Statfs(o.Workspace, &st); err != nil {
		t.Fatal(err)
	}
	o.Isolation.DiskReserve = int64(st.Bavail*uint64(st.Bsize)) + 1<<40
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	m := manifest(repo("svc", remote))
	m.Execution.Command = sh(`sleep 60; echo changed >> README.md`)
	res := run(t, o, m)
	if res.Status != protocol.PhaseFailed || !strings.Contains(res.Error, "the disk holding the sandbox has") || !strings.Contains(res.Error, "--sandbox-disk-reserve") {
		t.Fatalf("phase %s %q; want failed, saying the disk ran low", res.Status, res.Error)
	}
}
