package local

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

// reusing is a Provider whose agents, fleetlift's own and jailed, serve
// one sandbox after another (ReuseAgents), as a worker's do.
func reusing(t *testing.T) (*Provider, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{Root: root, AgentCommand: []string{os.Args[0], "agent"}, StopGrace: stopGrace,
		ServeArgs:            []string{"--hide", root, "--manifest-poll", "20ms", "--steering-poll", "50ms"},
		CommandsEndWithAgent: true, ReuseAgents: true, OrphanAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, root
}

// transform runs script as the work of sandbox id (a transform of bare,
// pushed to fleetlift/<id>) and returns the agent that ran it.
func transform(t *testing.T, p *Provider, id, bare, script string, secrets map[string]string) int {
	t.Helper()
	return submit(t, p, id, bare, script, secrets, true)
}

// submit starts script as the work of sandbox id, and waits for it to
// complete when wait is set; it returns the sandbox's agent.
func submit(t *testing.T, p *Provider, id, bare, script string, secrets map[string]string, wait bool) int {
	t.Helper()
	ctx := t.Context()
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: id, Secrets: secrets, Env: map[string]string{
		"FLEETLIFT_ALLOW_FILE_ROOTS": os.TempDir(), "GIT_CONFIG_GLOBAL": "/dev/null",
	}}); err != nil {
		t.Fatalf("Provision(%s): %v", id, err)
	}
	manifest := reuseManifest(id, bare, script)
	m, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CopyTo(ctx, id, strings.NewReader(string(m)), protocol.Dir+"/"+protocol.ManifestFile); err != nil {
		t.Fatal(err)
	}
	if !wait {
		rec, err := readRecord(filepath.Join(p.root, id))
		if err != nil {
			t.Fatal(err)
		}
		return rec.PID
	}
	finish(t, p, id, manifest)
	rec, err := readRecord(filepath.Join(p.root, id))
	if err != nil {
		t.Fatal(err)
	}
	return rec.PID
}

// reuseManifest is the manifest of sandbox id: script's change to bare.
func reuseManifest(id, bare, script string) protocol.Manifest {
	return protocol.Manifest{
		TaskID: id, Mode: protocol.ModeTransform, Title: "reuse",
		Repositories:   []protocol.Repository{{Name: "svc", URL: "file://" + bare, Branch: "main"}},
		Execution:      protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"sh", "-c", script}},
		TimeoutSeconds: 60,
		PullRequest:    &protocol.PullRequest{BranchPrefix: "fleetlift", Title: "reuse"},
		GitConfig:      protocol.GitConfig{UserName: "Fleetlift Bot", UserEmail: "bot@example.com"},
		Forge:          "local",
	}
}

// finish waits for sandbox id's agent to complete manifest, and proposes
// the change it left, as the worker does.
func finish(t *testing.T, p *Provider, id string, manifest protocol.Manifest) {
	t.Helper()
	ctx := t.Context()
	var st protocol.Status
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if rc, err := p.CopyFrom(ctx, id, protocol.Dir+"/"+protocol.StatusFile); err == nil {
			data, _ := io.ReadAll(rc)
			rc.Close()
			if json.Unmarshal(data, &st) == nil && st.Phase.Terminal() {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: no terminal phase; last %+v", id, st)
		}
	}
	if st.Phase != protocol.PhaseComplete {
		t.Fatalf("sandbox %s ended %s: %s", id, st.Phase, st.Message)
	}
	// The worker proposes the change the agent left.
	sandboxtest.Propose(t, p, id, manifest, os.TempDir())
}

func show(t *testing.T, bare, branch, path string) string {
	t.Helper()
	out, err := pushed(bare, branch, path)
	if err != nil {
		t.Fatalf("git show %s:%s: %v", branch, path, err)
	}
	return out
}

// pushed is path on branch of bare, an error when it is not there.
func pushed(bare, branch, path string) (string, error) {
	out, err := exec.Command("git", "--git-dir", bare, "show", branch+":"+path).Output()
	return string(out), err
}

func gone(pid int, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !processAlive(pid) {
			return true
		}
	}
	return false
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	_, state, err := procStat(pid)
	return err == nil && state != 'Z'
}

