package controller_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/jobspec"
)

// claimsFixture runs the controller with the agent-sandbox backend, the
// warm pool "go" serving fleetlift/sandbox:dev from its template, made by
// controller.Template with the fixture's credential.
func claimsFixture(t *testing.T) (*fixture, *extv1beta1.SandboxTemplate) {
	t.Helper()
	f := newFixtureWith(t, defaultPolicy(), func(mgr ctrl.Manager) controller.Backend {
		return &controller.Claims{Client: mgr.GetClient(), Live: mgr.GetAPIReader(),
			Pools: map[string]string{"fleetlift/sandbox:dev": "go"}, LifetimeSeconds: 3600}
	})
	mem := resource.MustParse("2Gi")
	tpl, pool := controller.Template(jobspec.Config{}, f.ns, "go", "fleetlift/sandbox:dev",
		[]v1alpha1.Credential{{Name: "github-credentials", EnvVar: "FLEETLIFT_GIT_TOKEN", SecretKey: "token"}},
		v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem}}, 2)
	for _, o := range []client.Object{tpl, pool} {
		if err := f.c.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	return f, tpl
}

// claim reads the request's claim.
func (f *fixture) claim(sbr *v1alpha1.SandboxRequest) *extv1beta1.SandboxClaim {
	f.t.Helper()
	var c extv1beta1.SandboxClaim
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: sbr.Status.ClaimName}, &c); err != nil {
		f.t.Fatalf("get the claim: %v", err)
	}
	return &c
}

// bind plays agent-sandbox's controller: a Sandbox from the warm pool,
// its pod (adopted, so named otherwise), and the claim's status naming
// it. The pod is admitted under restricted Pod Security.
func (f *fixture) bind(claim *extv1beta1.SandboxClaim, tpl *extv1beta1.SandboxTemplate) *corev1.Pod {
	f.t.Helper()
	ctx := context.Background()
	podName := "go-warm-" + name("p")
	sb := &agentsv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "go-" + name("sb"), Namespace: f.ns,
			Annotations: map[string]string{agentsv1beta1.SandboxPodNameAnnotation: podName}},
		Spec: agentsv1beta1.SandboxSpec{SandboxBlueprint: tpl.Spec.SandboxBlueprint},
	}
	if err := f.c.Create(ctx, sb); err != nil {
		f.t.Fatalf("create the Sandbox: %v", err)
	}
	// The pod is the Sandbox's, with the template's labels: agent-sandbox
	// keeps its own (the claim's uid among them) off pods.
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: f.ns, Labels: tpl.Spec.PodTemplate.ObjectMeta.Labels, Annotations: tpl.Spec.PodTemplate.ObjectMeta.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: "Sandbox", Name: sb.Name, UID: sb.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: *tpl.Spec.PodTemplate.Spec.DeepCopy(),
	}
	if err := f.c.Create(ctx, pod); err != nil {
		f.t.Fatalf("create the pod of the template: %v", err)
	}
	claim.Status.SandboxStatus.Name = sb.Name
	claim.Status.Conditions = []metav1.Condition{{Type: string(agentsv1beta1.SandboxConditionReady), Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	if err := f.c.Status().Update(ctx, claim); err != nil {
		f.t.Fatalf("write the claim's status: %v", err)
	}
	return pod
}

func TestClaims(t *testing.T) {
	f, tpl := claimsFixture(t)
	sbr := f.request("claimed")
	got := f.phase(sbr.Name, v1alpha1.PhaseProvisioning)
	if got.Status.ClaimName == "" || got.Status.JobName != "" {
		t.Fatalf("status names claim %q and Job %q; want a claim only", got.Status.ClaimName, got.Status.JobName)
	}
	claim := f.claim(got)
	if ref := metav1.GetControllerOf(claim); ref == nil || ref.UID != got.UID {
		t.Errorf("the claim's controller = %+v; want the request", ref)
	}
	if claim.Spec.WarmPoolRef.Name != "go" || claim.Spec.Lifecycle == nil || claim.Spec.Lifecycle.ShutdownTime == nil {
		t.Errorf("claim spec = %+v; want the warm pool go and a shutdown time", claim.Spec)
	}
	// The request's variable and where the controller lets the clone
	// token go, for the sandbox container.
	if len(claim.Spec.Env) != 2 || claim.Spec.Env[0].Name != "FLEETLIFT_GIT_TOKEN_ORIGINS" || claim.Spec.Env[0].Value != "https://git.example.com" ||
		claim.Spec.Env[1].Name != "GOPROXY" || claim.Spec.Env[0].ContainerName != jobspec.ContainerSandbox || claim.Spec.Env[1].ContainerName != jobspec.ContainerSandbox {
		t.Errorf("claim env = %+v; want the request's variable and the controller's token origins, for the sandbox container", claim.Spec.Env)
	}
	for _, e := range claim.Spec.Env {
		if e.Name == "FLEETLIFT_GIT_TOKEN" || strings.Contains(e.Value, "token") {
			t.Errorf("the claim carries the credential %s", e.Name)
		}
	}
	f.waitEvent(sbr.Name, "SandboxClaimCreated")

	pod := f.bind(claim, tpl)
	f.running(pod)
	got = f.phase(sbr.Name, v1alpha1.PhaseRunning)
	if got.Status.PodName != pod.Name {
		t.Errorf("pod %q; want the adopted pod %s", got.Status.PodName, pod.Name)
	}
	f.execRequest(sbr.Name, v1alpha1.ExecRequest{ID: "x", Command: []string{"echo", "in", "the", "claim"}})
	if r := f.result(sbr.Name, "x"); r.Stdout != "echo in the claim" || r.Error != "" {
		t.Errorf("exec = %+v", r)
	}
	f.setPod(pod, corev1.PodFailed, nil, exited(jobspec.ContainerSandbox, 137, "OOMKilled"))
	got = f.phase(sbr.Name, v1alpha1.PhaseFailed)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Reason != v1alpha1.ReasonOOMKilled {
		t.Errorf("Stalled = %+v; want OOMKilled", c)
	}

	// Deleting the request deletes the claim.
	if err := f.c.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool {
		var c extv1beta1.SandboxClaim
		err := f.c.Get(context.Background(), client.ObjectKeyFromObject(claim), &c)
		return apierrors.IsNotFound(err) || err == nil && c.DeletionTimestamp != nil
	}) {
		t.Error("the claim outlived its request")
	}
}

