package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/cmd/fleetlift-agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/jail"
)

// TestMain lets the test binary be the jail the agent runs its commands
// in, as fleetlift-agent is.
func TestMain(m *testing.M) {
	if args, ok := agentcmd.JailArgs(os.Args[1:]); ok {
		os.Exit(jail.Main(args))
	}
	os.Exit(m.Run())
}

func writeAtomic(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func waitPhase(t *testing.T, ws string, ok func(protocol.Status) bool) protocol.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var st protocol.Status
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(filepath.Join(ws, protocol.Dir, protocol.StatusFile)); err == nil {
			st = protocol.Status{}
			if json.Unmarshal(data, &st) == nil && ok(st) {
				return st
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("last status %+v", st)
	return st
}

// The agent binary end to end: the agent CLI comes from
// FLEETLIFT_AGENT_CLI, the run waits for approval, a steer reaches the
// agent, and approval pushes the branch to a local repository.
func TestServeAgenticRunWithSteering(t *testing.T) {
	standIn, err := filepath.Abs(filepath.Join("..", "..", "internal", "agent", "testdata", "stand-in-agent.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := json.Marshal([]string{standIn})
	t.Setenv(protocol.EnvAgentCLI, string(cli))
	t.Setenv(protocol.EnvAllowFileRoots, os.TempDir())

	ws := t.TempDir()
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"serve", "--workspace", ws, "--manifest-poll", "20ms", "--steering-poll", "50ms"}, &stdout, &stderr)
	}()

	if err := os.MkdirAll(filepath.Join(ws, protocol.Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(ws, protocol.Dir, protocol.ManifestFile), protocol.Manifest{
		TaskID:          "readme",
		Mode:            protocol.ModeTransform,
		Title:           "Improve the README",
		Repositories:    []protocol.Repository{{Name: "svc", URL: "file://" + remote, Branch: "main"}},
		Execution:       protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "Improve the README.", Agent: "claude-code"},
		TimeoutSeconds:  60,
		RequireApproval: true,
		PullRequest:     &protocol.PullRequest{BranchPrefix: "auto", Title: "Improve the README"},
		GitConfig:       protocol.GitConfig{UserName: "Bot", UserEmail: "bot@example.com", CloneDepth: 1},
		Forge:           "local",
	})
	waitPhase(t, ws, func(st protocol.Status) bool { return st.Phase == protocol.PhaseAwaitingInput })
	steering := filepath.Join(ws, protocol.Dir, protocol.SteeringFile)
	writeAtomic(t, steering, protocol.Steering{Action: protocol.ActionSteer, Prompt: "Mention the licence too", Iteration: 1})
	waitPhase(t, ws, func(st protocol.Status) bool { return st.Phase == protocol.PhaseAwaitingInput && st.Iteration == 1 })
	writeAtomic(t, steering, protocol.Steering{Action: protocol.ActionApprove})

	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return after approval")
	}
	if st := waitPhase(t, ws, func(st protocol.Status) bool { return st.Phase.Terminal() }); st.Phase != protocol.PhaseComplete {
		t.Fatalf("phase %s: %s", st.Phase, st.Message)
	}
	var res protocol.Result
	data, _ := os.ReadFile(filepath.Join(ws, protocol.Dir, protocol.ResultFile))
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	// The agent pushed nothing and left the change for the worker.
	if len(res.Repositories) != 1 || res.Repositories[0].PullRequest != nil || res.Repositories[0].Base == "" {
		t.Fatalf("result %+v", res.Repositories)
	}
	if out := gittest.Run(t, remote, "branch", "--list", "auto/*"); out != "" {
		t.Fatalf("the agent pushed %s", out)
	}
	left := t.TempDir()
	gittest.Run(t, left, "init", "--quiet", "--bare")
	gittest.Run(t, left, "fetch", "--quiet", remote, "main")
	gittest.Run(t, left, "fetch", "--quiet", filepath.Join(ws, protocol.Dir, protocol.BundleFile("svc")), protocol.BundleRef+":refs/left")
	log := gittest.Run(t, left, "show", "refs/left:AGENT_LOG.md")
	if !strings.Contains(log, "Mention the licence too") || !strings.Contains(log, "## iteration=1 attempt=1") {
		t.Fatalf("the steer did not reach the agent CLI:\n%s", log)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"launch"}, "unknown command"},
		{"extra argument", []string{"serve", "now"}, "unknown command"},
		{"unknown flag", []string{"serve", "--workspaces", "/tmp"}, "unknown flag"},
		{"entrypoint without --", []string{"entrypoint", "serve"}, "entrypoint: want -- before the agent's arguments"},
		{"entrypoint without the agent's arguments", []string{"entrypoint", "--user", "agent", "--"}, "entrypoint: no agent arguments after --"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}
