//go:build !unix

package devserver

// lockFile does nothing where flock is not available: servers must not
// share a state directory there.
func lockFile(path string) (unlock func(), err error) {
	return func() {}, nil
}
