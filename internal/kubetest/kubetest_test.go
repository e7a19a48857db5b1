package kubetest_test

import (
	"context"
	"os"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetlift/fleetlift/internal/kubetest"
)

var cp kubetest.Shared

func TestMain(m *testing.M) { os.Exit(cp.Main(m)) }

// The control plane authorizes with RBAC: a service account without
// bindings may do nothing, the administrator everything.
func TestRBACIsOn(t *testing.T) {
	env := cp.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "rbac", nil)
	review := func(t *testing.T, cs *kubernetes.Clientset) bool {
		t.Helper()
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: "create", Group: "batch", Resource: "jobs",
			}},
		}, metav1CreateOptions)
		if err != nil {
			t.Fatalf("self subject access review: %v", err)
		}
		return r.Status.Allowed
	}
	admin := kubernetes.NewForConfigOrDie(env.Config)
	if !review(t, admin) {
		t.Error("the administrator may not create Jobs")
	}
	nobody := kubernetes.NewForConfigOrDie(env.ServiceAccountConfig(ns, "nobody"))
	if review(t, nobody) {
		t.Error("a service account without bindings may create Jobs: RBAC is not enforcing")
	}
}

// Missing binaries are an error that names the make target.
func TestAssetsMissing(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	_, err := kubetest.Assets("")
	if err == nil || !contains(err.Error(), kubetest.MakeTarget) {
		t.Errorf("Assets of an empty directory = %v; want an error naming %q", err, kubetest.MakeTarget)
	}
}
