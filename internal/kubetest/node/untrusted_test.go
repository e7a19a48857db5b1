package node_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/kubetest/node"
	"github.com/fleetlift/fleetlift/internal/podexec"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/kube"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

// untrustedWork runs the untrusted-work suite against the
// kubernetes-jobs provider as a worker runs it on this node: the worker's
// service account makes the Jobs and execs into their pods through the
// API server and the kubelet; the pods run the sandbox image with the
// agent jailing the work (the shipped seccomp profile, pods in user
// namespaces of their own); their token comes from a Secret; and they
// reach nothing but the worker's gateway, served on the host's address
// on the pods' bridge, through which the agent clones the repositories
// (which are on this host, where no pod sees them) and calls the model.
func untrustedWork(t *testing.T, n *node.Node) {
	system, ns := n.Env.Install(t)
	jailNamespace(t, n, ns)
	n.Env.Apply(t, map[string]string{"fleetlift-system": system, "sandbox-isolated": ns}, "deploy/base/kubernetes/rbac/worker-jobs.yaml")
	const secretToken = "node-secret-token-canary-0123456789"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-credentials", Namespace: ns},
		StringData: map[string]string{"token": secretToken}}
	if err := n.Env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	cfg := n.Env.ServiceAccountConfig(system, "fleetlift-worker")
	worker := n.Env.ServiceAccountClient(t, system, "fleetlift-worker")
	execer, err := podexec.NewRemote(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The repositories are on this host, under a root the gateway serves
	// from and the worker pushes to.
	root := t.TempDir()
	token := kube.SecretRef{Secret: "github-credentials", Key: "token"}
	// A quarter of a processor each: the suite keeps up to five
	// sandboxes at once on this node of two.
	mem, cpu := resource.MustParse("512Mi"), resource.MustParse("250m")
	newProvider := func(t *testing.T, gw *gateway.Gateway) sandbox.Provider {
		if gw.Git == nil {
			gw.Git = &gateway.GitReads{Git: &git.Git{Env: gittest.Env()}}
		}
		gw.Git.FileRoots = []string{root}
		return &kube.Jobs{Client: worker, Executor: execer, Namespace: ns, Image: sandboxImage,
			Pod: jobspec.Config{AgentImage: agentImage, ManagedBy: "fleetlift-worker", ImagePullPolicy: corev1.PullNever,
				ServeArgs:               []string{"--isolation", "namespaces", "--manifest-poll", "20ms"},
				SeccompLocalhostProfile: seccompLocalhost, UserNamespaces: true},
			Defaults: v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem, CPU: &cpu}},
			Poll:     20 * time.Millisecond, Gateway: serveOnBridge(t, n, gw),
			SecretRefs: map[string]kube.SecretRef{"FLEETLIFT_FORGE_TOKEN": token, "FLEETLIFT_GIT_TOKEN": token, "GITHUB_TOKEN": token}}
	}
	sandboxtest.RunUntrusted(t, sandboxtest.UntrustedHarness{
		// The pods see none of this host's files.
		Hidden:      t.TempDir(),
		SecretValue: secretToken,
		New:         func(t *testing.T) sandbox.Provider { return newProvider(t, &gateway.Gateway{}) },
		NewWithGateway: func(t *testing.T, gw *gateway.Gateway) sandbox.Provider {
			return newProvider(t, gw)
		},
		NewWithEgress: func(t *testing.T, h http.Handler) sandbox.Provider {
			return newProvider(t, &gateway.Gateway{Egress: h})
		},
		// The sandbox image's curl, as an agent CLI.
		ModelCLI: sandboxtest.CurlModelCLI,
		Options: func(t *testing.T, id string) sandbox.ProvisionOptions {
			return sandbox.ProvisionOptions{ID: id, Image: sandboxImage,
				// The worker pushes from this host's root; the agent
				// in its pod clones through the gateway.
				Env: map[string]string{"FLEETLIFT_ALLOW_FILE_ROOTS": root}}
		},
		Repository: func(t *testing.T) (string, func(branch, path string) string) {
			dir, err := os.MkdirTemp(root, "repo-")
			if err != nil {
				t.Fatal(err)
			}
			bare := gittest.NewRemote(t, dir, "svc", map[string]string{"README.md": "# svc\n"})
			return "file://" + bare, gittest.Show(bare)
		},
	})
}

// jailNamespace readies the sandbox namespace ns for pods whose agent
// jails the work: the shipped seccomp profile installed where the kubelet
// reads it, and Pod Security's baseline enforced (restricted refuses the
// unmasked /proc the jail needs, even in a user-namespaced pod).
func jailNamespace(t *testing.T, n *node.Node, ns string) {
	t.Helper()
	installProfile(t, n)
	var obj corev1.Namespace
	ctx := context.Background()
	if err := n.Env.Client.Get(ctx, client.ObjectKey{Name: ns}, &obj); err != nil {
		t.Fatal(err)
	}
	obj.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	obj.Labels["pod-security.kubernetes.io/warn"] = "restricted"
	if err := n.Env.Client.Update(ctx, &obj); err != nil {
		t.Fatal(err)
	}
}

// serveOnBridge serves gw as a worker does to its sandbox pods, on the
// host's address on the pods' bridge.
func serveOnBridge(t *testing.T, n *node.Node, gw *gateway.Gateway) *kube.Gateway {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(n.HostIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return &kube.Gateway{Gateway: gw, URL: "http://" + ln.Addr().String()}
}
