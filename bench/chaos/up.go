package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// upProc is one start of `fleetlift up`.
type upProc struct {
	n       int // the round's n-th start, from 1
	cmd     *exec.Cmd
	started time.Time
	stdout  string // its stdout and stderr files
	stderr  string
	done    chan struct{}
	// err is what Wait returned, once done is closed.
	err error
}

// stateEnv names the variable that carries the state directory in the
// environment of up and of everything it starts with its own environment
// (git, its spec evaluators), so that family finds them after up died.
const stateEnv = "BENCH_CHAOS_STATE_DIR"

// startUp starts `fleetlift up` on the fixture as a session leader (its
// own session and process group, as a service manager would start it),
// logging to files in the fixture's directory.
func startUp(bin, addr string, fx *fixture, n int) (*upProc, error) {
	u := &upProc{
		n:      n,
		stdout: filepath.Join(fx.dir, fmt.Sprintf("up-%d.out", n)),
		stderr: filepath.Join(fx.dir, fmt.Sprintf("up-%d.err", n)),
		done:   make(chan struct{}),
	}
	stdout, err := os.Create(u.stdout)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(u.stderr)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	u.cmd = exec.Command(filepath.Join(bin, "fleetlift"), "up",
		"--repo", fx.campaigns,
		"--state-dir", fx.state,
		"--allow-file-root", fx.targets,
		"--temporal-address", addr,
		// The kills find agents, jails and commands through this host's
		// /proc: local sandboxes, whatever engine the machine has.
		"--sandbox", "local",
	)
	u.cmd.Env = append(gitEnv(cleanEnv(os.Environ())), stateEnv+"="+fx.state)
	u.cmd.Stdout, u.cmd.Stderr = stdout, stderr
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	u.started = time.Now()
	if err := u.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fleetlift up: %w", err)
	}
	go func() {
		u.err = u.cmd.Wait()
		close(u.done)
	}()
	return u, nil
}

// cleanEnv drops fleetlift's own variables, so that the operator's
// environment does not change what the harness measures.
func cleanEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "FLEETLIFT_") {
			out = append(out, kv)
		}
	}
	return out
}

func (u *upProc) pid() int { return u.cmd.Process.Pid }

// exited reports whether the process has ended.
func (u *upProc) exited() bool {
	select {
	case <-u.done:
		return true
	default:
		return false
	}
}

// exitText says how the process ended.
func (u *upProc) exitText() string {
	var ee *exec.ExitError
	if errors.As(u.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if u.err != nil {
		return u.err.Error()
	}
	return "exit status 0"
}

// announced reports whether up printed that its reconciler runs.
func (u *upProc) announced() bool {
	b, _ := os.ReadFile(u.stdout)
	return bytes.Contains(b, []byte("reconciling "))
}

// lastError is the last line of stderr that reads as an error, to say why
// a start failed.
func (u *upProc) lastError() string {
	b, _ := os.ReadFile(u.stderr)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if strings.HasPrefix(l, "fleetlift:") || strings.Contains(l, "level=ERROR") {
			return ends(l, 120, 240)
		}
	}
	if len(lines) > 0 {
		return ends(lines[len(lines)-1], 120, 240)
	}
	return ""
}

// serverLogError is the last error the embedded server logged in
// <state-dir>/temporal.log (it logs errors only), shortened; "" when none.
func serverLogError(stateDir string) string {
	b, _ := os.ReadFile(filepath.Join(stateDir, "temporal.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "ERROR") || strings.Contains(lines[i], "error") {
			return ends(lines[i], 120, 240)
		}
	}
	return ""
}

// ends shortens a long line to its first head and last tail bytes: an
// error chain's innermost cause is at its end.
func ends(s string, head, tail int) string {
	if len(s) <= head+tail+5 {
		return s
	}
	return s[:head] + " […] " + s[len(s)-tail:]
}

// waitServing waits until up serves (see observer.serving) and returns an
// observer connected to it, or says why it does not serve: it exited, or
// it did not serve within timeout.
func (u *upProc) waitServing(ctx context.Context, addr, stateDir string, timeout time.Duration) (*observer, error) {
	deadline := time.Now().Add(timeout)
	var obs *observer
	last := errors.New("it has not said it is reconciling")
	defer func() {
		if obs != nil && last != nil {
			obs.Close()
		}
	}()
	for {
		if u.exited() {
			return nil, fmt.Errorf("up exited (%s): %s", u.exitText(), u.lastError())
		}
		if u.announced() {
			if obs == nil {
				obs, last = dial(ctx, addr, stateDir)
			}
			if obs != nil {
				if last = obs.serving(ctx); last == nil {
					return obs, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("up did not serve within %s: %v (its log: %s)", timeout, last, u.lastError())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-u.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop asks up to stop (SIGTERM, as Ctrl-C does) and waits up to grace.
func (u *upProc) stop(grace time.Duration) {
	if u.exited() {
		return
	}
	_ = syscall.Kill(u.pid(), syscall.SIGTERM)
	select {
	case <-u.done:
	case <-time.After(grace):
	}
}

// passFailures counts the reconcile passes up logged as failed, and
// returns the last such line.
func (u *upProc) passFailures() (int, string) {
	b, _ := os.ReadFile(u.stderr)
	n, last := 0, ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "reconcile pass failed") || strings.Contains(l, "msg=\"apply failed\"") {
			n++
			last = l
		}
	}
	return n, last
}

// oneLine shortens s to its first line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > n {
		s = s[:n-3] + "..."
	}
	return s
}
