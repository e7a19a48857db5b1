package shim

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Exec is one command the shim runs.
type Exec struct {
	// Workspace, when set, is the directory Dir is confined to.
	Workspace string
	// Dir is where the command runs: relative to Workspace when that is
	// set, else as given ("" is the shim's own directory).
	Dir string
	// ClearEnv starts the command's environment from PATH and HOME alone
	// instead of the shim's whole environment.
	ClearEnv bool
	// Env are more NAME=VALUE variables, overriding the others.
	Env []string
	// Timeout kills the command's process group after this long; zero
	// means none.
	Timeout time.Duration
	// StdinFile is the command's standard input, removed once opened;
	// empty means none.
	StdinFile string
	// HangupOnEOF kills the command's process group when the shim's own
	// standard input ends: the exec stream that started the shim went
	// away.
	HangupOnEOF bool
	// Args is the command line.
	Args []string
}

// Run runs the command with stdout and stderr as its own and returns its
// exit code, or one of the Exit* codes; stdin is the shim's own (watched
// for HangupOnEOF).
func (e Exec) Run(stdin io.Reader, stdout, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "fleetlift-agent exec: "+format+"\n", args...)
		return code
	}
	if len(e.Args) == 0 {
		return fail(ExitShim, "no command")
	}
	dir, err := e.dir()
	if err != nil {
		return fail(ExitShim, "%v", err)
	}
	env := e.environ()
	path, err := lookPath(e.Args[0], env, dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return fail(ExitNotFound, "%s: command not found", e.Args[0])
		}
		return fail(ExitCannotRun, "%s: %v", e.Args[0], err)
	}
	cmd := &exec.Cmd{Path: path, Args: e.Args, Dir: dir, Env: env, Stdout: stdout, Stderr: stderr}
	if e.StdinFile != "" {
		f, err := os.Open(e.StdinFile)
		if err != nil {
			return fail(ExitShim, "standard input: %v", err)
		}
		defer f.Close()
		os.Remove(e.StdinFile)
		cmd.Stdin = f
	}
	setGroup(cmd)
	if err := cmd.Start(); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fail(ExitCannotRun, "%s: %v", e.Args[0], err)
		}
		return fail(ExitShim, "start %s: %v", e.Args[0], err)
	}

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	if e.Timeout > 0 {
		t := time.NewTimer(e.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	hangup := make(chan struct{})
	if e.HangupOnEOF && stdin != nil {
		go func() {
			io.Copy(io.Discard, stdin)
			close(hangup)
		}()
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(signals)

	select {
	case err := <-done:
		return exitCode(err, cmd)
	case <-timeout:
		killGroup(cmd)
		<-done
		return fail(ExitTimeout, "%s: killed after its timeout of %s", e.Args[0], e.Timeout)
	case <-hangup:
		killGroup(cmd)
		<-done
		return fail(ExitHangup, "%s: killed: the exec stream closed", e.Args[0])
	case sig := <-signals:
		killGroup(cmd)
		<-done
		return fail(128+int(sig.(syscall.Signal)), "%s: killed on %s", e.Args[0], sig)
	}
}

// dir resolves the directory the command runs in.
func (e Exec) dir() (string, error) {
	if e.Workspace == "" {
		return e.Dir, nil
	}
	root, err := os.OpenRoot(e.Workspace)
	if err != nil {
		return "", fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	rel, err := confine(e.Dir)
	if err != nil {
		return "", fmt.Errorf("working directory %w", err)
	}
	if rel != "." {
		sub, err := root.OpenRoot(rel)
		if err != nil {
			return "", fmt.Errorf("working directory %s: %w", e.Dir, err)
		}
		sub.Close()
	}
	return filepath.Join(e.Workspace, rel), nil
}

// environ is the command's environment.
func (e Exec) environ() []string {
	var env []string
	if e.ClearEnv {
		for _, k := range []string{"PATH", "HOME"} {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	} else {
		env = os.Environ()
	}
	for _, kv := range e.Env {
		k, _, _ := strings.Cut(kv, "=")
		env = setEnv(env, k, kv)
	}
	return env
}

func setEnv(env []string, k, kv string) []string {
	out := env[:0:0]
	for _, e := range env {
		if name, _, _ := strings.Cut(e, "="); name != k {
			out = append(out, e)
		}
	}
	return append(out, kv)
}

// lookPath finds name as exec.LookPath does, but in the PATH of env and
// relative to dir for names with a slash.
func lookPath(name string, env []string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		return p, executable(p)
	}
	var path string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if err := executable(p); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

func exitCode(err error, cmd *exec.Cmd) int {
	if err == nil {
		return 0
	}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		return 128 + int(st.Signal())
	}
	if cmd.ProcessState != nil {
		return cmd.ProcessState.ExitCode()
	}
	return ExitShim
}

// setGroup starts the command in a session of its own, which leads a
// process group of its own: it has no controlling terminal.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// killGroup kills the command's process group.
func killGroup(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// Idle waits for SIGTERM or SIGINT: the main process of a container that
// only serves exec.
func Idle() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	<-signals
}
