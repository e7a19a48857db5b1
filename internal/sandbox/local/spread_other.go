//go:build !linux

package local

// spreadSandboxes does nothing here: see spread_linux.go.
func spreadSandboxes(string) {}
