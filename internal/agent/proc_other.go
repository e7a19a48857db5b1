//go:build !unix

package agent

import (
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// signaled reports nothing where the jail does not run.
func signaled(error) (syscall.Signal, bool) { return 0, false }

const openNoFollow = 0

func isSymlinkErr(path string, _ error) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

func newProcessGroup(*exec.Cmd) {}

func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// freeBytes knows of no bound where the jail does not run.
func freeBytes(string) (uint64, error) { return ^uint64(0), nil }
