package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Exec runs cmd in the sandbox and waits for it: in the workspace, or in
// cmd.WorkingDir inside it (refused if it leaves the workspace), with the
// sandbox's environment plus cmd.Env (which may not set HOME), in a process
// group of its own. A bare command name is looked up in the sandbox's PATH.
//
// A non-zero exit is no error: ExecResult.ExitCode says it, 128+n for a
// command killed by signal n. When cmd.Timeout elapses or ctx ends the whole
// process group is killed, and Exec returns the output so far with an error
// wrapping context.DeadlineExceeded (timeout) or ctx.Err(). Processes the
// command leaves in the background keep running until Cleanup. Exec refuses
// a sandbox whose agent is no longer running, as a container's would.
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
	// Held until the process has started, so that a concurrent Cleanup
	// either sees the process or makes Exec fail with ErrNotFound.
	runlock := p.rlock(id)
	started := false
	defer func() {
		if !started {
			runlock()
		}
	}()
	b, rec, err := p.find(id)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", name, err)
	}
	if st, alive := p.status(b, rec); !alive {
		return fail(fmt.Errorf("sandbox is %s, not running: %s", st.Phase, st.Message))
	}
	dir, err := execDir(b.workspace, cmd.WorkingDir)
	if err != nil {
		return fail(err)
	}
	env := make(map[string]string, len(rec.Env)+len(cmd.Env))
	for k, v := range rec.Env {
		env[k] = v
	}
	for k, v := range cmd.Env {
		env[k] = v
	}
	bin, err := lookPath(name, env["PATH"])
	if err != nil {
		return fail(err)
	}

	// Output goes to files, not pipes, so that Exec returns when the
	// command does even if something it started in the background still
	// holds its stdout.
	// The directory is made by the first Exec: most sandboxes have none.
	execDir := filepath.Join(b.dir, execDirName)
	if err := os.Mkdir(execDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fail(err)
	}
	stdout, err := os.CreateTemp(execDir, "out-*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(stdout.Name())
	defer stdout.Close()
	stderr, err := os.CreateTemp(execDir, "err-*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(stderr.Name())
	defer stderr.Close()

	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if cmd.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, cmd.Timeout)
	}
	defer cancel()
	c := exec.CommandContext(runCtx, bin, cmd.Command[1:]...)
	c.Args[0] = name
	c.Dir = dir
	c.Env = envList(env)
	c.Stdin = cmd.Stdin
	c.Stdout = stdout
	c.Stderr = stderr
	// A session of its own (and so a process group): no controlling
	// terminal.
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	c.Cancel = func() error {
		err := syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	// Bounds the wait for the Stdin copy when the command exits without
	// reading it all.
	c.WaitDelay = pipeDelay
	// What it starts may outlive it, out of the agent's reach: Cleanup
	// looks for it.
	b.execd.Store(true)
	err = c.Start()
	started = true
	runlock()
	if err != nil {
		return fail(err)
	}
	waitErr := c.Wait()

	res := &sandbox.ExecResult{ExitCode: -1}
	if c.ProcessState != nil {
		res.ExitCode, _ = exitOf(c.ProcessState, waitErr)
	}
	out, err := os.ReadFile(stdout.Name())
	if err != nil {
		return fail(fmt.Errorf("read stdout: %w", err))
	}
	errOut, err := os.ReadFile(stderr.Name())
	if err != nil {
		return fail(fmt.Errorf("read stderr: %w", err))
	}
	res.Stdout, res.Stderr = string(out), string(errOut)

	var exitErr *exec.ExitError
	switch {
	case waitErr == nil, errors.Is(waitErr, exec.ErrWaitDelay):
		return res, nil
	case ctx.Err() != nil:
		return res, fmt.Errorf("exec %s in sandbox %s: %w", name, id, ctx.Err())
	case runCtx.Err() != nil:
		return res, fmt.Errorf("exec %s in sandbox %s: killed after timeout %s: %w", name, id, cmd.Timeout, context.DeadlineExceeded)
	case errors.As(waitErr, &exitErr):
		return res, nil
	default:
		return res, fmt.Errorf("exec %s in sandbox %s: %w", name, id, waitErr)
	}
}

// execDir resolves an Exec working directory inside the workspace, refusing
// one that leaves it by ".." or a symbolic link.
func execDir(workspace, dir string) (string, error) {
	rel, err := workspacePath(dir)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	if rel == "." {
		return workspace, nil
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("%s is not a directory", dir)
	}
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	return filepath.Join(workspace, rel), nil
}

// lookPath finds an executable as a shell would with PATH=path. A name with
// a slash is returned as it is (relative to the working directory); PATH
// entries that are not absolute are skipped.
func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		candidate := filepath.Join(dir, name)
		if fi, err := os.Stat(candidate); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("%s: %w in PATH %s", name, exec.ErrNotFound, path)
}
