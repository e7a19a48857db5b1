package node

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// A node whose test process died without Stop (a panic, a timeout) is
// cleaned up by the next Start: its mounts, cgroups, bridge and
// directory go. One whose test still runs is left alone.
func TestStaleNodesAreReaped(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		owner  int
		reaped bool
	}{
		{"owner dead", dead.Process.Pid, true},
		{"owner running", os.Getpid(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := staleNode(t, tc.owner)
			if err := reapStale(); err != nil {
				t.Fatalf("reapStale: %v", err)
			}
			left := n.Leftovers()
			if tc.reaped && len(left) > 0 {
				t.Errorf("after reapStale, the dead test's node left %q", left)
			}
			if !tc.reaped {
				if _, err := os.Stat(n.Dir); err != nil {
					t.Errorf("reapStale removed the node of a running test: %v", err)
				}
				if len(mountsUnder(n.Dir)) == 0 {
					t.Errorf("reapStale unmounted the node of a running test")
				}
			}
		})
	}
}

// staleNode makes what a node leaves on the host when its process is
// killed: a directory with its state, a mount under it, cgroups and the
// pods' bridge. The test's cleanup removes them if reapStale did not.
func staleNode(t *testing.T, owner int) *Node {
	t.Helper()
	dir, err := os.MkdirTemp("", "fleetlift-node-")
	if err != nil {
		t.Fatal(err)
	}
	id := filepath.Base(dir)
	n := &Node{Dir: dir, id: id, cgroupRoot: "/" + id}
	t.Cleanup(func() {
		if err := n.reap(); err != nil {
			t.Errorf("clean up: %v", err)
		}
	})
	b, err := json.Marshal(state{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "kubelet")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs (the test needs root): %v", err)
	}
	if err := n.makeCgroupRoot(); err != nil {
		t.Fatal(err)
	}
	for _, d := range cgroupDirs(n.cgroupRoot) {
		if err := os.Mkdir(filepath.Join(d, "kubepods"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.makeBridge(false, false); err != nil {
		t.Fatal(err)
	}
	return n
}
