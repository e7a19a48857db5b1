//go:build unix

package agent

import (
	"errors"
	"os/exec"
	"syscall"
)

// signaled reports the signal that killed the process err says exited.
func signaled(err error) (syscall.Signal, bool) {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal(), true
		}
	}
	return 0, false
}

const openNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

func isSymlinkErr(_ string, err error) bool { return errors.Is(err, syscall.ELOOP) }

// newProcessGroup starts cmd in a session of its own, which also makes it
// lead a process group of its own: it has no controlling terminal.
func newProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// killGroup kills every process in the group led by pid.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// freeBytes is how much of the file system holding path an unprivileged
// user may still write.
func freeBytes(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
