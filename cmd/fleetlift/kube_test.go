package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/controller/controllertest"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/sandbox/kube"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

// kubeCP is the control plane of the Kubernetes sandbox tests; TestMain
// stops it.
var kubeCP kubetest.Shared

func parseWorkerFlags(t *testing.T, args ...string) *workerFlags {
	t.Helper()
	var wf workerFlags
	cmd := &cobra.Command{}
	wf.register(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return &wf
}

// --sandbox kubernetes makes the SandboxRequest provider with the
// worker's service account and nothing more; --sandbox-secret-ref gives the
// agent its secrets by reference.
func TestWorkerKubernetesSandbox(t *testing.T) {
	env := kubeCP.Env(t)
	system, sandbox := env.Install(t)
	kubeconfig := kubetest.Kubeconfig(t, env.ServiceAccountConfig(system, "fleetlift-worker"))
	t.Setenv("ANTHROPIC_API_KEY", "from this process, never sent")
	wf := parseWorkerFlags(t, "--sandbox", "kubernetes", "--kubeconfig", kubeconfig, "--sandbox-namespace", sandbox,
		"--sandbox-secret-ref", "FLEETLIFT_FORGE_TOKEN=github-credentials/token", "--sandbox-secret-ref", "ANTHROPIC_API_KEY=claude-credentials/api-key")
	var logw strings.Builder
	p, kind, err := wf.provider(context.Background(), &logw, &temporalFlags{})
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	if kind != sandboxKubernetes || !strings.Contains(logw.String(), "sandboxes: kubernetes SandboxRequests in namespace "+sandbox) {
		t.Errorf("provider %s, logged %q; want kubernetes, said", kind, logw.String())
	}
	r, ok := p.(*kube.Requests)
	if !ok || r.Name() != "kubernetes" || r.Namespace != sandbox || len(r.SecretRefs) != 2 {
		t.Errorf("provider = %#v; want kubernetes in %s with two secret references", p, sandbox)
	}
	env2, secrets, err := wf.kubeSandbox()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range secrets {
		if v != "" {
			t.Errorf("secret %s carries its value to the provider", name)
		}
	}
	if _, ok := secrets["FLEETLIFT_FORGE_TOKEN"]; !ok {
		t.Error("a --sandbox-secret-ref is not the agent's")
	}
	if env2[protocol.EnvAgentCLIEnv] != "ANTHROPIC_API_KEY" {
		t.Errorf("%s = %q; want the agent CLI's key", protocol.EnvAgentCLIEnv, env2[protocol.EnvAgentCLIEnv])
	}

	// In a namespace the worker has no Role in, it says what to install.
	wf = parseWorkerFlags(t, "--sandbox", "kubernetes", "--kubeconfig", kubeconfig, "--sandbox-namespace", system)
	if _, err := wf.kubeProvider(context.Background(), io.Discard, wf.providerName); err == nil || !strings.Contains(err.Error(), "install deploy/crds") {
		t.Errorf("provider without a Role = %v; want an error that says what to install", err)
	}
	for _, bad := range []string{"NAME", "NAME=secret", "=s/k", "N=/k"} {
		wf = parseWorkerFlags(t, "--sandbox-secret-ref", bad)
		if _, err := wf.kube.refs(); err == nil {
			t.Errorf("--sandbox-secret-ref %s accepted", bad)
		}
	}
	if _, err := newWorker(context.Background(), io.Discard, nil, &temporalFlags{}, parseWorkerFlags(t, "--sandbox", "kubernetes-pods")); err == nil || !strings.Contains(err.Error(), "want local, docker, kubernetes or kubernetes-jobs") {
		t.Errorf("--sandbox kubernetes-pods: %v", err)
	}
}

// TestRunKubernetesSandbox: `fleetlift run --sandbox kubernetes` runs a
// campaign end to end with its sandbox a pod: the worker (as its service
// account) asks for it with a SandboxRequest, the controller (as its
// own) makes the Job, a kubelet stand-in runs the pod on this machine
// (the agent in it, from the agent image), and the worker drives the
// agent through exec requests; the branch is pushed, and the worker
// leaves none of its scratch repositories in the temporary directory.
func TestRunKubernetesSandbox(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	env := kubeCP.Env(t)
	// Outside /tmp, which is the pod's own.
	root, err := os.MkdirTemp("/var/tmp", "fleetlift-kube-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	urls := demoRepos(t, root, 1)
	// The agent runs as uid 1000.
	if out, err := exec.Command("chown", "-R", "1000:1000", root).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v\n%s", err, out)
	}
	c := controllertest.New(t, env, controllertest.Options{Controller: true, HostPaths: []string{root}})
	def := writeDef(t, root, "bump.yaml", fmt.Sprintf(`version: 1
kind: Campaign
id: kube-bump
title: Bump go in a pod
template:
  execution:
    deterministic:
      image: %s
      command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]
  pull_request: {branch_prefix: auto/kube, title: Bump go}
repositories:
  - url: %s
`, controllertest.Image, urls[0]))
	addr, state := freeAddr(t), filepath.Join(t.TempDir(), "state")
	created := watchCreated(t, tmp)
	var buf syncbuf.Buffer
	code := run([]string{"run", "--file", def, "--temporal-address", addr, "--state-dir", state,
		"--sandbox", "kubernetes", "--kubeconfig", c.WorkerKubeconfig(t), "--sandbox-namespace", c.Sandbox,
		"--allow-file-root", root}, &buf, &buf)
	out := buf.String()
	if code != 0 || !strings.Contains(out, "1 repositories: 1 completed") && !strings.Contains(out, "1 repository: 1 completed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	bare := strings.TrimPrefix(urls[0], "file://")
	// The repository is uid 1000's: git checks who owns it.
	got, err := exec.Command("git", "-c", "safe.directory=*", "-C", bare, "show", "auto/kube/kube-bump:go.mod").Output()
	if err != nil || !strings.Contains(string(got), "go 1.26") {
		t.Errorf("branch auto/kube/kube-bump missing or unchanged: %v %s", err, got)
	}
	// Its copies of the repositories were in its state directory's slot,
	// where the next worker clears what one killed left, never in the
	// temporary directory.
	for _, name := range created() {
		if strings.HasPrefix(name, "fleetlift-git-") || strings.HasPrefix(name, "fleetlift-copy-") {
			t.Errorf("the worker made %s in the temporary directory, where no worker clears it after a kill", name)
		}
	}
	// (The control plane's own temporary files are there until it stops.)
	for _, name := range entries(t, tmp) {
		if strings.HasPrefix(name, "fleetlift-") {
			t.Errorf("the run left %s in its temporary directory", name)
		}
	}
	// The sandbox was a SandboxRequest, cleaned up with its Job.
	var sbrs v1alpha1.SandboxRequestList
	if err := env.Client.List(context.Background(), &sbrs, client.InNamespace(c.Sandbox)); err != nil {
		t.Fatal(err)
	}
	if len(sbrs.Items) != 0 {
		t.Errorf("%d SandboxRequests left after the run", len(sbrs.Items))
	}
	// Its Job goes with it, by the garbage collector, which may finish
	// just after the run returns.
	var jobs batchv1.JobList
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := env.Client.List(context.Background(), &jobs, client.InNamespace(c.Sandbox)); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Jobs left 30 s after the run", len(jobs.Items))
		}
	}
}
