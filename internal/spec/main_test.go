package spec_test

import (
	"os"
	"testing"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// TestMain lets the test binary serve as a spec.Pool worker, as the
// fleetlift binary does.
func TestMain(m *testing.M) {
	if spec.IsWorker() {
		os.Exit(spec.RunWorker())
	}
	os.Exit(m.Run())
}

// newPool returns a worker pool of this test binary with small limits,
// closed when the test ends.
func newPool(t testing.TB) *spec.Pool {
	t.Helper()
	p := &spec.Pool{Command: []string{os.Args[0]}, Workers: 2, MemoryLimit: 1 << 30}
	t.Cleanup(func() { p.Close() })
	return p
}
