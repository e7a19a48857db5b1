package agent_test

import (
	"os"
	"testing"

	"github.com/fleetlift/fleetlift/internal/jail"
)

// The test binary is the agent's jail too, as fleetlift-agent is in a
// sandbox: commands run jailed unless a test says otherwise.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "jail" {
		os.Exit(jail.Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}
