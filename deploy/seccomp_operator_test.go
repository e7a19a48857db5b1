package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/internal/kubetest"
)

// spoModule is the Security Profiles Operator release whose
// SeccompProfile CRD the component is checked against.
const spoModule = "sigs.k8s.io/security-profiles-operator@v0.10.0"

// The seccomp-operator component added to an overlay makes the
// Security Profiles Operator install the same profile components/seccomp
// installs with its DaemonSet, as a SeccompProfile its CRD accepts, and
// has the controller make sandbox pods with the path the operator's
// daemon writes it to.
func TestSeccompOperatorComponent(t *testing.T) {
	objs := productionWith(t, "components/seccomp-operator")
	sp := find(objs, "SeccompProfile", "fleetlift-jail")
	if sp == nil || sp.GetNamespace() != "sandbox-isolated" {
		t.Fatalf("no SeccompProfile fleetlift-jail in sandbox-isolated, the sandboxes' namespace")
	}
	if find(objs, "DaemonSet", "fleetlift-seccomp") != nil {
		t.Errorf("the component brings the installer DaemonSet the operator replaces")
	}
	ctl := find(objs, "Deployment", "fleetlift-controller")
	if a := args(containers(ctl)[0]); !slices.Contains(a, "--seccomp-localhost-profile=operator/sandbox-isolated/fleetlift-jail.json") {
		t.Errorf("the controller does not give sandbox pods the operator's profile: %v", a)
	}

	// The profile is the one components/seccomp installs, but for the
	// default errno a SeccompProfile cannot say (runc's default, EPERM,
	// is the profile's).
	var shipped, spec map[string]any
	data, err := os.ReadFile("components/seccomp/fleetlift-jail.json")
	if err == nil {
		err = json.Unmarshal(data, &shipped)
	}
	if err != nil {
		t.Fatal(err)
	}
	if shipped["defaultErrnoRet"] != float64(1) {
		t.Fatalf("components/seccomp/fleetlift-jail.json: default errno %v, not EPERM", shipped["defaultErrnoRet"])
	}
	delete(shipped, "defaultErrnoRet")
	data, _ = json.Marshal(sp.Object["spec"])
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spec, shipped) {
		t.Errorf("the SeccompProfile's spec is not components/seccomp/fleetlift-jail.json: go test ./internal/seccomp -update")
	}

	// The operator's CRD takes it; the same object with an action it
	// does not know, it refuses.
	env, err := kubetest.Start(kubetest.Options{CRDPaths: []string{spoCRD(t)}})
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() { env.Stop() })
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sp.GetNamespace()}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, sp.DeepCopy(), client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Errorf("apply the SeccompProfile: %v", err)
	}
	bad := sp.DeepCopy()
	bad.SetName("refused")
	if err := unstructured.SetNestedField(bad.Object, "SCMP_ACT_MAYBE", "spec", "defaultAction"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, bad, client.Apply, client.FieldOwner("test")); err == nil || !strings.Contains(err.Error(), "defaultAction") {
		t.Errorf("a SeccompProfile with defaultAction SCMP_ACT_MAYBE: %v; want it refused by the CRD's schema", err)
	}
}

// spoCRD is the SeccompProfile CRD of spoModule.
func spoCRD(t *testing.T) string {
	return moduleFile(t, spoModule, "deploy/base-crds/crds/seccompprofile.yaml")
}
