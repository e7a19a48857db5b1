package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Kubernetes sandbox pods reach the egress proxy only through their
// worker's gateway: --sandbox-egress with --sandbox kubernetes or
// kubernetes-jobs and no --gateway-listen and --gateway-url is refused
// before the worker starts, with a message naming the flags to add
// (nothing is dialled: the cluster's address leads nowhere). With them,
// the gateway serves the proxy.
func TestKubernetesEgressNeedsTheGateway(t *testing.T) {
	// A cluster that is not there: the flags are refused before it
	// would be asked anything.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: not-a-token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{sandboxKubernetes, sandboxKubernetesJobs} {
		t.Run(kind, func(t *testing.T) {
			wf := parseWorkerFlags(t, "--sandbox", kind, "--kubeconfig", kubeconfig, "--sandbox-egress", "registry.npmjs.org")
			p, _, err := wf.provider(context.Background(), io.Discard, &temporalFlags{stateDir: t.TempDir()})
			if err == nil {
				t.Fatalf("--sandbox %s --sandbox-egress without the gateway flags: provider %T; want it refused", kind, p)
			}
			for _, says := range []string{"--sandbox-egress", "needs --gateway-listen and --gateway-url", "through this worker's gateway"} {
				if !strings.Contains(err.Error(), says) {
					t.Errorf("error %q does not say %q", err, says)
				}
			}
		})
	}

	t.Run("with the gateway flags", func(t *testing.T) {
		wf := parseWorkerFlags(t, "--sandbox", sandboxKubernetesJobs, "--sandbox-egress", "registry.npmjs.org",
			"--gateway-listen", "127.0.0.1:0", "--gateway-url", "http://10.1.2.3:8090")
		gw, err := wf.kubeGateway(io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if gw == nil || gw.Gateway.Egress == nil {
			t.Errorf("gateway %+v; want one serving the egress proxy", gw)
		}
	})
}
