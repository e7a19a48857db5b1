package agentcmd

import (
	"os"

	"golang.org/x/sys/unix"
)

// redirectOutput makes path the agent's standard output and error.
func redirectOutput(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, fd := range []int{1, 2} {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return err
		}
	}
	return nil
}

// closeOnExec keeps descriptor fd from the programs the agent runs (an
// inherited one is open across exec).
func closeOnExec(fd int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	return err
}
