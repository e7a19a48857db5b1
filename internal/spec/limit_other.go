//go:build !unix

package spec

// limitMemory is not available on this platform; the timeout still holds.
func limitMemory(string) error { return nil }
