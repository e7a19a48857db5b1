package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

// stopGrace keeps tests quick; every stand-in agent dies on SIGTERM.
const stopGrace = 2 * time.Second

func standInAgent(t *testing.T) []string {
	t.Helper()
	script, err := filepath.Abs("testdata/agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	return []string{"/bin/sh", script}
}

func newProvider(t *testing.T, root string, agent []string) *Provider {
	t.Helper()
	p, err := New(Options{Root: root, AgentCommand: agent, StopGrace: stopGrace})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func TestConformance(t *testing.T) {
	for _, ends := range []bool{false, true} {
		// With the agent said to end what it runs, Cleanup still stops
		// what Exec started and what an agent it had to kill left.
		t.Run(map[bool]string{false: "agent", true: "agent that ends its commands"}[ends], func(t *testing.T) {
			conformance(t, ends)
		})
	}
}

func conformance(t *testing.T, ends bool) {
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			p, err := New(Options{Root: t.TempDir(), AgentCommand: standInAgent(t), StopGrace: stopGrace, CommandsEndWithAgent: ends})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		Options: func(t *testing.T, id string) sandbox.ProvisionOptions {
			return sandbox.ProvisionOptions{ID: id, Env: map[string]string{"LANG": "C.UTF-8"}}
		},
		Agents: func(t *testing.T, sb *sandbox.Sandbox) int {
			return len(agentPIDs(t, sb.WorkingDir))
		},
	})
}

// The work the real agent runs in local sandboxes, as fleetlift's workers
// start it (jailed), cannot act against the control plane.
func TestUntrustedWork(t *testing.T) {
	// The sandboxes' root stands for the worker's state directory, which
	// the worker hides; a comma is as good as any other character in its
	// path.
	root := filepath.Join(t.TempDir(), "state,dir")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	newProvider := func(t *testing.T, egress http.Handler, gw *gateway.Gateway) sandbox.Provider {
		p, err := New(Options{Root: root, AgentCommand: []string{os.Args[0], "agent"}, StopGrace: stopGrace, Gateway: gw,
			// The bounds a worker gives by default (--sandbox-processes,
			// --sandbox-tmp-size), the memory one lower.
			ServeArgs: []string{"--hide", root, "--manifest-poll", "20ms", "--steering-poll", "50ms",
				"--max-processes", "4096", "--max-memory", "1073741824", "--tmp-size", "1073741824"}, Egress: egress})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	sandboxtest.RunUntrusted(t, sandboxtest.UntrustedHarness{
		Hidden:        root,
		New:           func(t *testing.T) sandbox.Provider { return newProvider(t, nil, nil) },
		NewWithEgress: func(t *testing.T, h http.Handler) sandbox.Provider { return newProvider(t, h, nil) },
		NewWithGateway: func(t *testing.T, gw *gateway.Gateway) sandbox.Provider {
			return newProvider(t, nil, gw)
		},
		ModelCLI: []string{os.Args[0], "model-cli"},
		Options: func(t *testing.T, id string) sandbox.ProvisionOptions {
			return sandbox.ProvisionOptions{ID: id, Env: map[string]string{
				"FLEETLIFT_ALLOW_FILE_ROOTS": os.TempDir(),
				"GIT_CONFIG_GLOBAL":          "/dev/null",
			}}
		},
		Repository: func(t *testing.T) (string, func(branch, path string) string) {
			bare := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			return "file://" + bare, gittest.Show(bare)
		},
	})
}

// agentPIDs lists the agents started for workspace: the processes whose
// arguments end in "--workspace <workspace>", not counting children of such
// a process that have not yet exec'd something else.
func agentPIDs(t *testing.T, workspace string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("\x00--workspace\x00" + workspace + "\x00")
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.HasSuffix(cmdline, want) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		parent[pid], _ = strconv.Atoi(fields[1])
	}
	var pids []int
	for pid, ppid := range parent {
		if _, forked := parent[ppid]; !forked {
			pids = append(pids, pid)
		}
	}
	return pids
}

func oneAgent(t *testing.T, workspace string) int {
	t.Helper()
	// /proc is read while the agent may be starting, or its shell forking,
	// on a machine busy with other tests: look again for a while.
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if pids = agentPIDs(t, workspace); len(pids) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(pids) != 1 {
		t.Fatalf("agents for %s: %v; want one", workspace, pids)
	}
	return pids[0]
}

