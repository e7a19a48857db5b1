package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The seccomp component added to an overlay installs the sandboxes'
// profile on every node, from a ConfigMap its DaemonSet mounts, and has
// the controller make sandbox pods with it.
func TestSeccompComponent(t *testing.T) {
	objs := productionWith(t, "components/seccomp")
	profile, err := os.ReadFile("components/seccomp/fleetlift-jail.json")
	if err != nil {
		t.Fatal(err)
	}

	ds := find(objs, "DaemonSet", "fleetlift-seccomp")
	if ds == nil || ds.GetNamespace() != "fleetlift-node" {
		t.Fatalf("no installer DaemonSet in fleetlift-node")
	}
	if ns := find(objs, "Namespace", "fleetlift-node"); ns == nil || ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("the installer's namespace does not admit its host path: %v", ns)
	}
	vols, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "volumes")
	var cmName, hostPath string
	for _, v := range vols {
		v := v.(map[string]any)
		if n, ok, _ := unstructured.NestedString(v, "configMap", "name"); ok {
			cmName = n
		}
		if p, ok, _ := unstructured.NestedString(v, "hostPath", "path"); ok {
			hostPath = p
		}
	}
	if hostPath != "/var/lib/kubelet/seccomp" {
		t.Errorf("the installer writes %q, want the kubelet's seccomp directory", hostPath)
	}
	cm := find(objs, "ConfigMap", cmName)
	if cm == nil || cm.GetNamespace() != "fleetlift-node" {
		t.Fatalf("the installer mounts ConfigMap %q, which the component does not make", cmName)
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "jail.json"); got != string(profile) {
		t.Errorf("ConfigMap %s's jail.json is not components/seccomp/fleetlift-jail.json", cmName)
	}
	for _, c := range containers(ds) {
		sc, _ := c["securityContext"].(map[string]any)
		drop, _, _ := unstructured.NestedStringSlice(sc, "capabilities", "drop")
		if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || !slices.Equal(drop, []string{"ALL"}) || sc["privileged"] == true {
			t.Errorf("installer container %s: securityContext %v, want no capability, no escalation, a read-only root", c["name"], sc)
		}
	}

	ctl := find(objs, "Deployment", "fleetlift-controller")
	if a := args(containers(ctl)[0]); !slices.Contains(a, "--seccomp-localhost-profile=fleetlift/jail.json") {
		t.Errorf("the controller does not give sandbox pods the profile: %v", a)
	}
}

// productionWith renders the production overlay with component added.
func productionWith(t *testing.T, component string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes no absolute path to a kustomization.
	rel := func(p string) string {
		a, err := filepath.Abs(p)
		if err == nil {
			a, err = filepath.Rel(dir, a)
		}
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel("overlays/production") +
		"\ncomponents:\n  - " + rel(component) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return render(t, dir)
}

// The jail component, with a seccomp component, has the controller make
// user-namespaced sandbox pods and lets sandbox-isolated admit their
// unmasked /proc (baseline), still warning and auditing against
// restricted; the control plane's namespace stays restricted.
func TestJailComponent(t *testing.T) {
	objs := productionWith(t, "components/jail")
	ctl := find(objs, "Deployment", "fleetlift-controller")
	if a := args(containers(ctl)[0]); !slices.Contains(a, "--user-namespaces") {
		t.Errorf("the controller does not make user-namespaced sandbox pods: %v", a)
	}
	want := map[string]map[string]string{
		"sandbox-isolated": {"enforce": "baseline", "enforce-version": "v1.37", "warn": "restricted", "audit": "restricted", "audit-version": "v1.37"},
		"fleetlift-system": {"enforce": "restricted"},
	}
	for name, labels := range want {
		ns := find(objs, "Namespace", name)
		if ns == nil {
			t.Fatalf("no Namespace %s", name)
		}
		for k, v := range labels {
			if got := ns.GetLabels()["pod-security.kubernetes.io/"+k]; got != v {
				t.Errorf("Namespace %s: pod-security.kubernetes.io/%s = %q; want %q", name, k, got, v)
			}
		}
	}
}
