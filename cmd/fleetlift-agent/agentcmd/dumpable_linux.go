package agentcmd

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// undumpable makes this process non-dumpable: its /proc files (environ,
// mem, maps) and ptrace are then closed to every process without
// CAP_SYS_PTRACE, its own user's included. What it executes is dumpable
// again, with its own environment.
func undumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the agent non-dumpable: %w", err)
	}
	return nil
}