// The agent gets its secrets in its environment, and they are written
// nowhere: not into sandbox.json, not anywhere under Root.
func TestSecretsAreNeverWrittenDown(t *testing.T) {
	root := t.TempDir()
	p := newProvider(t, root, standInAgent(t))
	ctx := t.Context()
	const secret = "fleetlift-token-never-on-disk"
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "secrets", Env: map[string]string{"LANG": "C.UTF-8"}, Secrets: map[string]string{"FLEETLIFT_FORGE_TOKEN": secret}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(context.Background(), sb.ID) })
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(oneAgent(t, sb.WorkingDir)) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(environ, []byte("FLEETLIFT_FORGE_TOKEN="+secret+"\x00")) {
		t.Errorf("the agent did not get its secret: %q", environ)
	}
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if data, _ := os.ReadFile(path); bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds the secret", path)
			}
		}
		return nil
	})
}

// A provider with AgentGOMAXPROCS starts the agent with that GOMAXPROCS
// and hands it the sandbox's own in protocol.EnvCommandGOMAXPROCS (empty
// when the sandbox has none); the sandbox's record and what Exec runs
// keep the sandbox's.
func TestAgentStartsWithItsOwnGOMAXPROCS(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	p, err := New(Options{Root: root, AgentCommand: standInAgent(t), Path: "/usr/bin:/bin", StopGrace: stopGrace, AgentGOMAXPROCS: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		env  map[string]string
		kept string
	}{
		{"procs-set", map[string]string{"GOMAXPROCS": "3"}, "3"},
		{"procs-unset", nil, ""},
	} {
		sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: tc.id, Env: tc.env})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Cleanup(context.Background(), tc.id)
		environ, err := os.ReadFile("/proc/" + strconv.Itoa(oneAgent(t, sb.WorkingDir)) + "/environ")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
		for _, want := range []string{"GOMAXPROCS=1", protocol.EnvCommandGOMAXPROCS + "=" + tc.kept} {
			if !slices.Contains(got, want) {
				t.Errorf("%s: agent environment %q lacks %s", tc.id, got, want)
			}
		}
		res, err := p.Exec(ctx, tc.id, sandbox.ExecCommand{Command: []string{"sh", "-c", "echo \"$GOMAXPROCS/${FLEETLIFT_COMMAND_GOMAXPROCS-none}\""}})
		if err != nil {
			t.Fatal(err)
		}
		if want := tc.kept + "/none\n"; res.Stdout != want {
			t.Errorf("%s: Exec ran with GOMAXPROCS/its keeper %q, want %q", tc.id, res.Stdout, want)
		}
	}
}

// The agent and what Exec runs each lead a session of their own: under
// an operator's terminal, neither has it as its controlling terminal, and
// the agent reads nothing from the worker's standard input.
func TestAgentAndExecLeadSessionsOfTheirOwn(t *testing.T) {
	ctx := t.Context()
	p := newProvider(t, t.TempDir(), standInAgent(t))
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "session"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(context.Background(), sb.ID) })
	pid := oneAgent(t, sb.WorkingDir)
	if sid, tty := sessionOf(t, strconv.Itoa(pid)); sid != pid || tty != 0 {
		t.Errorf("agent %d: session %d, terminal %d; want a session of its own and no terminal", pid, sid, tty)
	}
	if stdin, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/0"); err != nil || stdin != os.DevNull {
		t.Errorf("agent's standard input is %q (%v), want %s", stdin, err, os.DevNull)
	}
	res, err := p.Exec(ctx, sb.ID, sandbox.ExecCommand{Command: []string{"sh", "-c", `echo $$; cat /proc/$$/stat`}})
	if err != nil {
		t.Fatal(err)
	}
	self, stat, _ := strings.Cut(res.Stdout, "\n")
	shell, _ := strconv.Atoi(self)
	if sid, tty := parseSession(t, stat); sid != shell || tty != 0 {
		t.Errorf("Exec's command %d: session %d, terminal %d; want a session of its own and no terminal", shell, sid, tty)
	}
}

// sessionOf is the session id and controlling terminal of pid.
func sessionOf(t *testing.T, pid string) (int, int) {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	return parseSession(t, string(stat))
}

