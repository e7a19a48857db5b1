package deploy_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/internal/kubetest"
)

// The CRDs of the GitOps tools the README deploys with, from their
// releases' Go modules.
var gitopsCRDs = []struct{ module, file string }{
	{"github.com/argoproj/argo-cd/v3@v3.2.0", "manifests/crds/application-crd.yaml"},
	{"github.com/fluxcd/source-controller@v1.7.0", "config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml"},
	{"github.com/fluxcd/kustomize-controller@v1.7.2", "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"},
}

// The Argo CD Application and the Flux GitRepository and Kustomizations
// in deploy/gitops are what their tools' CRDs accept: a cluster with the
// CRDs takes every one of them as it is, and refuses each with a field of
// the wrong type.
func TestGitOpsObjectsMatchTheirCRDs(t *testing.T) {
	var crds []string
	for _, c := range gitopsCRDs {
		crds = append(crds, moduleFile(t, c.module, c.file))
	}
	env, err := kubetest.Start(kubetest.Options{CRDPaths: crds})
	if err != nil {
		t.Fatalf("kubetest with the GitOps tools' CRDs: %v", err)
	}
	t.Cleanup(func() { env.Stop() })
	ctx := context.Background()
	var objs []*unstructured.Unstructured
	for _, f := range []string{"gitops/argocd/application.yaml", "gitops/flux/fleetlift.yaml"} {
		objs = append(objs, readYAML(t, f)...)
	}
	namespaces := map[string]bool{}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !namespaces[ns] {
			namespaces[ns] = true
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(objs) != 4 {
		t.Fatalf("deploy/gitops holds %d objects, want the Application, the GitRepository and two Kustomizations", len(objs))
	}
	for _, o := range objs {
		what := o.GetKind() + " " + o.GetName()
		if err := env.Client.Patch(ctx, o.DeepCopy(), client.Apply, client.FieldOwner("test")); err != nil {
			t.Errorf("%s: %v", what, err)
		}
		// The same object with its spec's first field a number: the
		// schema, not a missing CRD, is what refuses it.
		bad := o.DeepCopy()
		bad.SetName(o.GetName() + "-bad")
		spec := bad.Object["spec"].(map[string]any)
		field := ""
		for k := range spec {
			if field == "" || k < field {
				field = k
			}
		}
		spec[field] = int64(7)
		if err := env.Client.Patch(ctx, bad, client.Apply, client.FieldOwner("test")); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s with spec.%s a number: %v; want it refused by the CRD's schema", what, field, err)
		}
	}
}

// moduleFile is the path of file in module (path@version), from the Go
// module cache: go mod download fetches the module from the module proxy
// when the cache does not have it.
func moduleFile(t *testing.T, module, file string) string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); err != nil || jerr != nil || m.Dir == "" {
		t.Fatalf("go mod download -json %s: %v: %s", module, err, out)
	}
	return filepath.Join(m.Dir, filepath.FromSlash(file))
}
