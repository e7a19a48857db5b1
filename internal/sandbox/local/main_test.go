package local

import (
	"os"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/agentcmd"
)

// TestMain lets the test binary be fleetlift's agent, as the fleetlift
// binary is with its hidden agent command: `<exe> agent serve|jail ...`.
func TestMain(m *testing.M) {
	if code, ok := agentcmd.RunAgent(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
