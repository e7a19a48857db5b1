//go:build !unix

package devserver

import "time"

// lockFile does nothing where flock is not available: starts must not
// share a state directory there.
func lockFile(path string, wait time.Duration) (unlock func(), err error) {
	return func() {}, nil
}
