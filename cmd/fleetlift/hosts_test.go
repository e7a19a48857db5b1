package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestTwoWorkerHostsRunOneCampaign: two workers stand in for two hosts,
// each with sandboxes only it can reach (its own state directory). They
// run one 10-repository campaign; one host dies mid-run (its worker stops
// and its agents are killed). The steps on each sandbox went to the host
// that holds it, so no task fails with a sandbox it could not find; the
// dead host's tasks run again on the other once their steps go unanswered,
// and the campaign ends completed with exactly one branch per repository.
func TestTwoWorkerHostsRunOneCampaign(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 10)
	var repos strings.Builder
	for _, u := range urls {
		fmt.Fprintf(&repos, "  - url: %s\n", u)
	}
	def := writeDef(t, root, "hosts.yaml", `version: 1
kind: Campaign
id: hosts
title: Bump go on two hosts
max_parallel: 4
rate_limit: {pull_requests_per_hour: 3600, burst: 100}
template:
  execution:
    deterministic:
      image: golang
      command: [sh, -c, "sleep 1; sed -i 's/^go 1.21$/go 1.26/' go.mod"]
  pull_request: {branch_prefix: auto/hosts, title: Bump go}
repositories:
`+repos.String())

	addr, stateA, stateB := freeAddr(t), filepath.Join(root, "host-a"), filepath.Join(root, "host-b")
	srv := startServer(t, addr, stateA)
	c, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	host := func(state string) *workers {
		tf := &temporalFlags{address: addr, namespace: devserver.Namespace, stateDir: state}
		wf := &workerFlags{providerName: sandboxLocal, isolation: "namespaces", fileRoots: []string{root}}
		w, err := newWorker(t.Context(), io.Discard, c, tf, wf)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		return w
	}
	a, b := host(stateA), host(stateB)
	defer a.Stop()

	if out, code := runCLI(t, "run", "--file", def, "--no-worker", "--detach", "--sandbox-host-timeout", "5s",
		"--temporal-address", addr, "--state-dir", stateA); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}

	// Once host B holds a sandbox, it dies: its worker stops, its agents
	// are killed.
	sandboxesB := filepath.Join(stateB, "sandboxes")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if entries, _ := os.ReadDir(sandboxesB); len(entries) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("host B never provisioned a sandbox")
		}
	}
	b.Stop()
	for _, pid := range processesWith("serve", "--workspace", sandboxesB) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}

	var st workflow.CampaignState
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		run := c.GetWorkflow(t.Context(), "campaign/hosts", "")
		d, err := c.DescribeWorkflowExecution(t.Context(), "campaign/hosts", "")
		if err == nil && d.WorkflowExecutionInfo.CloseTime != nil {
			if err := run.Get(t.Context(), &st); err != nil {
				t.Fatalf("campaign: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the campaign did not finish after host B died")
		}
	}
	for _, u := range st.Units {
		if u.Phase != workflow.TaskCompleted || strings.Contains(u.Error, "gone") {
			t.Errorf("unit %s: %s %q", u.Key, u.Phase, u.Error)
		}
	}
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		branches, _ := exec.Command("git", "-C", bare, "branch", "--list", "auto/*").Output()
		got, err := exec.Command("git", "-C", bare, "show", "auto/hosts/hosts:go.mod").Output()
		if strings.Count(string(branches), "auto/") != 1 || err != nil || !strings.Contains(string(got), "go 1.26") {
			t.Errorf("%s: branches %q, go.mod %q (%v); want exactly one branch with go 1.26", bare, branches, got, err)
		}
	}
}
