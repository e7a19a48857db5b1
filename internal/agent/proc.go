package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/fleetlift/fleetlift/internal/jail"
)

// command is a process to run.
type command struct {
	argv []string
	dir  string
	env  []string
	// stdin, when set, is the standard input.
	stdin *os.File
	// stdout and stderr receive the output; nil discards it.
	stdout, stderr io.Writer
	// jail, when set, is where the command runs (Options.Isolation).
	jail *jail.Jail
	// disk, when set, stops the command when its disk runs low.
	disk *diskGuard
}

// errJailKilled is a jailed command whose jail was killed from outside the
// sandbox: the sandbox is being torn down (its host killed, say), and the
// agent stops without a verdict, so that the worker runs the work again
// rather than count the work failed.
var errJailKilled = errors.New("the jail of a command was killed from outside the sandbox")

// isolationError is a jailed command whose jail could not be made (the
// kernel refused a namespace or a mount): the command did not run, and no
// other would run isolated either, so the run fails with the jail's
// reason. The agent learns it from the first jailed command rather than
// from a probe of its own, which cost two more processes per sandbox.
type isolationError struct{ reason string }

func (e *isolationError) Error() string { return "cannot isolate the work: " + e.reason }

// stopsRun reports whether err, from running a command, ends the whole
// run rather than the one command.
func stopsRun(err error) bool {
	var iso *isolationError
	var disk *diskLowError
	return errors.Is(err, errJailKilled) || errors.As(err, &iso) || errors.As(err, &disk)
}

// pipeGrace is how long output is still read after the process group is
// gone; something that escaped the group cannot hold run open longer.
const pipeGrace = 2 * time.Second

// run runs c in a new process group (in its jail, when it has one) and
// returns its exit status. When the command exits, and when ctx ends, the
// whole group is killed, so nothing it started in the background survives
// it; in a jail, the kernel also ends every process the command started,
// whatever group or session it moved to. The error is set when the command
// could not start or ctx ended (then it is context.Cause(ctx)).
func (c command) run(ctx context.Context) (int, error) {
	if len(c.argv) == 0 || c.argv[0] == "" {
		return -1, errors.New("empty command")
	}
	if err := ctx.Err(); err != nil {
		return -1, context.Cause(ctx)
	}
	// proc starts and waits: the jail's Cmd, which also learns whether
	// the jail could be made, or the plain command.
	var cmd *exec.Cmd
	var jailed *jail.Cmd
	var proc interface {
		Start() error
		Wait() error
	}
	if c.jail != nil {
		var err error
		if jailed, err = c.jail.Command(c.argv); err != nil {
			return -1, fmt.Errorf("start %s: %w", c.argv[0], err)
		}
		cmd, proc = jailed.Cmd, jailed
	} else {
		cmd = exec.Command(c.argv[0], c.argv[1:]...)
		newProcessGroup(cmd)
		proc = cmd
	}
	cmd.Dir = c.dir
	cmd.Env = c.env
	if c.stdin != nil {
		cmd.Stdin = c.stdin
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return -1, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = proc.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return -1, fmt.Errorf("start %s: %w", c.argv[0], err)
	}
	pid := cmd.Process.Pid

	var copies sync.WaitGroup
	drain := func(w io.Writer, r *os.File) {
		defer copies.Done()
		if w == nil {
			w = io.Discard
		}
		io.Copy(w, r)
	}
	copies.Add(2)
	go drain(c.stdout, outR)
	go drain(c.stderr, errR)

	exited := make(chan struct{})
	var diskLow error
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var tick <-chan time.Time
		if c.disk != nil {
			t := time.NewTicker(diskCheckEvery)
			defer t.Stop()
			tick = t.C
			if diskLow = c.disk.low(); diskLow != nil {
				killGroup(pid)
				return
			}
		}
		for {
			select {
			case <-ctx.Done():
				killGroup(pid)
				return
			case <-exited:
				return
			case <-tick:
				if diskLow = c.disk.low(); diskLow != nil {
					killGroup(pid)
					return
				}
			}
		}
	}()
	waitErr := proc.Wait()
	close(exited)
	<-watched
	killGroup(pid)

	drained := make(chan struct{})
	go func() { copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(pipeGrace):
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()

	if ctx.Err() != nil {
		return -1, context.Cause(ctx)
	}
	if diskLow != nil {
		return -1, diskLow
	}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		return 0, nil
	case c.jail != nil && errors.As(waitErr, &ee):
		if r := jailed.MemoryReserve(); r > 0 {
			// The jail stopped the command before the kernel would
			// have killed in the container, maybe the agent.
			if c.stderr != nil {
				fmt.Fprintf(c.stderr, "\nfleetlift: the command ran out of memory: it came within %d MiB of the sandbox's memory limit of %d MiB, which the agent keeps for itself, and was stopped\n", r>>20, jailed.MemoryLimit()>>20)
			}
			return 128 + int(syscall.SIGKILL), nil
		}
		// The jail reports its command's end as an exit status; the jail
		// itself killed by a signal the agent did not send was killed
		// from outside the sandbox (nothing inside can signal it).
		if sig, ok := signaled(waitErr); ok {
			return -1, fmt.Errorf("%w (%s)", errJailKilled, sig)
		}
		if err := jailed.SetupError(); err != nil {
			return -1, &isolationError{reason: err.Error()}
		}
		if jailed.OutOfMemory() && c.stderr != nil {
			why := "the kernel killed it for memory"
			if l := jailed.MemoryLimit(); l > 0 {
				why = fmt.Sprintf("the sandbox reached its memory limit of %d MiB, and the kernel killed it", l>>20)
			}
			fmt.Fprintf(c.stderr, "\nfleetlift: the command ran out of memory: %s\n", why)
		}
		return ee.ExitCode(), nil
	case errors.As(waitErr, &ee):
		return ee.ExitCode(), nil
	default:
		return -1, waitErr
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// head keeps the first max bytes written to it.
type head struct {
	max       int
	buf       []byte
	truncated bool
}

func (h *head) Write(p []byte) (int, error) {
	if room := h.max - len(h.buf); room > 0 {
		if len(p) > room {
			h.buf = append(h.buf, p[:room]...)
			h.truncated = true
		} else {
			h.buf = append(h.buf, p...)
		}
	} else if len(p) > 0 {
		h.truncated = true
	}
	return len(p), nil
}
