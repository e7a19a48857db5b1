package local

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// Agents that serve more than one sandbox (Options.ReuseAgents).
//
// A sandbox's agent is a process of its own, started for it. Started
// with a control socket (fleetlift-agent serve --next-fd), an agent that
// has written its sandbox's terminal phase says it is idle there, and
// waits. Cleanup of that sandbox then removes the sandbox but keeps the
// agent, and the next Provision whose agent would run with the same
// environment (its secrets included; HOME aside) hands it the new
// sandbox (protocol.Next) instead of starting another.
//
// What the work of one sandbox could leave for the next is what the jail
// leaves it: its workspace and HOME, both removed with the sandbox, and
// no process (each command's jail ends with it, before the agent says it
// is idle). A sandbox in which Exec started a process does not hand its
// agent on, nor does one whose agent did not say it is idle within
// idleWait of the Cleanup, was killed, or timed out.

// agentIdleFor is how long an idle agent waits for a sandbox before it
// is told to exit. The sandboxes of a run of units follow one another
// within milliseconds, and the runs of a campaign within about a second.
const agentIdleFor = 5 * time.Second

// maxStatusBytes bounds the read of a status.json (the agent's are a few
// hundred bytes).
const maxStatusBytes = 1 << 20

// idleWait is how long Cleanup waits for the agent of a finished sandbox
// to say it is idle: it says so as soon as its terminal phase is
// written, which Cleanup usually comes after.
const idleWait = 2 * time.Second

// agentProc is an agent process this Provider started.
type agentProc struct {
	pid        int
	startTicks uint64
	// done is closed once the agent is reaped; exited, read after it,
	// says it exited by itself, not killed by a signal.
	done   chan struct{}
	exited bool
	// ctl is this end of the agent's control socket, nil for an agent
	// that serves one sandbox; idle has a value once the agent said it
	// is idle since it was last handed a sandbox.
	ctl  *os.File
	idle chan struct{}
	// key is what the next sandbox's agent environment must be for this
	// one to serve it (agentKey).
	key string

	mu sync.Mutex
	// owner is the sandbox it serves, whose record its exit goes to; nil
	// while idle.
	owner *box
	// finished is the sandbox it last said it finished (idle).
	finished *box
}

// finishedWith reports whether the agent said it is idle since it was
// handed b, and serves b still: b's work is over.
func (a *agentProc) finishedWith(b *box) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.owner == b && a.finished == b
}

// serving is the sandbox the agent serves, nil while it is idle.
func (a *agentProc) serving() *box {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.owner
}

func (a *agentProc) setOwner(b *box) {
	a.mu.Lock()
	a.owner = b
	a.mu.Unlock()
}

// close closes the control socket: an idle agent exits.
func (a *agentProc) close() {
	if a.ctl != nil {
		_ = a.ctl.Close()
	}
}

// listen reads what the agent says on its control socket until it
// closes.
func (a *agentProc) listen() {
	sc := bufio.NewScanner(a.ctl)
	for sc.Scan() {
		if sc.Text() == protocol.Idle {
			a.mu.Lock()
			a.finished = a.owner
			a.mu.Unlock()
			select {
			case a.idle <- struct{}{}:
			default:
			}
		}
	}
}

// agentKey is what tells agents that may serve each other's sandboxes
// apart: their environment, but for HOME, which each sandbox has its own
// of.
func agentKey(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		if k != "HOME" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		// Neither a name nor a value holds a NUL (checkEnv).
		sb.WriteString(k)
		sb.WriteByte(0)
		sb.WriteString(env[k])
		sb.WriteByte(0)
	}
	return sb.String()
}

// takeIdle takes the idle agent with key that waited least, nil when
// there is none.
func (p *Provider) takeIdle(key string) *agentProc {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		a := p.idle[i]
		if a.key != key {
			continue
		}
		p.idle = slices.Delete(p.idle, i, i+1)
		select {
		case <-a.done:
			continue // exited meanwhile
		default:
		}
		return a
	}
	return nil
}

// handTo hands sandbox b, whose record is rec (without its agent yet),
// to idle agent a, and writes the record. It reports whether a took the
// sandbox: if not, a has been told to exit; if so, and the record could
// not be written, a has been killed and the error says why.
func (p *Provider) handTo(a *agentProc, b *box, rec *record, lease string) (bool, error) {
	n := protocol.Next{Workspace: b.workspace, Home: b.home, Lease: lease}
	if p.stdout == nil {
		n.Log = filepath.Join(b.dir, agentLogFile)
	}
	line, err := json.Marshal(n)
	if err != nil {
		a.close()
		return false, err
	}
	// An idle said before the one Cleanup took (none is expected) says
	// nothing of the sandbox handed now.
	select {
	case <-a.idle:
	default:
	}
	a.setOwner(b)
	if _, err := a.ctl.Write(append(line, '\n')); err != nil {
		a.setOwner(nil)
		a.close()
		return false, fmt.Errorf("hand sandbox to agent %d: %w", a.pid, err)
	}
	rec.PID, rec.StartTicks = a.pid, a.startTicks
	if err := writeRecord(b.dir, rec); err != nil {
		a.setOwner(nil)
		_ = syscall.Kill(-a.pid, syscall.SIGKILL)
		return true, fmt.Errorf("record agent: %w", err)
	}
	b.pid, b.startTicks, b.proc = a.pid, a.startTicks, a
	return true, nil
}

// keepAgent waits for b's agent to say it is idle, and reports whether
// it did: then the agent serves b no more, and Cleanup keeps it for
// another sandbox (park) once b is removed. An agent that does not, or
// may have left something in b, is stopped with b.
func (p *Provider) keepAgent(ctx context.Context, b *box) bool {
	a := b.proc
	if !p.reuse || a == nil || a.ctl == nil || b.execd.Load() || a.serving() != b || !finished(b) {
		return false
	}
	t := time.NewTimer(idleWait)
	defer t.Stop()
	select {
	case <-a.idle:
	case <-a.done:
		return false
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
	a.setOwner(nil)
	return true
}

// finished reports whether b's agent wrote a terminal phase: only then
// is it about to say it is idle (a cancelled sandbox's agent is stopped
// without a wait).
func finished(b *box) bool {
	f, err := openRegular(b.workspace, protocol.Dir+"/"+protocol.StatusFile)
	if err != nil {
		return false
	}
	defer f.Close()
	var st protocol.Status
	return json.NewDecoder(io.LimitReader(f, maxStatusBytes)).Decode(&st) == nil && st.Phase.Terminal()
}

// park keeps idle agent a for the next sandbox with its key, for
// agentIdleFor at most.
func (p *Provider) park(a *agentProc) {
	p.mu.Lock()
	p.idle = append(p.idle, a)
	p.mu.Unlock()
	time.AfterFunc(agentIdleFor, func() {
		p.mu.Lock()
		i := slices.Index(p.idle, a)
		if i >= 0 {
			p.idle = slices.Delete(p.idle, i, i+1)
		}
		p.mu.Unlock()
		if i >= 0 {
			a.close()
		}
	})
}

// closeIdle tells every idle agent to exit, and returns once each is
// reaped (killed, if it takes longer than killWait): a worker that exits
// next leaves none behind, and its own resource usage counts theirs.
func (p *Provider) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, a := range idle {
		a.close()
	}
	deadline := time.Now().Add(killWait)
	for _, a := range idle {
		if waitDone(a.done, time.Until(deadline)) {
			continue
		}
		_ = syscall.Kill(-a.pid, syscall.SIGKILL)
		waitDone(a.done, killWait)
	}
}

// waitDone reports whether done closed within d.
func waitDone(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
