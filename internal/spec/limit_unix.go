//go:build unix

package spec

import "syscall"

// limitAddressSpace caps this process's address space.
func limitAddressSpace(n uint64) error {
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: n, Max: n})
}
