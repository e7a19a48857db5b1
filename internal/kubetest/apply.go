package kubetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Apply creates the objects of YAML files under the repository root (such
// as deploy/base/kubernetes/rbac/worker.yaml), with the namespaces rename
// names renamed, in objects and in RoleBinding subjects, so that each
// test has its own. Namespace objects are left out.
func (e *Env) Apply(t testing.TB, rename map[string]string, files ...string) {
	t.Helper()
	var objs []unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(e.Root, f))
		if err != nil {
			t.Fatalf("apply %s: %v", f, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("apply %s: %v", f, err)
			}
			if u.Object == nil || u.GetKind() == "Namespace" {
				continue
			}
			if ns, ok := rename[u.GetNamespace()]; ok {
				u.SetNamespace(ns)
			}
			if subjects, ok, _ := unstructured.NestedSlice(u.Object, "subjects"); ok {
				for _, s := range subjects {
					m := s.(map[string]any)
					if ns, ok := rename[m["namespace"].(string)]; ok {
						m["namespace"] = ns
					}
				}
				unstructured.SetNestedSlice(u.Object, subjects, "subjects")
			}
			if err := e.Client.Create(context.Background(), &u); err != nil {
				t.Fatalf("apply %s: create %s %s: %v", f, u.GetKind(), u.GetName(), err)
			}
			objs = append(objs, u)
		}
	}
	e.awaitRBAC(t, objs)
}

// awaitRBAC waits until the API server's authorizer grants what the
// role bindings among objs bind to service accounts: it reads roles
// from a cache that lags their creation, and a test that acts as one of
// those accounts at once would be refused.
func (e *Env) awaitRBAC(t testing.TB, objs []unstructured.Unstructured) {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{}
	for _, u := range objs {
		if u.GetKind() != "Role" && u.GetKind() != "ClusterRole" {
			continue
		}
		var r rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
			t.Fatalf("apply: %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		rules[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = r.Rules
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, u := range objs {
		if u.GetKind() != "RoleBinding" && u.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
			t.Fatalf("apply: %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		ns := ""
		if b.RoleRef.Kind == "Role" {
			ns = b.Namespace
		}
		rs := rules[b.RoleRef.Kind+"/"+ns+"/"+b.RoleRef.Name]
		if len(rs) == 0 || len(rs[0].Verbs) == 0 || len(rs[0].Resources) == 0 || len(rs[0].APIGroups) == 0 {
			continue
		}
		attrs := &authorizationv1.ResourceAttributes{Namespace: b.Namespace, Verb: rs[0].Verbs[0],
			Group: rs[0].APIGroups[0], Resource: rs[0].Resources[0]}
		for _, sub := range b.Subjects {
			if sub.Kind != rbacv1.ServiceAccountKind {
				continue
			}
			user := "system:serviceaccount:" + sub.Namespace + ":" + sub.Name
			for {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sub.Namespace, "system:authenticated"},
					ResourceAttributes: attrs}}
				if err := e.Client.Create(ctx, sar); err != nil {
					t.Fatalf("apply: ask whether %s may %s %s: %v", user, attrs.Verb, attrs.Resource, err)
				}
				if sar.Status.Allowed {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("apply: %s may still not %s %s in %q a minute after %s %s was made: %s",
						user, attrs.Verb, attrs.Resource, attrs.Namespace, u.GetKind(), u.GetName(), sar.Status.Reason)
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}
}

// Install makes a control namespace and a sandbox namespace (restricted
// Pod Security) for one test and applies the shipped RBAC
// (deploy/base/kubernetes/rbac) to them, in place of fleetlift-system and
// sandbox-isolated: the worker's, the controller's and the sandbox's
// service accounts, Roles and bindings.
func (e *Env) Install(t testing.TB) (system, sandbox string) {
	t.Helper()
	system = e.Namespace(t, "fleetlift-system", nil)
	sandbox = e.Namespace(t, "sandbox", RestrictedLabels)
	e.Apply(t, map[string]string{"fleetlift-system": system, "sandbox-isolated": sandbox},
		"deploy/base/kubernetes/rbac/worker.yaml", "deploy/base/kubernetes/rbac/controller.yaml", "deploy/base/kubernetes/rbac/sandbox.yaml")
	return system, sandbox
}
