package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// A node is not started on a filesystem the kubelet would find under
// pressure: the error says how full it is and what frees space.
func TestStartRefusesAFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs of 1 MiB (the node's tests run as root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := checkDisk(dir); err != nil {
		t.Fatalf("an empty filesystem: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fill"), make([]byte, 1000<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	err := checkDisk(dir)
	if err == nil || !strings.Contains(err.Error(), "free (") || !strings.Contains(err.Error(), "free space first") {
		t.Fatalf("a full filesystem: %v", err)
	}
}

// A node under disk pressure says so, with the taint that keeps pods
// off it; one without pressure says nothing.
func TestDescribePressure(t *testing.T) {
	n := corev1.Node{
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.kubernetes.io/disk-pressure", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Message: "kubelet has disk pressure"},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		}},
	}
	if got, want := DescribePressure(n), "DiskPressure (kubelet has disk pressure), taint node.kubernetes.io/disk-pressure:NoSchedule"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	n.Status.Conditions[1].Status = corev1.ConditionFalse
	if got := DescribePressure(n); got != "" {
		t.Errorf("no pressure: %q", got)
	}
}