// A claim that expires (its shutdown time passed) is a deadline.
func TestClaimExpired(t *testing.T) {
	f, _ := claimsFixture(t)
	sbr := f.request("expires")
	claim := f.claim(f.phase(sbr.Name, v1alpha1.PhaseProvisioning))
	claim.Status.Conditions = []metav1.Condition{{Type: string(agentsv1beta1.SandboxConditionReady), Status: metav1.ConditionFalse, Reason: extv1beta1.ClaimExpiredReason, Message: "shutdown time reached", LastTransitionTime: metav1.Now()}}
	if err := f.c.Status().Update(context.Background(), claim); err != nil {
		t.Fatal(err)
	}
	got := f.phase(sbr.Name, v1alpha1.PhaseFailed)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Reason != v1alpha1.ReasonDeadlineExceeded {
		t.Errorf("Stalled = %+v; want DeadlineExceeded", c)
	}
}

// Requests the warm pools cannot serve fail at once, saying why.
func TestClaimsUnservable(t *testing.T) {
	f, _ := claimsFixture(t)
	for _, c := range []struct {
		name, want string
		mutate     func(*v1alpha1.SandboxRequest)
	}{
		{"no pool", "no warm pool serves image registry.example.com/tools/go:1", func(s *v1alpha1.SandboxRequest) { s.Spec.Image = "registry.example.com/tools/go:1" }},
		{"credential", "does not give ANTHROPIC_API_KEY from Secret claude-credentials key api-key", func(s *v1alpha1.SandboxRequest) {
			s.Spec.Credentials = append(s.Spec.Credentials, v1alpha1.Credential{Name: "claude-credentials", EnvVar: "ANTHROPIC_API_KEY", SecretKey: "api-key"})
		}},
	} {
		n := name("unservable")
		f.request(n, c.mutate)
		got := f.phase(n, v1alpha1.PhaseFailed)
		stalled := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)
		if stalled == nil || stalled.Reason != v1alpha1.ReasonBackendFailed || !strings.Contains(got.Status.Message, c.want) {
			t.Errorf("%s: Stalled %+v, message %q; want BackendFailed saying %q", c.name, stalled, got.Status.Message, c.want)
		}
	}
}
