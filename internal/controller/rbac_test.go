package controller_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
)

// The shipped RBAC (deploy/base/kubernetes/rbac), loaded onto the API server
// and exercised by impersonating its service accounts: the worker may
// only ask for sandboxes; the controller may do what sandboxes need; the
// sandbox may do nothing.
func TestRBAC(t *testing.T) {
	env := cp.Env(t)
	ctx := context.Background()
	system, sandbox := env.Install(t)
	for name, key := range map[string]string{"github-credentials": "token", "other-secret": "x"} {
		env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sandbox}, Data: map[string][]byte{key: []byte("v")}})
	}

	type access struct {
		verb, group, resource, sub, name, ns string
	}
	can := func(t *testing.T, sa string, a access) bool {
		t.Helper()
		cs := kubernetes.NewForConfigOrDie(env.ServiceAccountConfig(system, sa))
		if a.ns == "" {
			a.ns = sandbox
		}
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Name: a.name,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("access review: %v", err)
		}
		return r.Status.Allowed
	}
	sbrs := func(verb string) access {
		return access{verb: verb, group: "fleetlift.io", resource: "sandboxrequests"}
	}
	for _, c := range []struct {
		sa      string
		a       access
		allowed bool
	}{
		{"fleetlift-worker", sbrs("create"), true},
		{"fleetlift-worker", sbrs("get"), true},
		{"fleetlift-worker", sbrs("watch"), true},
		{"fleetlift-worker", sbrs("patch"), true},
		{"fleetlift-worker", sbrs("delete"), true},
		{"fleetlift-worker", access{verb: "patch", group: "fleetlift.io", resource: "sandboxrequests", sub: "status"}, false},
		{"fleetlift-worker", access{verb: "create", group: "batch", resource: "jobs"}, false},
		{"fleetlift-worker", access{verb: "create", resource: "pods"}, false},
		{"fleetlift-worker", access{verb: "list", resource: "pods"}, false},
		{"fleetlift-worker", access{verb: "create", resource: "pods", sub: "exec"}, false},
		{"fleetlift-worker", access{verb: "get", resource: "pods", sub: "exec"}, false},
		{"fleetlift-worker", access{verb: "get", resource: "secrets", name: "github-credentials"}, false},
		{"fleetlift-worker", access{verb: "create", group: "fleetlift.io", resource: "sandboxrequests", ns: system}, false},

		{"fleetlift-controller", access{verb: "create", group: "batch", resource: "jobs"}, true},
		{"fleetlift-controller", access{verb: "delete", group: "batch", resource: "jobs"}, true},
		{"fleetlift-controller", access{verb: "watch", resource: "pods"}, true},
		{"fleetlift-controller", access{verb: "create", resource: "pods", sub: "exec"}, true},
		{"fleetlift-controller", access{verb: "get", resource: "pods", sub: "log"}, true},
		{"fleetlift-controller", access{verb: "get", resource: "secrets", name: "github-credentials"}, true},
		{"fleetlift-controller", access{verb: "get", resource: "secrets", name: "other-secret"}, false},
		{"fleetlift-controller", access{verb: "list", resource: "secrets"}, false},
		{"fleetlift-controller", access{verb: "patch", group: "fleetlift.io", resource: "sandboxrequests", sub: "status"}, true},
		{"fleetlift-controller", access{verb: "create", group: "events.k8s.io", resource: "events"}, true},
		{"fleetlift-controller", access{verb: "list", resource: "events"}, true},
		{"fleetlift-controller", access{verb: "list", resource: "events", ns: system}, false},
		{"fleetlift-controller", access{verb: "create", group: "coordination.k8s.io", resource: "leases", ns: system}, true},
		{"fleetlift-controller", access{verb: "create", resource: "pods"}, false},
		{"fleetlift-controller", access{verb: "create", group: "batch", resource: "jobs", ns: system}, false},
		{"fleetlift-controller", access{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings"}, false},
	} {
		if got := can(t, c.sa, c.a); got != c.allowed {
			t.Errorf("%s may %s %s %s/%s %s in %s: %v; want %v", c.sa, c.a.verb, c.a.group, c.a.resource, c.a.sub, c.a.name, c.a.ns, got, c.allowed)
		}
	}
	// The sandbox's service account may do no more than one nobody bound
	// (what every authenticated user may: review its own access).
	rules := func(sa string) []string {
		cs := kubernetes.NewForConfigOrDie(env.ServiceAccountConfig(sandbox, sa))
		r, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: sandbox}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, rule := range r.Status.ResourceRules {
			out = append(out, fmt.Sprint(rule.Verbs, rule.APIGroups, rule.Resources, rule.ResourceNames))
		}
		slices.Sort(out)
		return out
	}
	if got, nobody := rules(jobspec.DefaultServiceAccount), rules("nobody"); !slices.Equal(got, nobody) {
		t.Errorf("the sandbox's service account may %q; want only what everyone may, %q", got, nobody)
	}

	// And for real: the worker makes a request, and is refused a Job and
	// a Secret.
	worker := env.ServiceAccountClient(t, system, "fleetlift-worker")
	sbr := &v1alpha1.SandboxRequest{ObjectMeta: metav1.ObjectMeta{Name: "by-worker", Namespace: sandbox},
		Spec: v1alpha1.SandboxRequestSpec{TaskID: "t", Image: "fleetlift/sandbox:dev"}}
	if err := worker.Create(ctx, sbr); err != nil {
		t.Errorf("the worker cannot create a SandboxRequest: %v", err)
	}
	job := jobspec.Config{}.Job(jobspec.Sandbox{Name: "by-worker", Namespace: sandbox, ID: "x", TaskID: "t", Image: "fleetlift/sandbox:dev"})
	if err := worker.Create(ctx, job); !apierrors.IsForbidden(err) {
		t.Errorf("the worker creating a Job: %v; want Forbidden", err)
	}
	if err := worker.Get(ctx, client.ObjectKey{Namespace: sandbox, Name: "github-credentials"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the worker reading a Secret: %v; want Forbidden", err)
	}
	sbr.Status.Phase = v1alpha1.PhaseRunning
	if err := worker.Status().Update(ctx, sbr); !apierrors.IsForbidden(err) {
		t.Errorf("the worker writing a status: %v; want Forbidden", err)
	}
	if err := worker.Delete(ctx, sbr); err != nil {
		t.Errorf("the worker cannot delete its SandboxRequest: %v", err)
	}
	controller := env.ServiceAccountClient(t, system, "fleetlift-controller")
	if err := controller.Create(ctx, job.DeepCopy()); err != nil {
		t.Errorf("the controller cannot create a Job: %v", err)
	}
	var secret corev1.Secret
	if err := controller.Get(ctx, client.ObjectKey{Namespace: sandbox, Name: "github-credentials"}, &secret); err != nil {
		t.Errorf("the controller cannot read the allowed Secret: %v", err)
	}
	if err := controller.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: sandbox}}); err != nil {
		t.Errorf("the controller cannot delete its Job: %v", err)
	}
}