func parseSession(t *testing.T, stat string) (int, int) {
	t.Helper()
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		t.Fatalf("not a stat line: %q", stat)
	}
	// state ppid pgrp session tty_nr
	f := strings.Fields(stat[i+1:])
	sid, _ := strconv.Atoi(f[3])
	tty, _ := strconv.Atoi(f[4])
	return sid, tty
}

func TestAgentStartsWithOnlyDeclaredEnvironment(t *testing.T) {
	t.Setenv("FLEETLIFT_TEST_SECRET", "hunter2")
	ctx := t.Context()
	root := t.TempDir()
	p, err := New(Options{Root: root, AgentCommand: standInAgent(t), Path: "/usr/bin:/bin", StopGrace: stopGrace})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "env", Env: map[string]string{"GIT_AUTHOR_NAME": "fleetlift"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Cleanup(context.Background(), "env")

	pid := oneAgent(t, sb.WorkingDir)
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	slices.Sort(got)
	root, _ = filepath.EvalSymlinks(root)
	want := []string{"GIT_AUTHOR_NAME=fleetlift", "HOME=" + filepath.Join(root, "env", "home"), "PATH=/usr/bin:/bin"}
	if !slices.Equal(got, want) {
		t.Errorf("agent environment = %q; want %q", got, want)
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil || cwd != sb.WorkingDir {
		t.Errorf("agent works in %q (%v); want %q", cwd, err, sb.WorkingDir)
	}
	if sb.WorkingDir != filepath.Join(root, "env", "workspace") {
		t.Errorf("WorkingDir = %s; want Root/env/workspace", sb.WorkingDir)
	}
}

func TestRestartedWorkerFindsSandbox(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	first := newProvider(t, root, standInAgent(t))
	opts := sandbox.ProvisionOptions{ID: "restart", Env: map[string]string{"TOKEN_FOR_AGENT": "declared"}}
	sb, err := first.Provision(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Cleanup(context.Background(), "restart") })
	agent := oneAgent(t, sb.WorkingDir)
	if err := first.CopyTo(ctx, "restart", strings.NewReader("kept"), "state/file"); err != nil {
		t.Fatal(err)
	}

	// A new Provider on the same Root is a restarted worker.
	second := newProvider(t, root, standInAgent(t))
	st, err := second.Status(ctx, "restart")
	if err != nil || st.Phase != sandbox.PhaseRunning {
		t.Fatalf("Status from the new provider = %+v, %v; want running", st, err)
	}
	again, err := second.Provision(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.WorkingDir != sb.WorkingDir || again.Phase != sandbox.PhaseRunning {
		t.Errorf("Provision from the new provider = %+v; want %+v", again, sb)
	}
	if pids := agentPIDs(t, sb.WorkingDir); !slices.Equal(pids, []int{agent}) {
		t.Errorf("agents after re-provisioning = %v; want only the first, %d", pids, agent)
	}
	rc, err := second.CopyFrom(ctx, "restart", "state/file")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := readAllClose(rc)
	if data != "kept" {
		t.Errorf("CopyFrom from the new provider = %q; want kept", data)
	}
	res, err := second.Exec(ctx, "restart", sandbox.ExecCommand{Command: []string{"sh", "-c", "echo $TOKEN_FOR_AGENT"}})
	if err != nil || res.Stdout != "declared\n" {
		t.Errorf("Exec from the new provider = %+v, %v; want the declared environment", res, err)
	}

	if err := second.Cleanup(ctx, "restart"); err != nil {
		t.Fatalf("Cleanup from the new provider: %v", err)
	}
	if procAlive(agent, mustTicks(t, agent)) {
		t.Errorf("agent %d still runs after Cleanup from the new provider", agent)
	}
	if _, err := os.Stat(filepath.Join(root, "restart")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Root/restart after Cleanup: %v; want it removed", err)
	}
}

// mustTicks returns pid's start time, or 0 once the process is gone
// (procAlive then reports false).
func mustTicks(t *testing.T, pid int) uint64 {
	ticks, _, _ := procStat(pid)
	return ticks
}

// exitingAgent waits for a file named stop in its workspace and exits with
// the code written in it.
var exitingAgent = []string{"/bin/sh", "-c", `while [ ! -e stop ]; do sleep 0.05; done; exit "$(cat stop)"`}

func TestAgentExitIsObserved(t *testing.T) {
	for _, c := range []struct {
		code  string
		phase sandbox.Phase
		exit  int
	}{
		{"0", sandbox.PhaseSucceeded, 0},
		{"3", sandbox.PhaseFailed, 3},
	} {
		t.Run("exit "+c.code, func(t *testing.T) {
			ctx := t.Context()
			root := t.TempDir()
			p := newProvider(t, root, exitingAgent)
			if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "exit"}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Cleanup(context.Background(), "exit") })
			if st, err := p.Status(ctx, "exit"); err != nil || st.Phase != sandbox.PhaseRunning {
				t.Fatalf("Status = %+v, %v; want running", st, err)
			}
			if err := p.CopyTo(ctx, "exit", strings.NewReader(c.code), "stop"); err != nil {
				t.Fatal(err)
			}
			st := waitPhase(t, p, "exit", c.phase)
			if st.ExitCode != c.exit {
				t.Errorf("Status = %+v; want exit code %d", st, c.exit)
			}
			// A restarted worker reads the recorded exit.
			if st, err := newProvider(t, root, exitingAgent).Status(ctx, "exit"); err != nil || st.Phase != c.phase || st.ExitCode != c.exit {
				t.Errorf("Status from a new provider = %+v, %v; want %s with code %d", st, err, c.phase, c.exit)
			}
			if _, err := p.Exec(ctx, "exit", sandbox.ExecCommand{Command: []string{"true"}}); err == nil {
				t.Error("Exec in a sandbox whose agent exited succeeded; want it refused")
			}
			rc, err := p.CopyFrom(ctx, "exit", "stop")
			if err != nil {
				t.Fatalf("CopyFrom after the agent exited: %v", err)
			}
			readAllClose(rc)
		})
	}
}

