package kubetest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReapOrphans: an etcd of these assets left behind by a test process
// that died (adopted by init) is killed when the next control plane
// starts; one whose parent still runs is not.
func TestReapOrphans(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := Assets(root)
	if err != nil {
		t.Fatal(err)
	}
	etcd := filepath.Join(assets, "etcd")
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(etcd, append([]string{"--data-dir", t.TempDir(), "--listen-client-urls", "http://127.0.0.1:0", "--advertise-client-urls", "http://127.0.0.1:0", "--listen-peer-urls", "http://127.0.0.1:0"}, args...)...)
		return cmd
	}
	// The orphan: started by a shell that exits at once, so init adopts it.
	sh := exec.Command("sh", "-c", `"$@" >/dev/null 2>&1 & echo $!`, "sh")
	sh.Args = append(sh.Args, start().Args...)
	out, err := sh.Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })
	kept := start()
	if err := kept.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kept.Process.Kill(); _ = kept.Wait() })
	for deadline := time.Now().Add(5 * time.Second); parentOf(orphan) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the orphan's parent is %d, not init", parentOf(orphan))
		}
	}

	reapOrphans(assets)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := syscall.Kill(orphan, 0); err != nil || zombie(orphan) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphaned etcd still runs")
		}
	}
	if err := syscall.Kill(kept.Process.Pid, 0); err != nil {
		t.Errorf("the etcd whose parent runs was killed: %v", err)
	}
}

// zombie reports whether pid has exited and waits for init to reap it.
func zombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && len(stat) > i+2 && stat[i+2] == 'Z'
}
