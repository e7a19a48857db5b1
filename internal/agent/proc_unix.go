//go:build unix

package agent

import (
	"errors"
	"os/exec"
	"syscall"
)

const openNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

func isSymlinkErr(_ string, err error) bool { return errors.Is(err, syscall.ELOOP) }

func newProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills every process in the group led by pid.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
