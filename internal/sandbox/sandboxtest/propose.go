package sandboxtest

import (
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/local"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Propose does what the worker does once the agent in sandbox id
// finished m: it reads the agent's status and result and proposes the
// changes it left (activity AwaitAgentResult with m's Delivery), on the
// local forge, pushing only to repositories under fileRoots. It returns
// the outcome; the agent pushes nothing itself.
func Propose(t *testing.T, p sandbox.Provider, id string, m protocol.Manifest, fileRoots ...string) activity.AgentOutcome {
	t.Helper()
	g := &git.Git{}
	lf := local.New(g)
	// It keeps a scratch repository for its next pull request.
	t.Cleanup(func() { lf.Close() })
	a := &activity.Activities{
		Sandbox:   p,
		Forges:    func(string) (forge.Forge, error) { return lf, nil },
		Git:       g,
		FileRoots: fileRoots,
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.AwaitAgentResult, activity.WaitInput{
		Sandbox: activity.SandboxRef{ID: id, Provider: p.Name()},
		Phases:  []protocol.Phase{protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled},
		Deliver: activity.DeliveryOf(m, nil),
	})
	if err != nil {
		t.Fatalf("propose the changes of sandbox %s: %v", id, err)
	}
	var out activity.AgentOutcome
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}