func TestAgentExitWhileNoWorkerWatched(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	p := newProvider(t, root, standInAgent(t))
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "orphan"})
	if err != nil {
		t.Fatal(err)
	}
	agent := oneAgent(t, sb.WorkingDir)
	ticks := mustTicks(t, agent)
	if err := p.Cleanup(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	// What a worker that died before its agent did leaves behind: the
	// record of a sandbox whose agent is gone, with no exit recorded.
	dir := filepath.Join(root, "orphan")
	for _, d := range []string{"workspace", "home", "exec"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeRecord(dir, &record{ID: "orphan", PID: agent, StartTicks: ticks, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}

	restarted := newProvider(t, root, standInAgent(t))
	st, err := restarted.Status(ctx, "orphan")
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != sandbox.PhaseFailed || st.ExitCode != -1 || !strings.Contains(st.Message, "unknown") {
		t.Errorf("Status = %+v; want failed, exit code -1, unknown", st)
	}
	again, err := restarted.Provision(ctx, sandbox.ProvisionOptions{ID: "orphan"})
	if err != nil || again.Phase != sandbox.PhaseFailed {
		t.Errorf("Provision of the dead sandbox = %+v, %v; want it returned as failed, not restarted", again, err)
	}
	if err := restarted.Cleanup(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Root/orphan after Cleanup: %v; want it removed", err)
	}
}

func TestTimeoutStopsSandbox(t *testing.T) {
	ctx := t.Context()
	p := newProvider(t, t.TempDir(), standInAgent(t))
	// Long enough that the agent is seen running first on a busy machine.
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "slow", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cleanup(context.Background(), "slow") })
	agent := oneAgent(t, sb.WorkingDir)
	ticks := mustTicks(t, agent)

	st := waitPhase(t, p, "slow", sandbox.PhaseFailed)
	if !strings.Contains(st.Message, "timed out after 2s") {
		t.Errorf("Status = %+v; want a message saying it timed out", st)
	}
	if !eventually(5*time.Second, func() bool { return !procAlive(agent, ticks) }) {
		t.Errorf("agent %d still runs after the sandbox timed out", agent)
	}
	if err := p.Cleanup(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutElapsedWhileWorkerWasDown(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	first := newProvider(t, root, standInAgent(t))
	sb, err := first.Provision(ctx, sandbox.ProvisionOptions{ID: "late", Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Cleanup(context.Background(), "late") })
	agent := oneAgent(t, sb.WorkingDir)
	ticks := mustTicks(t, agent)
	// Two hours pass while no worker runs.
	b, _, err := first.find("late")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.update(func(r *record) { r.Created = r.Created.Add(-2 * time.Hour) }); err != nil {
		t.Fatal(err)
	}

	restarted := newProvider(t, root, standInAgent(t))
	st := waitPhase(t, restarted, "late", sandbox.PhaseFailed)
	if !strings.Contains(st.Message, "timed out after 1h0m0s") {
		t.Errorf("Status = %+v; want a message saying it timed out", st)
	}
	if !eventually(5*time.Second, func() bool { return !procAlive(agent, ticks) }) {
		t.Errorf("agent %d still runs past the sandbox's timeout", agent)
	}
}

func TestInvalidRequestsAreRefused(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	p := newProvider(t, root, standInAgent(t))
	for _, opts := range []sandbox.ProvisionOptions{
		{ID: ""},
		{ID: "../escape"},
		{ID: "a/b"},
		{ID: ".hidden"},
		{ID: "-flag"},
		{ID: strings.Repeat("x", 129)},
		{ID: "a b"},
		{ID: "a\nb"},
		{ID: "caf\u00e9"},
		{ID: "a:b"},
		{ID: "home", Env: map[string]string{"HOME": "/root"}},
		{ID: "badname", Env: map[string]string{"A=B": "c"}},
	} {
		sb, err := p.Provision(ctx, opts)
		switch {
		case err == nil:
			t.Errorf("Provision(%q, env %v) = %+v; want it refused", opts.ID, opts.Env, sb)
			p.Cleanup(ctx, opts.ID)
		case !errors.Is(err, sandbox.ErrRefused):
			// Another attempt would be refused the same way: the task
			// fails at once instead.
			t.Errorf("Provision(%q, env %v): %v; want an error that wraps sandbox.ErrRefused", opts.ID, opts.Env, err)
		}
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 0 {
		t.Errorf("refused Provisions left %d entries in Root", len(entries))
	}
	if _, err := p.Status(ctx, "../escape"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Status of an impossible id = %v; want ErrNotFound", err)
	}
	if _, err := New(Options{Root: root, AgentCommand: []string{"fleetlift-no-such-agent"}}); err == nil {
		t.Error("New with an agent not in PATH succeeded")
	}
	if _, err := New(Options{AgentCommand: standInAgent(t)}); err == nil {
		t.Error("New without Root succeeded")
	}
}

func TestCleanupRemovesReadOnlyDirectories(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	p := newProvider(t, root, standInAgent(t))
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "ro"}); err != nil {
		t.Fatal(err)
	}
	// As Go's module cache under HOME leaves them.
	res, err := p.Exec(ctx, "ro", sandbox.ExecCommand{Command: []string{"sh", "-c",
		"mkdir -p $HOME/go/pkg/mod/m/sub && touch $HOME/go/pkg/mod/m/sub/f && chmod -R a-w $HOME/go"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	if err := p.Cleanup(ctx, "ro"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "ro")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Root/ro after Cleanup: %v; want it removed", err)
	}
}

func TestAgentOutputGoesToLog(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	p := newProvider(t, root, []string{"/bin/sh", "-c", "echo agent says hello; echo agent complains >&2; exec sleep 1000000"})
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "log"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cleanup(context.Background(), "log") })
	var log []byte
	if !eventually(5*time.Second, func() bool {
		log, _ = os.ReadFile(filepath.Join(root, "log", "agent.log"))
		return bytes.Contains(log, []byte("complains"))
	}) {
		t.Fatalf("agent.log = %q; want the agent's stdout and stderr", log)
	}
	if !bytes.Contains(log, []byte("agent says hello\n")) {
		t.Errorf("agent.log = %q; want the agent's stdout", log)
	}
}

func TestCopyFromRefusesSpecialFiles(t *testing.T) {
	ctx := t.Context()
	p := newProvider(t, t.TempDir(), standInAgent(t))
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "fifo"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cleanup(context.Background(), "fifo") })
	if res, err := p.Exec(ctx, "fifo", sandbox.ExecCommand{Command: []string{"sh", "-c", "mkfifo result.json && mkdir dir"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	// A FIFO with no writer would block a plain open forever.
	for _, name := range []string{"result.json", "dir", ""} {
		done := make(chan error, 1)
		go func() {
			rc, err := p.CopyFrom(ctx, "fifo", name)
			if err == nil {
				rc.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("CopyFrom(%q) succeeded; want it refused", name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("CopyFrom(%q) blocks", name)
		}
	}
}

func waitPhase(t *testing.T, p *Provider, id string, phase sandbox.Phase) *sandbox.Status {
	t.Helper()
	var st *sandbox.Status
	var err error
	if !eventually(10*time.Second, func() bool {
		st, err = p.Status(t.Context(), id)
		return err == nil && st.Phase == phase
	}) {
		t.Fatalf("Status = %+v, %v; want phase %s", st, err, phase)
	}
	return st
}

func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func readAllClose(rc interface {
	Read([]byte) (int, error)
	Close() error
}) (string, error) {
	defer rc.Close()
	var buf bytes.Buffer
	_, err := buf.ReadFrom(rc)
	return buf.String(), err
}

func TestCopyToKeepsModeOfReplacedFile(t *testing.T) {
	ctx := t.Context()
	p := newProvider(t, t.TempDir(), standInAgent(t))
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "mode"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cleanup(context.Background(), "mode") })
	if err := p.CopyTo(ctx, "mode", strings.NewReader("#!/bin/sh\necho one\n"), "run.sh"); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Exec(ctx, "mode", sandbox.ExecCommand{Command: []string{"chmod", "+x", "run.sh"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("chmod = %+v, %v", res, err)
	}
	if err := p.CopyTo(ctx, "mode", strings.NewReader("#!/bin/sh\necho two\n"), "run.sh"); err != nil {
		t.Fatal(err)
	}
	res, err := p.Exec(ctx, "mode", sandbox.ExecCommand{Command: []string{"./run.sh"}})
	if err != nil || res.Stdout != "two\n" {
		t.Errorf("running the replaced script = %+v, %v; want it executable with the new content", res, err)
	}
}

// A sandbox whose worker never comes back ends itself once its lease is
// older than OrphanAfter; one whose worker comes back in time goes on.
func TestOrphanedSandboxEndsItself(t *testing.T) {
	root := t.TempDir()
	newP := func() *Provider {
		p, err := New(Options{Root: root, AgentCommand: []string{os.Args[0], "agent"}, StopGrace: stopGrace,
			ServeArgs: []string{"--hide", root}, OrphanAfter: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := t.Context()
	p := newP()
	for _, id := range []string{"orphan", "adopted"} {
		if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Cleanup(context.Background(), id) })
	}
	// The worker dies: nothing watches either sandbox.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Another worker takes over "adopted" (as a restart on the same root
	// takes over every sandbox), but not "orphan".
	q := newP()
	defer q.Close()
	q.mu.Lock()
	delete(q.boxes, "orphan")
	q.mu.Unlock()

	deadline := time.Now().Add(time.Minute)
	for {
		st, err := p.Status(ctx, "orphan")
		if err != nil {
			t.Fatal(err)
		}
		if st.Phase != sandbox.PhaseRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphaned sandbox's agent still runs a minute after its lease lapsed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	rc, err := p.CopyFrom(ctx, "orphan", ".fleetlift/status.json")
	if err != nil {
		t.Fatal(err)
	}
	var status struct{ Phase, Message string }
	err = json.NewDecoder(rc).Decode(&status)
	rc.Close()
	if err != nil || status.Phase != "failed" || !strings.Contains(status.Message, "no worker has watched this sandbox") {
		t.Errorf("the orphan's status: %+v, %v; want failed, saying no worker watched it", status, err)
	}
	if st, err := q.Status(ctx, "adopted"); err != nil || st.Phase != sandbox.PhaseRunning {
		t.Errorf("the adopted sandbox: %+v, %v; want still running", st, err)
	}
}

// A local sandbox cannot take a secret from a Kubernetes Secret: the agent
// gets the worker's own value, and the sandbox says the reference was
// ignored, also when a retried Provision finds it.
func TestSecretRefsAreIgnoredAndSaidSo(t *testing.T) {
	p := newProvider(t, t.TempDir(), standInAgent(t))
	ctx := t.Context()
	opts := sandbox.ProvisionOptions{
		ID: "refs", Env: map[string]string{"LANG": "C.UTF-8"},
		Secrets: map[string]string{"FLEETLIFT_FORGE_TOKEN": "the worker's own token"},
		SecretRefs: map[string]sandbox.SecretRef{
			"FLEETLIFT_FORGE_TOKEN": {Secret: "team-github", Key: "token"},
			"ANTHROPIC_API_KEY":     {Secret: "team-claude", Key: "api-key"},
		},
	}
	for range 2 {
		sb, err := p.Provision(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Cleanup(context.Background(), sb.ID) })
		if want := []string{"ANTHROPIC_API_KEY", "FLEETLIFT_FORGE_TOKEN"}; !slices.Equal(sb.IgnoredSecretRefs, want) {
			t.Errorf("IgnoredSecretRefs = %q; want %q", sb.IgnoredSecretRefs, want)
		}
		environ, err := os.ReadFile("/proc/" + strconv.Itoa(oneAgent(t, sb.WorkingDir)) + "/environ")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(environ, []byte("FLEETLIFT_FORGE_TOKEN=the worker's own token\x00")) || bytes.Contains(environ, []byte("ANTHROPIC_API_KEY")) {
			t.Errorf("the agent's environment is not the worker's: %q", environ)
		}
	}
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "norefs", Env: map[string]string{"LANG": "C.UTF-8"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(context.Background(), sb.ID) })
	if sb.IgnoredSecretRefs != nil {
		t.Errorf("IgnoredSecretRefs = %q with no references", sb.IgnoredSecretRefs)
	}
}

// An agent said to end what it runs (Options.CommandsEndWithAgent) that
// Cleanup has to stop with a signal may have left processes of its own:
// Cleanup still finds them by their HOME and stops them, wherever they
// moved.
func TestCleanupStopsWhatAKilledAgentLeft(t *testing.T) {
	marker := fmt.Sprint(900_000_000 + os.Getpid())
	agent := []string{"/bin/sh", "-c", "setsid sleep " + marker + " </dev/null >/dev/null 2>&1 & exec sleep 1000000"}
	p, err := New(Options{Root: t.TempDir(), AgentCommand: agent, StopGrace: stopGrace, CommandsEndWithAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "killed"}); err != nil {
		t.Fatal(err)
	}
	sleeping := newSleepOf(t, marker)
	if !sleeping.becomes(true) {
		t.Fatal("the agent's own process never started")
	}
	if err := p.Cleanup(ctx, "killed"); err != nil {
		t.Fatal(err)
	}
	if !sleeping.becomes(false) {
		t.Fatal("a process the killed agent left in a session of its own outlived Cleanup")
	}
}

// sleepOf is `sleep <marker>`, which a test started in a session of its
// own; it is killed when the test ends.
type sleepOf string

func (m sleepOf) running() bool {
	out, _ := exec.Command("pgrep", "-f", "^sleep "+string(m)+"$").Output()
	return len(bytes.TrimSpace(out)) > 0
}

func newSleepOf(t *testing.T, marker string) sleepOf {
	t.Cleanup(func() { _ = exec.Command("pkill", "-f", "^sleep "+marker+"$").Run() })
	return sleepOf(marker)
}

// becomes reports whether the process is running (or not) within a
// minute.
func (m sleepOf) becomes(running bool) bool {
	for deadline := time.Now().Add(time.Minute); m.running() != running; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// An agent said to end what it runs that exits by itself leaves nothing,
// but what Exec started in its sandbox may still run: Cleanup stops it.
func TestCleanupStopsWhatExecLeftAfterTheAgentExited(t *testing.T) {
	marker := fmt.Sprint(800_000_000 + os.Getpid())
	// Exits, code 0, once told to through a file in its home.
	agent := []string{"/bin/sh", "-c", `while [ ! -e "$HOME/exit" ]; do sleep 0.02; done`}
	p, err := New(Options{Root: t.TempDir(), AgentCommand: agent, StopGrace: stopGrace, CommandsEndWithAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "execd"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Exec(ctx, "execd", sandbox.ExecCommand{Command: []string{"sh", "-c", "setsid sleep " + marker + " </dev/null >/dev/null 2>&1 & touch \"$HOME/exit\""}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		st, err := p.Status(ctx, "execd")
		if err != nil {
			t.Fatal(err)
		}
		if st.Phase == sandbox.PhaseSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent of %s did not exit by itself: %+v", sb.WorkingDir, st)
		}
	}
	sleeping := newSleepOf(t, marker)
	if !sleeping.becomes(true) {
		t.Fatal("the process Exec left is not running; the check after Cleanup could not work")
	}
	if err := p.Cleanup(ctx, "execd"); err != nil {
		t.Fatal(err)
	}
	if !sleeping.becomes(false) {
		t.Fatal("a process Exec left in a session of its own outlived Cleanup")
	}
}
