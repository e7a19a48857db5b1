package activity_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	localsb "github.com/fleetlift/fleetlift/internal/sandbox/local"
)

// countingProvider counts the sandboxes that exist at once.
type countingProvider struct {
	sandbox.Provider
	now, most atomic.Int64
}

func (c *countingProvider) Provision(ctx context.Context, o sandbox.ProvisionOptions) (*sandbox.Sandbox, error) {
	sb, err := c.Provider.Provision(ctx, o)
	if err == nil {
		n := c.now.Add(1)
		for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
		}
	}
	return sb, err
}

func (c *countingProvider) Cleanup(ctx context.Context, id string) error {
	err := c.Provider.Cleanup(ctx, id)
	if err == nil {
		c.now.Add(-1)
	}
	return err
}

// A worker runs at most MaxSandboxes sandboxes at once: one more is
// refused as ErrWorkerFull (nothing made), the same sandbox provisioned
// again is counted once, and a removal makes room.
func TestWorkerRunsAtMostMaxSandboxes(t *testing.T) {
	root := t.TempDir()
	p, err := localsb.New(localsb.Options{Root: root, AgentCommand: []string{"sh", "-c", "exec sleep 1000", "agent"}, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := &activity.Activities{Sandbox: p, MaxSandboxes: 1}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	provision := func(id string) error {
		_, err := env.ExecuteActivity(a.ProvisionSandbox, activity.ProvisionInput{SandboxID: id})
		return err
	}
	if err := provision("one"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(context.Background(), "one") })
	if err := provision("one"); err != nil {
		t.Fatalf("the same sandbox again: %v", err)
	}
	err = provision("two")
	if !activity.WorkerFull(err) {
		t.Fatalf("a second sandbox: %v; want the worker full", err)
	}
	if _, serr := p.Status(t.Context(), "two"); serr == nil {
		t.Error("a sandbox was made for the refused provisioning")
	}
	if _, err := env.ExecuteActivity(a.CleanupSandbox, activity.CleanupInput{Sandbox: activity.SandboxRef{ID: "one"}}); err != nil {
		t.Fatal(err)
	}
	if err := provision("two"); err != nil {
		t.Fatalf("after a removal: %v", err)
	}
	t.Cleanup(func() { _ = p.Cleanup(context.Background(), "two") })

	// A worker started again takes "two" over, and counts it.
	again, err := localsb.New(localsb.Options{Root: root, AgentCommand: []string{"sh", "-c", "exec sleep 1000", "agent"}, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := &activity.Activities{Sandbox: again, MaxSandboxes: 1, Adopted: again.Sandboxes()}
	env2 := ts.NewTestActivityEnvironment()
	env2.RegisterActivity(b)
	if _, err := env2.ExecuteActivity(b.ProvisionSandbox, activity.ProvisionInput{SandboxID: "three"}); !activity.WorkerFull(err) {
		t.Errorf("a worker that took over a sandbox, at most one: %v; want it full", err)
		_ = again.Cleanup(context.Background(), "three")
	}
}

// Units run as one activity wait for room rather than fail: four tasks
// at once on a worker of two sandboxes all complete, never more than
// two sandboxes at a time.
func TestRunSandboxedWaitsForRoom(t *testing.T) {
	a, _ := newActivities(t)
	p := &countingProvider{Provider: a.Sandbox}
	a.Sandbox, a.MaxSandboxes = p, 2
	var ts testsuite.WorkflowTestSuite
	errs := make(chan error, 4)
	for _, id := range []string{"a", "b", "c", "d"} {
		go func() {
			env := ts.NewTestActivityEnvironment()
			env.RegisterActivity(a)
			out, err := runSandboxed(t, a, env, "room-"+id, "complete", time.Minute)
			if err == nil && out.Status.Phase != protocol.PhaseComplete {
				err = fmt.Errorf("phase %s", out.Status.Phase)
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("a task: %v", err)
		}
	}
	if most := p.most.Load(); most != 2 {
		t.Errorf("%d sandboxes at once; want 2, the worker's most", most)
	}
	if n := p.now.Load(); n != 0 {
		t.Errorf("%d sandboxes left after every task ended", n)
	}
	// And the worker counts none: a full run's worth fits again.
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	for _, id := range []string{"e", "f"} {
		if _, err := env.ExecuteActivity(a.ProvisionSandbox, activity.ProvisionInput{SandboxID: "room-" + id}); err != nil {
			t.Errorf("after the tasks: %v", err)
		}
		t.Cleanup(func() { _ = p.Cleanup(context.Background(), "room-"+id) })
	}
}

// An agentic task's sandbox is made once the model account's tokens a
// minute allow a call (PaceAgents), not made to wait idle at its first
// call, or once the step has waited as long as it may; a deterministic
// task's is made at once.
func TestAgenticSandboxWaitsForTheModelsTokens(t *testing.T) {
	p, err := localsb.New(localsb.Options{Root: t.TempDir(), AgentCommand: []string{"sh", "-c", "exec sleep 1000", "agent"}, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingProvider{Provider: p}
	tokens := make(chan struct{})
	var asked atomic.Int32
	a := &activity.Activities{Sandbox: c, PaceAgents: func(ctx context.Context) error {
		asked.Add(1)
		select {
		case <-tokens:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	if _, err := env.ExecuteActivity(a.ProvisionSandbox, activity.ProvisionInput{SandboxID: "deterministic"}); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 0 || c.now.Load() != 1 {
		t.Fatalf("a deterministic task's sandbox: paced %d times, %d sandboxes; want made at once", asked.Load(), c.now.Load())
	}
	made := make(chan error, 1)
	go func() {
		_, err := env.ExecuteActivity(a.ProvisionSandbox, activity.ProvisionInput{SandboxID: "agentic", Agentic: true})
		made <- err
	}()
	for asked.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if n := c.now.Load(); n != 1 {
		t.Fatalf("%d sandboxes while the agentic one waits for tokens; want it not made yet", n)
	}
	close(tokens)
	if err := <-made; err != nil {
		t.Fatal(err)
	}
	if n := c.now.Load(); n != 2 {
		t.Errorf("%d sandboxes once the tokens allow a call; want the agentic one made", n)
	}
	// Tokens spent for longer than the step may wait: the sandbox is
	// made all the same, its agent's calls then waiting at the gateway.
	activity.ShortPaceWait(t, 100*time.Millisecond)
	a.PaceAgents = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	if _, err := env.ExecuteActivity(a.ProvisionSandbox, activity.ProvisionInput{SandboxID: "agentic-late", Agentic: true}); err != nil {
		t.Fatalf("an agentic sandbox whose tokens stay spent: %v; want it made after the wait", err)
	}
	if n := c.now.Load(); n != 3 {
		t.Errorf("%d sandboxes after the tokens stayed spent past the wait; want the third made", n)
	}
	for _, id := range []string{"deterministic", "agentic", "agentic-late"} {
		_ = c.Cleanup(context.Background(), id)
	}
}
