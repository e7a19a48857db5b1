package controllertest

import (
	"context"
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
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/kubetest"
)

// Image is the task image the cluster allows.
const Image = "fleetlift/sandbox:dev"

// Secrets are the Secrets every cluster has, by name and key, and the
// values they hold.
var Secrets = map[string]map[string]string{
	"github-credentials": {"token": "value of github-credentials"},
	"claude-credentials": {"test-token": "value of claude-credentials"},
}

// Cluster is the stand-in cluster.
type Cluster struct {
	Env *kubetest.Env
	// System and Sandbox are the namespaces in place of
	// fleetlift-system and sandbox-isolated.
	System, Sandbox string
	Kubelet         *kubetest.Kubelet
}

// Options configure New.
type Options struct {
	// Controller, when true, runs the controller.
	Controller bool
	// HostPaths are the kubelet's (see kubetest.Kubelet).
	HostPaths []string
	// AgentSandbox, when true, runs kubernetes-sigs/agent-sandbox's
	// controllers with a warm pool (Pool) serving Image, and the
	// controller, if it runs, with the agent-sandbox backend.
	AgentSandbox bool
	// PoolCredentials are the credentials the warm pool's template
	// gives its pods (the administrator's choice; claims cannot add
	// any).
	PoolCredentials []v1alpha1.Credential
}

// New makes the cluster; everything stops when the test ends.
func New(t testing.TB, env *kubetest.Env, o Options) *Cluster {
	t.Helper()
	ctx := context.Background()
	c := &Cluster{Env: env}
	c.System, c.Sandbox = env.Install(t)
	for name, data := range Secrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Sandbox}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	agent, err := kubetest.Agent()
	if err != nil {
		t.Fatal(err)
	}
	c.Kubelet = &kubetest.Kubelet{Client: env.Client, Namespace: c.Sandbox, Root: t.TempDir(), Agent: agent,
		AgentImage: jobspec.DefaultAgentImage, HostPaths: o.HostPaths}
	if err := c.Kubelet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Kubelet.Stop()
		if err := c.Kubelet.Err(); err != nil {
			t.Errorf("kubelet: %v", err)
		}
	})
	if o.AgentSandbox {
		c.startAgentSandbox(t, o.PoolCredentials)
	}
	if o.Controller {
		c.startController(t, o.AgentSandbox)
	}
	return c
}

// PodConfig is the pod configuration of the cluster's sandboxes: the
// agent unjailed (the container runtime's profiles would refuse its
// namespaces; the agent is non-dumpable instead).
func PodConfig() jobspec.Config {
	return jobspec.Config{ServeArgs: []string{"--isolation", "none"}}
}

// Defaults are the sandbox container's resources.
func Defaults() v1alpha1.Resources {
	mem, cpu := resource.MustParse("1Gi"), resource.MustParse("1")
	return v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem, CPU: &cpu}}
}

// startController runs the controller as the shipped controller service
// account, with the kubelet as its executor; claims, when true, backs
// requests with SandboxClaims on Pool.
func (c *Cluster) startController(t testing.TB, claims bool) {
	t.Helper()
	cfg := c.Env.ServiceAccountConfig(c.System, "fleetlift-controller")
	sandboxPods, err := labels.Parse(jobspec.LabelComponent + "=" + jobspec.ComponentValue)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 c.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &yes},
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{c.Sandbox: {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: sandboxPods}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var backend controller.Backend = &controller.Jobs{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pod: PodConfig()}
	if claims {
		backend = &controller.Claims{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pools: map[string]string{Image: Pool}}
	}
	if _, err := controller.Setup(mgr, controller.Options{
		Policy:     controller.Policy{Images: []string{"fleetlift/sandbox:*"}, Secrets: []string{"github-credentials", "claude-credentials"}},
		Backend:    backend,
		Executor:   c.Kubelet,
		Defaults:   Defaults(),
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

// Pod is the running pod of sandbox id, or a zero name: the pod labelled
// with id, or else (a warm pool's pod, labelled for its pool) the pod the
// SandboxRequest id names.
func (c *Cluster) Pod(t testing.TB, id string) types.NamespacedName {
	t.Helper()
	var sbr v1alpha1.SandboxRequest
	if err := c.Env.Client.Get(context.Background(), types.NamespacedName{Namespace: c.Sandbox, Name: id}, &sbr); err == nil && sbr.Status.ClaimName != "" {
		if sbr.Status.PodName == "" {
			return types.NamespacedName{}
		}
		return types.NamespacedName{Namespace: c.Sandbox, Name: sbr.Status.PodName}
	}
	var pods corev1.PodList
	if err := c.Env.Client.List(context.Background(), &pods, client.InNamespace(c.Sandbox), client.MatchingLabels{jobspec.LabelSandbox: jobspec.LabelValue(id)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		}
	}
	return types.NamespacedName{}
}

// Worker is a client as the shipped worker service account.
func (c *Cluster) Worker(t testing.TB) client.WithWatch {
	return c.Env.ServiceAccountClient(t, c.System, "fleetlift-worker")
}

// WorkerKubeconfig is a kubeconfig file for the worker service account.
func (c *Cluster) WorkerKubeconfig(t testing.TB) string {
	return kubetest.Kubeconfig(t, c.Env.ServiceAccountConfig(c.System, "fleetlift-worker"))
}
