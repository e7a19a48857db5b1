package kube_test

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/kube"
	"github.com/fleetlift/fleetlift/internal/sandbox/kube/jobspec"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

var cp kubetest.Shared

func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	os.Exit(cp.Main(m))
}

// cluster is the test's stand-in for a cluster: the API server with the
// shipped RBAC, a kubelet that runs pods on this machine, and for the
// kubernetes provider the controller, run as its service account.
type cluster struct {
	env             *kubetest.Env
	system, sandbox string
	kubelet         *kubetest.Kubelet
	refs            map[string]kube.SecretRef
}

const image = "fleetlift/sandbox:dev"

func newCluster(t *testing.T) *cluster {
	t.Helper()
	env := cp.Env(t)
	ctx := context.Background()
	c := &cluster{env: env}
	c.system, c.sandbox = env.Install(t)
	for name, key := range map[string]string{"github-credentials": "token", "claude-credentials": "test-token"} {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.sandbox},
			Data: map[string][]byte{key: []byte("value of " + name)}}); err != nil {
			t.Fatal(err)
		}
	}
	c.refs = map[string]kube.SecretRef{
		"FLEETLIFT_FORGE_TOKEN": {Secret: "github-credentials", Key: "token"},
		"FLEETLIFT_TEST_TOKEN":  {Secret: "claude-credentials", Key: "test-token"},
	}
	agent, err := kubetest.Agent()
	if err != nil {
		t.Fatal(err)
	}
	c.kubelet = &kubetest.Kubelet{Client: env.Client, Namespace: c.sandbox, Root: t.TempDir(), Agent: agent, AgentImage: jobspec.DefaultAgentImage}
	if err := c.kubelet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.kubelet.Stop()
		if err := c.kubelet.Err(); err != nil {
			t.Errorf("kubelet: %v", err)
		}
	})
	return c
}

// pod is the pod of sandbox id.
func (c *cluster) pod(t *testing.T, id string) types.NamespacedName {
	t.Helper()
	var pods corev1.PodList
	if err := c.env.Client.List(context.Background(), &pods, client.InNamespace(c.sandbox), client.MatchingLabels{jobspec.LabelSandbox: jobspec.LabelValue(id)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		}
	}
	return types.NamespacedName{}
}

// agents counts the agents running in sandbox sb's pod.
func (c *cluster) agents(t *testing.T, sb *sandbox.Sandbox) int {
	n := 0
	for _, p := range c.kubelet.Processes(c.pod(t, sb.ID), jobspec.ContainerSandbox) {
		if strings.Contains(p, "fleetlift-agent serve") {
			n++
		}
	}
	return n
}

// startController runs the controller as the shipped controller service
// account, with the kubelet as its executor.
func (c *cluster) startController(t *testing.T) {
	t.Helper()
	cfg := c.env.ServiceAccountConfig(c.system, "fleetlift-controller")
	sandboxPods, _ := labels.Parse(jobspec.LabelComponent + "=" + jobspec.ComponentValue)
	yes := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 c.env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &yes},
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{c.sandbox: {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: sandboxPods}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mem, cpu := resource.MustParse("1Gi"), resource.MustParse("1")
	if _, err := controller.Setup(mgr, controller.Options{
		Policy: controller.Policy{Images: []string{"fleetlift/sandbox:*"}, Secrets: []string{"github-credentials", "claude-credentials"}},
		Backend: &controller.Jobs{Client: mgr.GetClient(), Live: mgr.GetAPIReader(),
			Pod: jobspec.Config{ServeArgs: []string{"--isolation", "none"}}},
		Executor:   c.kubelet,
		Defaults:   v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem, CPU: &cpu}},
		Registerer: prometheus.NewRegistry(),
		Workers:    8,
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// The kubernetes provider, as the worker's service account (the
// sandboxrequests Role alone), against the controller (as its service
// account) and a kubelet that runs the pods on this machine: the whole
// conformance suite.
func TestRequestsConformance(t *testing.T) {
	c := newCluster(t)
	c.startController(t)
	worker := c.env.ServiceAccountClient(t, c.system, "fleetlift-worker")
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			return &kube.Requests{Client: worker, Namespace: c.sandbox, Image: image, SecretRefs: c.refs}
		},
		Options: func(t *testing.T, id string) sandbox.ProvisionOptions {
			return sandbox.ProvisionOptions{Image: image}
		},
		Agents: c.agents,
	})
}

// The kubernetes-jobs provider, as the worker's service account with the
// shipped worker-jobs Role, execing through the kubelet.
func TestJobsConformance(t *testing.T) {
	c := newCluster(t)
	c.env.Apply(t, map[string]string{"fleetlift-system": c.system, "sandbox-isolated": c.sandbox}, "deploy/base/kubernetes/rbac/worker-jobs.yaml")
	worker := c.env.ServiceAccountClient(t, c.system, "fleetlift-worker")
	mem, cpu := resource.MustParse("1Gi"), resource.MustParse("1")
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			return &kube.Jobs{Client: worker, Executor: c.kubelet, Namespace: c.sandbox, Image: image, SecretRefs: c.refs,
				Pod:      jobspec.Config{ServeArgs: []string{"--isolation", "none"}},
				Defaults: v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem, CPU: &cpu}},
				Poll:     20e6}
		},
		Options: func(t *testing.T, id string) sandbox.ProvisionOptions {
			return sandbox.ProvisionOptions{Image: image}
		},
		Agents: c.agents,
	})
}
