//go:build unix

package git

import (
	"os/exec"
	"syscall"
	"time"
)

// setProcessGroup runs git in a session of its own (no controlling
// terminal, so neither it nor ssh can prompt on one), which leads its own
// process group, and kills the whole group (ssh, remote helpers) when the
// context ends.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
}
