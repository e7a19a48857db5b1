package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

const (
	// pipeDelay bounds how long the output of a finished command is
	// drained when a process it started in the background still holds it.
	pipeDelay = time.Second
	// killWait bounds the wait for a killed command's end.
	killWait = 5 * time.Second
	// execPoll is how often a running command's state is asked, to notice
	// its end when its output stays open.
	execPoll = 250 * time.Millisecond
)

// Exec runs cmd in the sandbox through the engine's exec API and waits for
// it: in the workspace or cmd.WorkingDir inside it (refused if it leaves
// it), as uid 1000 with gid ExecGID and no capability, with the image's
// variables, PATH, HOME, ProvisionOptions.Env and cmd.Env, never the
// sandbox's Secrets. A bare command name is looked up in PATH.
//
// A non-zero exit is no error: ExecResult.ExitCode says it, 128+n for a
// command killed by signal n. The engine does not stop a command whose
// caller goes away, so when cmd.Timeout elapses or ctx ends Exec kills the
// command's process group itself (the command leads one: it is started by
// "sh -c 'echo $$; exec ...'", which reports its process id first) and
// returns the output so far with an error wrapping
// context.DeadlineExceeded (timeout) or ctx.Err(). Processes the command
// leaves in the background keep running until Cleanup. Exec refuses a
// sandbox whose agent is no longer running.
func (p *Provider) Exec(ctx context.Context, id string, cmd sandbox.ExecCommand) (*sandbox.ExecResult, error) {
	if len(cmd.Command) == 0 || cmd.Command[0] == "" {
		return nil, fmt.Errorf("exec in sandbox %s: empty command", id)
	}
	name := cmd.Command[0]
	fail := func(err error) (*sandbox.ExecResult, error) {
		return nil, fmt.Errorf("exec %s in sandbox %s: %w", name, id, err)
	}
	if err := checkEnv(cmd.Env); err != nil {
		return fail(err)
	}
	c, err := p.find(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", name, err)
	}
	if c.State == nil || !c.State.Running {
		st := p.status(c)
		return fail(fmt.Errorf("sandbox is %s, not running: %s", st.Phase, st.Message))
	}
	rel, err := workspacePath(cmd.WorkingDir)
	if err != nil {
		return fail(fmt.Errorf("working directory: %w", err))
	}
	_, missing, err := p.walk(ctx, c.ID, rel)
	if err == nil && len(missing) > 0 {
		err = fmt.Errorf("no directory %s", cmd.WorkingDir)
	}
	if err != nil {
		return fail(fmt.Errorf("working directory: %w", err))
	}

	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if cmd.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, cmd.Timeout)
	}
	defer cancel()
	res, err := p.run(runCtx, c, absolute(rel), cmd.Env, cmd.Command, cmd.Stdin)
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return res, fmt.Errorf("exec %s in sandbox %s: %w", name, id, ctx.Err())
	case runCtx.Err() != nil:
		return res, fmt.Errorf("exec %s in sandbox %s: killed after timeout %s: %w", name, id, cmd.Timeout, context.DeadlineExceeded)
	default:
		return res, fmt.Errorf("exec %s in sandbox %s: %w", name, id, err)
	}
}

