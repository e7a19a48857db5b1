package main

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/sandbox/kube"
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
// worker's service account and nothing more; --sandbox-secret gives the
// agent its secrets by reference.
func TestWorkerKubernetesSandbox(t *testing.T) {
	env := kubeCP.Env(t)
	system, sandbox := env.Install(t)
	kubeconfig := kubetest.Kubeconfig(t, env.ServiceAccountConfig(system, "fleetlift-worker"))
	t.Setenv("ANTHROPIC_API_KEY", "from this process, never sent")
	wf := parseWorkerFlags(t, "--sandbox", "kubernetes", "--kubeconfig", kubeconfig, "--sandbox-namespace", sandbox,
		"--sandbox-secret", "FLEETLIFT_FORGE_TOKEN=github-credentials/token", "--sandbox-secret", "ANTHROPIC_API_KEY=claude-credentials/api-key")
	p, err := wf.kube.provider(context.Background(), wf.sandboxKind, wf.isolation)
	if err != nil {
		t.Fatalf("provider: %v", err)
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
		t.Error("a --sandbox-secret is not the agent's")
	}
	if env2[agent.EnvAgentCLIEnv] != "ANTHROPIC_API_KEY" {
		t.Errorf("%s = %q; want the agent CLI's key", agent.EnvAgentCLIEnv, env2[agent.EnvAgentCLIEnv])
	}

	// In a namespace the worker has no Role in, it says what to install.
	wf = parseWorkerFlags(t, "--sandbox", "kubernetes", "--kubeconfig", kubeconfig, "--sandbox-namespace", system)
	if _, err := wf.kube.provider(context.Background(), wf.sandboxKind, wf.isolation); err == nil || !strings.Contains(err.Error(), "install deploy/crds") {
		t.Errorf("provider without a Role = %v; want an error that says what to install", err)
	}
	for _, bad := range []string{"NAME", "NAME=secret", "=s/k", "N=/k"} {
		wf = parseWorkerFlags(t, "--sandbox-secret", bad)
		if _, err := wf.kube.refs(); err == nil {
			t.Errorf("--sandbox-secret %s accepted", bad)
		}
	}
	if _, err := newWorker(nil, &temporalFlags{}, parseWorkerFlags(t, "--sandbox", "kubernetes-pods")); err == nil || !strings.Contains(err.Error(), "want local, kubernetes or kubernetes-jobs") {
		t.Errorf("--sandbox kubernetes-pods: %v", err)
	}
}
