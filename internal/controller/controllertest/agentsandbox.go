package controllertest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	agentscontrollers "sigs.k8s.io/agent-sandbox/controllers"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	extcontrollers "sigs.k8s.io/agent-sandbox/extensions/controllers"
	"sigs.k8s.io/agent-sandbox/extensions/controllers/queue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/kubetest"
)

// Pool is the SandboxWarmPool (and its SandboxTemplate) that serves
// Image when the cluster runs agent-sandbox.
const Pool = "sandbox"

// startAgentSandbox runs kubernetes-sigs/agent-sandbox's own controllers
// (the Sandbox, SandboxClaim, SandboxTemplate and SandboxWarmPool
// reconcilers of the version in go.mod, wired as its
// agent-sandbox-controller command wires them) for the sandbox
// namespace, the garbage collector their owner references rely on, and
// installs, as an administrator would, the template and warm pool that
// serve Image with creds (controller.Template).
func (c *Cluster) startAgentSandbox(t testing.TB, creds []v1alpha1.Credential) {
	t.Helper()
	ctx := context.Background()
	c.Env.Apply(t, map[string]string{"fleetlift-system": c.System, "sandbox-isolated": c.Sandbox},
		"deploy/base/kubernetes/rbac/controller-agent-sandbox.yaml")

	gc := &kubetest.Collector{Client: c.Env.Client, Namespace: c.Sandbox, Kinds: []schema.GroupVersionKind{
		v1alpha1.GroupVersion.WithKind("SandboxRequest"),
		extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxClaimKind),
		extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxWarmPoolKind),
		extv1beta1.GroupVersion.WithKind(extv1beta1.SandboxTemplateKind),
		agentsv1beta1.GroupVersion.WithKind("Sandbox"),
		corev1.SchemeGroupVersion.WithKind("Pod"),
		corev1.SchemeGroupVersion.WithKind("Service"),
	}}
	gc.Start(ctx)
	t.Cleanup(gc.Stop)

	// As cmd/agent-sandbox-controller's buildCacheOptions: managed
	// fields stripped, pods cached without their spec.
	pod := &corev1.Pod{}
	yes := true
	mgr, err := ctrl.NewManager(c.Env.Config, ctrl.Options{
		Scheme:                 c.Env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &yes},
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{c.Sandbox: {}},
			DefaultTransform:  cache.TransformStripManagedFields(),
			ByObject:          map[client.Object]cache.ByObject{pod: {Transform: agentscontrollers.PodCacheTransform}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&agentscontrollers.SandboxReconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("sandbox-controller"), Tracer: noTracing{},
		ClusterDomain: "cluster.local",
	}).SetupWithManager(mgr, 4); err != nil {
		t.Fatal(err)
	}
	if err := (&extcontrollers.SandboxClaimReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		WarmSandboxQueue: queue.NewSimpleSandboxQueue(),
		Recorder:         mgr.GetEventRecorder("sandboxclaim-controller"), Tracer: noTracing{},
	}).SetupWithManager(mgr, 4); err != nil {
		t.Fatal(err)
	}
	if err := (&extcontrollers.SandboxTemplateReconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("sandboxtemplate-controller"), Tracer: noTracing{},
	}).SetupWithManager(mgr, 1); err != nil {
		t.Fatal(err)
	}
	if err := (&extcontrollers.SandboxWarmPoolReconciler{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(), MaxBatchSize: 300,
		Recorder:             mgr.GetEventRecorder("sandboxwarmpool-controller"),
		ReadinessGracePeriod: extcontrollers.DefaultWarmPoolReadinessGracePeriod,
	}).SetupWithManager(mgr, 1); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mctx); err != nil {
			t.Errorf("agent-sandbox manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	tpl, wp := controller.Template(PodConfig(), c.Sandbox, Pool, Image, creds, Defaults(), 2)
	for _, o := range []client.Object{tpl, wp} {
		if err := c.Env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
}

// noTracing is agent-sandbox's tracing turned off (its no-op
// instrumenter is in an internal package).
type noTracing struct{}

func (noTracing) StartSpan(ctx context.Context, _ metav1.Object, _ string, _ map[string]string) (context.Context, func()) {
	return ctx, func() {}
}
func (noTracing) GetTraceContext(context.Context) string              { return "" }
func (noTracing) AddEvent(context.Context, string, map[string]string) {}
func (noTracing) IsRecording(context.Context) bool                    { return false }
