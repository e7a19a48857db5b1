package local

import (
	"os/exec"
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
