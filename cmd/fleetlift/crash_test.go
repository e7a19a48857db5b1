package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

// processesWith lists the pids of this host's processes whose command line
// holds every one of parts.
func processesWith(parts ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && bytes.Contains(cmdline, []byte(p))
		}
		if all {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestKilledAgentIsReplacedAndTheRunFinishes: the agent is killed with
// SIGKILL while its command runs. Nothing failed in the work itself, so the
// task provisions another sandbox, runs the work again, and the run ends
// completed by itself with the branch pushed once.
func TestKilledAgentIsReplacedAndTheRunFinishes(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 1)
	marker := fmt.Sprint(987_000_000 + os.Getpid())
	def := writeDef(t, root, "crash.yaml", fmt.Sprintf(`version: 1
id: crash
title: Bump go, slowly
repositories: [{url: %s}]
execution:
  deterministic: {image: golang, command: [sh, -c, "sleep 0.%s; sed -i 's/^go 1.21$/go 1.26/' go.mod"]}
pull_request: {branch_prefix: auto/crash, title: Bump go}
`, urls[0], marker))
	addr, state := freeAddr(t), filepath.Join(root, "state")
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"run", "--file", def, "--temporal-address", addr, "--state-dir", state}, &out, &out)
	}()

	// Once the first sandbox's command runs, kill its agent.
	deadline := time.Now().Add(2 * time.Minute)
	for len(processesWith("sleep", marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the command never ran:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	agents := processesWith("serve", "--workspace", filepath.Join(state, "sandboxes"))
	if len(agents) != 1 {
		t.Fatalf("agents %v; want the one running the command", agents)
	}
	if err := syscall.Kill(agents[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), "task/crash: completed") {
			t.Fatalf("run after the agent was killed: exit %d:\n%s", code, out.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the run did not finish after its agent was killed:\n%s", out.String())
	}
	bare := strings.TrimPrefix(urls[0], "file://")
	if got, err := exec.Command("git", "-C", bare, "show", "auto/crash/crash:go.mod").Output(); err != nil || !strings.Contains(string(got), "go 1.26") {
		t.Errorf("branch auto/crash/crash: %q, %v; want go 1.26", got, err)
	}
	if b, _ := exec.Command("git", "-C", bare, "branch", "--list", "auto/*").Output(); strings.Count(string(b), "auto/") != 1 {
		t.Errorf("branches %q; want exactly one", b)
	}
	srv := startServer(t, addr, state)
	c, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var res status.TaskResult
	if err := c.GetWorkflow(t.Context(), "task/crash", "").Get(t.Context(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Phase != status.TaskCompleted || res.SandboxesLost != 1 {
		t.Errorf("task result %s, %d sandboxes lost; want completed after one lost", res.Phase, res.SandboxesLost)
	}
}