// execEnv is the environment of commands run in container c: the
// container's (the image's variables and ProvisionOptions.Env) without the
// secrets and the engine's HOSTNAME, plus extra. Names without "=" unset
// what the engine would otherwise pass on.
func execEnv(c container.InspectResponse, extra map[string]string) []string {
	unset := map[string]bool{"HOSTNAME": true}
	for _, n := range strings.Split(labelsOf(c)[LabelSecretNames], ",") {
		if n != "" {
			unset[n] = true
		}
	}
	var env []string
	for n := range unset {
		if _, ok := extra[n]; !ok {
			env = append(env, n)
		}
	}
	slices.Sort(env)
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// run runs argv in container c as uid 1000 with gid ExecGID in dir, and
// kills its process group when ctx ends. The returned error is ctx's when
// it ended the command.
func (p *Provider) run(ctx context.Context, c container.InspectResponse, dir string, env map[string]string, argv []string, stdin io.Reader) (*sandbox.ExecResult, error) {
	// dash and others export PWD; the command gets only what was asked.
	script := `echo $$; unset PWD; exec "$@"`
	if _, ok := env["PWD"]; ok {
		script = `echo $$; exec "$@"`
	}
	created, err := p.cli.ExecCreate(ctx, c.ID, client.ExecCreateOptions{
		User:         fmt.Sprintf("%d:%d", UID, ExecGID),
		AttachStdin:  stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Env:          execEnv(c, env),
		WorkingDir:   dir,
		Cmd:          append([]string{"sh", "-c", script, "sh"}, argv...),
	})
	if err != nil {
		return nil, fmt.Errorf("create exec: %w", err)
	}
	attached, err := p.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start exec: %w", err)
	}
	defer attached.Close()

	if stdin != nil {
		go func() {
			_, _ = io.Copy(attached.Conn, stdin)
			_ = attached.CloseWrite()
		}()
	}
	var stdout, stderr bytes.Buffer
	pid := &pidWriter{w: &stdout, ready: make(chan struct{})}
	streamed := make(chan error, 1)
	go func() {
		_, err := demux(pid, &lockedWriter{w: &stderr, mu: &pid.mu}, attached.Reader)
		streamed <- err
	}()

	// bg outlives ctx: it asks about and kills the command after ctx ends.
	bg, cancelBG := context.WithTimeout(context.WithoutCancel(ctx), killWait+pipeDelay+30*time.Second)
	defer cancelBG()
	tick := time.NewTicker(execPoll)
	defer tick.Stop()
	var drain <-chan time.Time
	var ended error
wait:
	for {
		select {
		case <-streamed:
			break wait
		case <-drain:
			// Finished, but something in the background holds its output.
			attached.Close()
			<-streamed
			break wait
		case <-tick.C:
			if drain != nil {
				continue
			}
			if ins, err := p.cli.ExecInspect(bg, created.ID, client.ExecInspectOptions{}); err == nil && !ins.Running {
				drain = time.After(pipeDelay)
			}
		case <-ctx.Done():
			ended = ctx.Err()
			p.kill(bg, c, pid)
			select {
			case <-streamed:
			case <-time.After(killWait):
				attached.Close()
				<-streamed
			}
			break wait
		}
	}

	res := &sandbox.ExecResult{ExitCode: -1}
	deadline := time.Now().Add(killWait)
	for {
		ins, err := p.cli.ExecInspect(bg, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return nil, fmt.Errorf("inspect exec: %w", err)
		}
		if !ins.Running {
			res.ExitCode = ins.ExitCode
			break
		}
		if time.Now().After(deadline) {
			if ended == nil {
				ended = errors.New("command still running after its output ended")
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid.mu.Lock()
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	pid.mu.Unlock()
	return res, ended
}

// kill kills the process group of the command whose process id pw
// reports.
func (p *Provider) kill(ctx context.Context, c container.InspectResponse, pw *pidWriter) {
	select {
	case <-pw.ready:
	case <-time.After(killWait):
		return
	}
	if pw.pid <= 1 {
		return
	}
	n := strconv.Itoa(pw.pid)
	_, _ = p.run(ctx, c, Workspace, nil, []string{"sh", "-c", `kill -9 -"$1" 2>/dev/null || kill -9 "$1"`, "sh", n}, nil)
}

// pidWriter takes the first line of a command's standard output, the
// process id its starter printed, and passes the rest on.
type pidWriter struct {
	mu    sync.Mutex
	w     io.Writer
	line  []byte
	pid   int
	ready chan struct{}
	done  bool
}

func (pw *pidWriter) Write(b []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	n := len(b)
	if !pw.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			pw.line = append(pw.line, b...)
			return n, nil
		}
		pw.line = append(pw.line, b[:i]...)
		pw.pid, _ = strconv.Atoi(string(pw.line))
		pw.done = true
		close(pw.ready)
		b = b[i+1:]
	}
	if _, err := pw.w.Write(b); err != nil {
		return 0, err
	}
	return n, nil
}

// lockedWriter writes under mu, shared with the pidWriter so that the
// result is read after both streams are written.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
