package agent

import (
	"testing"
	"time"
)

// SetStepEvery makes d how often news the worker does not wait for is
// written, for the rest of test t.
func SetStepEvery(t *testing.T, d time.Duration) {
	old := stepEvery
	stepEvery = d
	t.Cleanup(func() { stepEvery = old })
}
