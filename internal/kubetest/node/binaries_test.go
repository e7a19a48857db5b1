package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A checkout without bin/node fails with the make target that builds it,
// rather than skipping the real-node tests.
func TestMissingBinariesNameTheMakeTarget(t *testing.T) {
	_, err := findBinaries(t.TempDir(), false)
	if err == nil || !strings.Contains(err.Error(), MakeTarget) {
		t.Errorf("findBinaries of an empty checkout = %v; want an error naming %q", err, MakeTarget)
	}
}

// With the Kubernetes commands built but not the container runtime, the
// error is the make target that builds it: the node never falls back to
// another containerd or runc on the PATH.
func TestMissingContainerdNamesTheMakeTarget(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "bin", "node"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kubelet", "kube-controller-manager", "kube-scheduler"} {
		if err := os.WriteFile(filepath.Join(root, "bin", "node", name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := findBinaries(root, false)
	if err == nil || !strings.Contains(err.Error(), MakeTarget) {
		t.Errorf("findBinaries without containerd = %v; want an error naming %q", err, MakeTarget)
	}
}