// An agent that finished a sandbox serves the next one, which finds
// nothing the first one's work left: its own workspace and HOME, an empty
// /tmp, no process. Once nobody gives it another it exits.
func TestAnIdleAgentServesTheNextSandbox(t *testing.T) {
	p, _ := reusing(t)
	ctx := t.Context()
	bare := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})

	first := transform(t, p, "first", bare, `echo left > "$HOME/left"; echo left > /tmp/left
setsid sleep 3600 </dev/null >/dev/null 2>&1 &
echo one >> README.md`, nil)
	// Finished, the sandbox says so, as when its agent exited 0.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := p.Status(ctx, "first")
		if err != nil {
			t.Fatal(err)
		}
		if st.Phase == sandbox.PhaseSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the finished sandbox's status: %+v; want succeeded", st)
		}
	}
	if err := p.Cleanup(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	if !processAlive(first) {
		t.Fatal("the agent exited with its sandbox; want it waiting for the next")
	}
	second := transform(t, p, "second", bare, `{ pwd; echo "$HOME"; ls -A "$HOME"; echo end of home; cat /tmp/left || echo nothing in /tmp; pgrep -x sleep || echo no sleep; for f in /proc/$$/fd/*; do readlink "$f"; done | grep -c socket; } > SEEN 2>/dev/null
echo two >> README.md`, nil)
	if second != first {
		t.Fatalf("the second sandbox's agent is %d, the first's %d: want the idle one", second, first)
	}
	seen := strings.Split(strings.TrimSpace(show(t, bare, "fleetlift/second", "SEEN")), "\n")
	dir := filepath.Join(p.root, "second")
	want := []string{filepath.Join(dir, workspaceDir, "svc"), filepath.Join(dir, homeDir), "end of home", "nothing in /tmp", "no sleep", "0"}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("the second sandbox's work saw:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(filepath.Join(dir, agentLogFile)); err != nil {
		t.Errorf("the second sandbox has no log of its agent: %v", err)
	}
	if err := p.Cleanup(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Reaped by then: the worker that closes it next leaves none behind.
	if processAlive(first) {
		t.Fatal("the idle agent is still there once its provider closed")
	}
}

// An agent serves only sandboxes whose agent would have its environment,
// secrets included, and none after a sandbox in which Exec ran something;
// one nobody takes exits by itself.
func TestAgentsServeOnlyWhatTheyWereStartedFor(t *testing.T) {
	p, _ := reusing(t)
	ctx := t.Context()
	bare := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	change := `echo x >> README.md`

	a := transform(t, p, "a", bare, change, map[string]string{"FLEETLIFT_FORGE_TOKEN": "one"})
	if err := p.Cleanup(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	b := transform(t, p, "b", bare, change, map[string]string{"FLEETLIFT_FORGE_TOKEN": "two"})
	if b == a {
		t.Fatal("an agent started with one token served a sandbox provisioned with another")
	}
	if _, err := p.Exec(ctx, "b", sandbox.ExecCommand{Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Cleanup(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if !gone(b, 5*time.Second) {
		t.Error("the agent of a sandbox Exec ran a process in outlived it")
	}
	c := transform(t, p, "c", bare, change, map[string]string{"FLEETLIFT_FORGE_TOKEN": "one"})
	if c != a {
		t.Errorf("the sandbox provisioned as the first one was served by %d, not by that one's idle agent %d", c, a)
	}
	// Removed while its work runs, a sandbox takes its agent with it.
	d := submit(t, p, "d", bare, `sleep 30`, map[string]string{"FLEETLIFT_FORGE_TOKEN": "one"}, false)
	if err := p.Cleanup(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := p.Cleanup(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if !gone(d, 5*time.Second) {
		t.Error("the agent of a sandbox removed while its work ran outlived it")
	}
	if !gone(a, agentIdleFor+5*time.Second) {
		t.Errorf("an idle agent nobody took still runs %s later", agentIdleFor+5*time.Second)
	}
}

// Without its commands jailed an agent is not handed on.
func TestReuseNeedsCommandsThatEndWithTheAgent(t *testing.T) {
	_, err := New(Options{Root: t.TempDir(), AgentCommand: []string{os.Args[0], "agent"}, ReuseAgents: true})
	if err == nil || !strings.Contains(err.Error(), "CommandsEndWithAgent") {
		t.Fatalf("New with ReuseAgents alone: %v; want it refused, naming CommandsEndWithAgent", err)
	}
}

// An idle agent killed while it waited makes way for a new one; one
// killed just as it is handed a sandbox fails that sandbox, as an agent
// that dies at any time does, rather than leave it waiting.
func TestAKilledIdleAgentMakesWayForANewOne(t *testing.T) {
	p, _ := reusing(t)
	ctx := t.Context()
	bare := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	park := func(id string) *agentProc {
		t.Helper()
		pid := transform(t, p, id, bare, `echo `+id+` >> README.md`, nil)
		if err := p.Cleanup(ctx, id); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, a := range p.idle {
			if a.pid == pid {
				return a
			}
		}
		t.Fatalf("the agent of %s is not idle", id)
		return nil
	}

	a := park("first")
	if err := syscall.Kill(a.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	if second := transform(t, p, "second", bare, `echo second >> README.md`, nil); second == a.pid {
		t.Fatalf("the killed agent %d is said to serve the next sandbox", a.pid)
	}
	if got := show(t, bare, "fleetlift/second", "README.md"); got != "# svc\nsecond\n" {
		t.Errorf("the second sandbox's change: %q", got)
	}

	b := park("third")
	if err := syscall.Kill(b.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pid := submit(t, p, "fourth", bare, `echo fourth >> README.md`, nil, false)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := p.Status(ctx, "fourth")
		if err != nil {
			t.Fatal(err)
		}
		if pid == b.pid && st.Phase == sandbox.PhaseFailed {
			break // handed to the dying agent: failed, and said so
		}
		if pid != b.pid {
			// A new agent took it: it does the work, which the worker
			// proposes.
			finish(t, p, "fourth", reuseManifest("fourth", bare, `echo fourth >> README.md`))
			if got := show(t, bare, "fleetlift/fourth", "README.md"); got != "# svc\nfourth\n" {
				t.Errorf("the fourth sandbox's change: %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox handed on as its idle agent was killed neither failed nor finished: agent %d (the killed one %d), %+v", pid, b.pid, st)
		}
	}
}
