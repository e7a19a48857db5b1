package agentcmd

import (
	"strings"
	"testing"
)

// A jail program given to serve is used as given: the worker that starts
// the agent asked it for its protocol, so the agent runs nothing to ask
// again (a program that does not exist shows that nothing was run).
func TestJailSelfTakesTheGivenProgram(t *testing.T) {
	serve := NewServeCommand()
	got, err := jailSelf(serve, "/nonexistent/fleetlift-jail")
	if err != nil || len(got) != 1 || got[0] != "/nonexistent/fleetlift-jail" {
		t.Fatalf("jailSelf = %q, %v; want the program given", got, err)
	}
	if _, err := jailSelf(serve, "fleetlift-jail"); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("a relative --jail-program (found on PATH) must be refused: %v", err)
	}
}
