package local

import (
	"os"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/agentcmd"
)

// TestMain lets the test binary be fleetlift's agent, as the fleetlift
// binary is with its hidden agent command: `<exe> agent serve|jail ...`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		cmd := agentcmd.NewAgentCommand()
		cmd.SetArgs(os.Args[2:])
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
