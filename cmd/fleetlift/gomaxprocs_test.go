package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// A worker's local sandboxes start their agent on one processor, and
// hand it the GOMAXPROCS the sandbox's environment asks of the commands
// (protocol.EnvCommandGOMAXPROCS): a short-lived agent on every
// processor costs the machine threads it never uses.
func TestLocalSandboxAgentsStartOnOneProcessor(t *testing.T) {
	ctx := t.Context()
	tf := &temporalFlags{stateDir: t.TempDir()}
	p, err := (&workerFlags{isolation: protocol.IsolationNone}).localProvider(tf)
	if err != nil {
		t.Fatal(err)
	}
	id := "gomaxprocs"
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: id, Env: map[string]string{"GOMAXPROCS": "3"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(ctx, id) })
	env := environOf(t, agentPID(t, tf.stateDir, id))
	for _, want := range []string{"GOMAXPROCS=1", protocol.EnvCommandGOMAXPROCS + "=3"} {
		if !slices.Contains(env, want) {
			t.Errorf("the agent's environment lacks %s: %q", want, env)
		}
	}
}

// A worker's jailed local sandboxes hand their agent on: once a sandbox
// is done and removed, its agent serves the next one the worker
// provisions, rather than one agent starting and exiting per unit.
func TestJailedLocalSandboxesHandTheirAgentOn(t *testing.T) {
	ctx := t.Context()
	tf := &temporalFlags{stateDir: t.TempDir()}
	p, err := (&workerFlags{isolation: protocol.IsolationNamespaces}).localProvider(tf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.(interface{ Close() error }).Close() })
	agentOf := func(id string) int {
		t.Helper()
		if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
		// A manifest the agent refuses ends its sandbox at once (failed).
		if err := p.CopyTo(ctx, id, strings.NewReader("{}"), protocol.Dir+"/"+protocol.ManifestFile); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var st protocol.Status
			data, err := os.ReadFile(filepath.Join(tf.stateDir, "sandboxes", id, "workspace", protocol.Dir, protocol.StatusFile))
			if err == nil && json.Unmarshal(data, &st) == nil && st.Phase.Terminal() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox %s: no terminal phase", id)
			}
		}
		pid := agentPID(t, tf.stateDir, id)
		if err := p.Cleanup(ctx, id); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	if first, second := agentOf("first"), agentOf("second"); first != second {
		t.Errorf("the second sandbox's agent is %d, the first's %d: want the first one's, idle", second, first)
	}
}

// agentPID is the agent of local sandbox id, as its record says.
// environOf is the environment of process pid. A process that has just
// been started may still be inside execve, its new image not yet laid
// out (on a loaded machine it can wait long for a processor), and shows
// an empty environment until it is: it is read until it shows one, for
// 30 seconds at most.
func environOf(t *testing.T, pid int) []string {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/environ", pid)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > 0 || time.Now().After(deadline) {
			return strings.Split(string(raw), "\x00")
		}
	}
}

func agentPID(t *testing.T, stateDir, id string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, "sandboxes", id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ PID int }
	if err := json.Unmarshal(data, &rec); err != nil || rec.PID <= 0 {
		t.Fatalf("sandbox record %s: %v", data, err)
	}
	return rec.PID
}
