//go:build unix

package spec

import (
	"fmt"
	"strconv"
	"syscall"
)

// limitMemory caps this process's address space, so a runaway evaluation
// fails to allocate instead of exhausting the machine.
func limitMemory(s string) error {
	if s == "" {
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("memory limit %q: %w", s, err)
	}
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: n, Max: n})
}
