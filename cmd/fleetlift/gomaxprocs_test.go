package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/agentcmd"
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
	p, err := (&workerFlags{isolation: agentcmd.IsolationNone}).localProvider(tf)
	if err != nil {
		t.Fatal(err)
	}
	id := "gomaxprocs"
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: id, Env: map[string]string{"GOMAXPROCS": "3"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(ctx, id) })
	data, err := os.ReadFile(filepath.Join(tf.stateDir, "sandboxes", id, "sandbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ PID int }
	if err := json.Unmarshal(data, &rec); err != nil || rec.PID <= 0 {
		t.Fatalf("sandbox record %s: %v", data, err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", rec.PID))
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Split(string(raw), "\x00")
	for _, want := range []string{"GOMAXPROCS=1", protocol.EnvCommandGOMAXPROCS + "=3"} {
		if !slices.Contains(env, want) {
			t.Errorf("the agent's environment lacks %s: %q", want, env)
		}
	}
}
