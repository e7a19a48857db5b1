//go:build !unix

package spec

// limitAddressSpace is not available on this platform; the memory
// watchdog and the timeout still hold.
func limitAddressSpace(uint64) error { return nil }
