package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// homeProcesses finds a process by its HOME wherever that stands in its
// environment, even past a large variable (the reads go on past a
// buffer's worth), and no process of another home.
func TestHomeProcessesFindsTheSandboxsProcesses(t *testing.T) {
	home := t.TempDir()
	start := func(env ...string) int {
		cmd := exec.Command("sleep", "60")
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	big := "BIG=" + strings.Repeat("x", 100<<10)
	near := start("PATH=/usr/bin:/bin", "HOME="+home)
	far := start(big, "HOME="+home, "TERM=dumb")
	other := start("HOME=" + home + "-other")
	prefix := start("HOME=" + home + "/sub")
	got := homeProcesses(home)
	if !slices.Contains(got, near) || !slices.Contains(got, far) || slices.Contains(got, other) || slices.Contains(got, prefix) {
		t.Errorf("homeProcesses(%s) = %v: want %d and %d, not %d or %d", home, got, near, far, other, prefix)
	}
}

// A process caught inside execve, between dropping its old memory and
// laying out the new one, shows an empty environment: homeProcesses
// still finds it, and noHomeProcesses, which Cleanup waits on, never says
// it is gone. The process here does nothing but exec itself.
func TestHomeProcessesFindsAProcessInExec(t *testing.T) {
	home := t.TempDir()
	script := filepath.Join(home, "again")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec /bin/sh \"$0\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", script)
	cmd.Env = []string{"HOME=" + home}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	missed, gone := 0, 0
	const scans = 300
	for range scans {
		if !slices.Contains(homeProcesses(home), cmd.Process.Pid) {
			missed++
		}
		if noHomeProcesses(home) {
			gone++
		}
	}
	// One scan may still miss it, rarely, on a loaded machine; two in a
	// row may not.
	if missed > 0 {
		t.Logf("homeProcesses missed a process that execs in a loop in %d of %d scans", missed, scans)
	}
	if gone > 0 {
		t.Errorf("noHomeProcesses said a process that execs in a loop was gone in %d of %d calls", gone, scans)
	}
}
