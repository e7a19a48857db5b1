//go:build !unix

package source

import "context"

// lockFile does nothing where flock is not available: processes must not
// share a cache directory there.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	return func() {}, ctx.Err()
}
