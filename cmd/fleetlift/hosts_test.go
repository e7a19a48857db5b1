package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker/dockertest"
	"github.com/fleetlift/fleetlift/internal/status"
)

// TestTwoWorkerHostsRunOneCampaign: two workers stand in for two hosts,
// each with sandboxes only it can reach (its own state directory). They
// run one 10-repository campaign; one host dies mid-run (its worker stops
// and its agents are killed). The steps on each sandbox went to the host
// that holds it, so no task fails with a sandbox it could not find; the
// dead host's tasks run again on the other once their steps go unanswered,
// and the campaign ends completed with exactly one branch per repository.
// The hosts are local process sandboxes (separate state directories), and
// Docker sandboxes of separate label scopes on one engine, where the dead
// host's containers are killed.
func TestTwoWorkerHostsRunOneCampaign(t *testing.T) {
	t.Run(sandboxLocal, func(t *testing.T) { twoWorkerHosts(t, sandboxLocal) })
	t.Run(sandboxDocker, func(t *testing.T) { twoWorkerHosts(t, sandboxDocker) })
}

func twoWorkerHosts(t *testing.T, provider string) {
	root := t.TempDir()
	urls := demoRepos(t, root, 10)
	image, gitSafe := "golang", "safe.directory=*"
	var cli *client.Client
	var agentImage string
	scopes := map[string]string{}
	if provider == sandboxDocker {
		cli = dockertest.Client(t)
		image, agentImage = dockertest.Images(t, cli)
		// The agent runs as uid 1000 in the containers: the repositories
		// must be its to push to.
		if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", docker.UID, docker.GID), root).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v\n%s", err, out)
		}
		run := rand.Uint32()
		scopes["a"], scopes["b"] = fmt.Sprintf("hostsa%08x", run), fmt.Sprintf("hostsb%08x", run)
	}
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
      image: `+image+`
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
		wf := &workerFlags{providerName: provider, isolation: "namespaces", fileRoots: []string{root}}
		if provider == sandboxDocker {
			wf.docker = dockerFlags{image: image, agentImage: agentImage, network: "none", scope: scopes[filepath.Base(state)[len("host-"):]]}
		}
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
	containersB := func() []string {
		list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", docker.LabelScope+"="+scopes["b"])})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range list.Items {
			ids = append(ids, c.ID)
		}
		return ids
	}
	holds := func() bool {
		if provider == sandboxDocker {
			return len(containersB()) > 0
		}
		entries, _ := os.ReadDir(sandboxesB)
		return len(entries) > 0
	}
	for deadline := time.Now().Add(time.Minute); !holds(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("host B never provisioned a sandbox")
		}
	}
	b.Stop()
	if provider == sandboxDocker {
		for _, id := range containersB() {
			_, _ = cli.ContainerKill(context.Background(), id, client.ContainerKillOptions{Signal: "KILL"})
		}
		t.Cleanup(func() {
			for _, id := range containersB() {
				_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
			vols, _ := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: client.Filters{}.Add("label", docker.LabelScope+"="+scopes["b"])})
			for _, v := range vols.Items {
				_, _ = cli.VolumeRemove(context.Background(), v.Name, client.VolumeRemoveOptions{Force: true})
			}
		})
	} else {
		for _, pid := range processesWith("serve", "--workspace", sandboxesB) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	var st status.CampaignState
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
		if u.Phase != status.TaskCompleted || strings.Contains(u.Error, "gone") {
			t.Errorf("unit %s: %s %q", u.Key, u.Phase, u.Error)
		}
	}
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		branches, _ := exec.Command("git", "-c", gitSafe, "-C", bare, "branch", "--list", "auto/*").Output()
		got, err := exec.Command("git", "-c", gitSafe, "-C", bare, "show", "auto/hosts/hosts:go.mod").Output()
		if strings.Count(string(branches), "auto/") != 1 || err != nil || !strings.Contains(string(got), "go 1.26") {
			t.Errorf("%s: branches %q, go.mod %q (%v); want exactly one branch with go 1.26", bare, branches, got, err)
		}
	}
}
