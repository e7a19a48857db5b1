package kubetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Apply creates the objects of YAML files under the repository root (such
// as deploy/base/kubernetes/rbac/worker.yaml), with the namespaces rename
// names renamed, in objects and in RoleBinding subjects, so that each
// test has its own. Namespace objects are left out.
func (e *Env) Apply(t testing.TB, rename map[string]string, files ...string) {
	t.Helper()
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
