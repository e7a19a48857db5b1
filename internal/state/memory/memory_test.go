package memory_test

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/state/memory"
	"github.com/fleetlift/fleetlift/internal/state/statetest"
)

func TestConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.Store { return memory.New() })
}
