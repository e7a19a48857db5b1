//go:build !linux

package entrypoint

import (
	"errors"
	"runtime"
)

// Run would do what the package documentation says; containers are
// Linux's, and so are the calls it needs.
func Run(Config, []string) error {
	return errors.New("the entrypoint runs only in a Linux container, not on " + runtime.GOOS)
}
