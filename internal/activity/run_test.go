package activity_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/status"
)

// runSandboxed runs RunSandboxed for a task whose stand-in agent reaches
// phase (the manifest's title) and whose first sandbox is id.
func runSandboxed(t *testing.T, a *activity.Activities, env *testsuite.TestActivityEnvironment, id, phase string, timeout time.Duration) (status.RunOutcome, error) {
	t.Helper()
	v, err := env.ExecuteActivity(a.RunSandboxed, activity.RunInput{
		Provision: activity.ProvisionInput{SandboxID: id},
		Manifest:  protocol.Manifest{TaskID: id, Title: phase},
		Timeout:   timeout, MaxSandboxes: 3,
	})
	var out status.RunOutcome
	if err == nil {
		err = v.Get(&out)
	}
	return out, err
}

// gone fails the test unless every named sandbox was removed.
func gone(t *testing.T, a *activity.Activities, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := a.Sandbox.Status(context.Background(), id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("sandbox %s is still there (%v)", id, err)
		}
	}
}

// A task run whole in one activity: the agent's final phase and result,
// and no sandbox left.
func TestRunSandboxedFinishesAndRemovesTheSandbox(t *testing.T) {
	a, env := newActivities(t)
	for _, phase := range []protocol.Phase{protocol.PhaseComplete, protocol.PhaseFailed} {
		id := "run-" + string(phase)
		out, err := runSandboxed(t, a, env, id, string(phase), time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		if out.Status.Phase != phase || out.Result.Status != phase || len(out.Result.Repositories) != 1 || len(out.Lost) != 0 {
			t.Errorf("%s: outcome %+v", phase, out)
		}
		// The result is trimmed as ReadResult trims it.
		if d := out.Result.Repositories[0].Diffs; len(d) != 2 || d[1].Diff != "" || !d[1].Truncated {
			t.Errorf("%s: diffs past MaxResultBytes must be dropped and marked: %+v", phase, d)
		}
		gone(t, a, id)
	}
}

// A sandbox whose agent dies without finishing is replaced, and the work
// runs again there; what happened is in the outcome.
func TestRunSandboxedReplacesALostSandbox(t *testing.T) {
	a, env := newActivities(t)
	out, err := runSandboxed(t, a, env, "lose-first", "complete", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != protocol.PhaseComplete || len(out.Lost) != 1 ||
		!strings.Contains(out.Lost[0], "sandbox lose-first lost (agent in sandbox lose-first exited (code 9) without finishing") {
		t.Errorf("outcome: phase %s, lost %q", out.Status.Phase, out.Lost)
	}
	gone(t, a, "lose-first", "lose-first-1")
	// What the lost sandbox's model calls used (saved in it) counts in
	// the outcome, and its replacement was told (or it would fail).
	lost := &protocol.ModelUsage{Requests: 2, InputTokens: 900, CostUSD: 0.5}
	if !reflect.DeepEqual(out.LostUsage, lost) {
		t.Errorf("lost usage %+v; want %+v", out.LostUsage, lost)
	}
	if u := out.Result.ModelUsage; u == nil || u.Requests != 3 || u.InputTokens != 1000 || u.CostUSD != 0.75 {
		t.Errorf("the task's usage %+v; want both sandboxes': 3 requests, 1,000 tokens, $0.75", u)
	}
}

// heartbeats records what each of env's heartbeats says.
func heartbeats(env *testsuite.TestActivityEnvironment) *[]map[string]any {
	var mu sync.Mutex
	got := &[]map[string]any{}
	env.SetOnActivityHeartbeatListener(func(_ *sdkactivity.Info, details converter.EncodedValues) {
		var p map[string]any
		_ = details.Get(&p)
		mu.Lock()
		*got = append(*got, p)
		mu.Unlock()
	})
	return got
}

// A task that ends before its first beat is due sends no heartbeat (each
// is a write on the server); one that lost a sandbox heartbeats that at
// once, so an attempt after a dead worker does not run the work there
// again; one that runs on heartbeats the sandbox it is in.
func TestRunSandboxedHeartbeatsWhatTheNextAttemptNeeds(t *testing.T) {
	a, env := newActivities(t)
	got := heartbeats(env)
	if _, err := runSandboxed(t, a, env, "quick", "complete", time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(*got) != 0 {
		t.Errorf("a task done in a moment heartbeated %v", *got)
	}

	a, env = newActivities(t)
	got = heartbeats(env)
	if _, err := runSandboxed(t, a, env, "lose-first", "complete", time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(*got) == 0 || (*got)[0]["sandbox"] != "lose-first-1" || len((*got)[0]["lost"].([]any)) != 1 {
		t.Errorf("heartbeats %v; want the replacement sandbox and the lost one first", *got)
	}

	a, env = newActivities(t)
	got = heartbeats(env)
	if _, err := runSandboxed(t, a, env, "slow-7", "complete", time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(*got) == 0 || (*got)[0]["sandbox"] != "slow-7" {
		t.Errorf("a task at work for seven seconds heartbeated %v; want its sandbox", *got)
	}
}

// An agent that dies in every sandbox ends the task once MaxSandboxes
// were lost, without retry, every sandbox removed.
func TestRunSandboxedGivesUpAfterMaxSandboxes(t *testing.T) {
	a, env := newActivities(t)
	_, err := runSandboxed(t, a, env, "exit-4", "complete", time.Minute)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activity.ErrSandboxesLost || !ae.NonRetryable() {
		t.Fatalf("want a non-retryable %s error, got %v", activity.ErrSandboxesLost, err)
	}
	if !strings.Contains(ae.Error(), "3 sandboxes lost before the agent finished") || !strings.Contains(ae.Error(), "exited (code 4)") {
		t.Errorf("message: %v", ae)
	}
	gone(t, a, "exit-4", "exit-4-1", "exit-4-2")
}

// An agent that does not finish within the timeout ends the task without
// retry, and its sandbox goes.
func TestRunSandboxedTimesOut(t *testing.T) {
	a, env := newActivities(t)
	_, err := runSandboxed(t, a, env, "slow", "awaiting_input", 2*time.Second)
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activity.ErrAgentTimedOut || !ae.NonRetryable() ||
		!strings.Contains(ae.Error(), "timed out after 2s") {
		t.Fatalf("want a non-retryable %s error, got %v", activity.ErrAgentTimedOut, err)
	}
	gone(t, a, "slow")
}

// An attempt that takes over from a dead worker starts from its last
// heartbeat: the sandbox it worked in, and the ones lost before. Here
// that sandbox's agent had already finished: its result is read, and the
// work does not run again.
func TestRunSandboxedTakesOverFromItsLastHeartbeat(t *testing.T) {
	a, env := newActivities(t)
	ref := start(t, a, env, "taken-1", "complete")
	if _, err := env.ExecuteActivity(a.WaitForAgentPhase, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseComplete}}); err != nil {
		t.Fatal(err)
	}
	// The manifest the new attempt hands the agent again is not read:
	// an agent starts on the first it reads.
	env.SetHeartbeatDetails(map[string]any{"sandbox": "taken-1", "lost": []string{"sandbox taken lost (killed)"}})
	out, err := runSandboxed(t, a, env, "taken", "failed", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != protocol.PhaseComplete || len(out.Lost) != 1 || out.Lost[0] != "sandbox taken lost (killed)" {
		t.Errorf("outcome: phase %s, lost %q; want the finished agent's complete and the lost sandbox carried over", out.Status.Phase, out.Lost)
	}
	gone(t, a, "taken-1")
	if _, err := a.Sandbox.Status(context.Background(), "taken"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("the first sandbox, lost before, was provisioned again: %v", err)
	}
}

// With a sandbox that says when the agent writes its files (the local
// one), a wait reads the agent's status then: with an hour between
// polls, it still ends once the agent has finished.
func TestWaitWakesWhenTheAgentWrites(t *testing.T) {
	if err := waitPollingHourly(t, "woken", "the wait did not wake when the agent wrote its status"); err != nil {
		t.Fatal(err)
	}
}

// waitPollingHourly waits for the agent of task to complete, reading its
// status every hour but when the sandbox says, and returns how the wait
// ended; the test fails with stuck when it has not within a minute.
func waitPollingHourly(t *testing.T, task, stuck string) error {
	t.Helper()
	a, env := newActivities(t)
	a.PollInterval = time.Hour
	ref := start(t, a, env, task, "complete")
	done := make(chan error, 1)
	go func() {
		_, err := env.ExecuteActivity(a.WaitForAgentPhase, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseComplete}})
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal(stuck + " (it polls hourly here)")
		return nil
	}
}

// An agent that exits without a word ends the wait as it exits: the
// sandbox says so, and no poll has to come round.
func TestWaitLearnsOfAnAgentThatExitsAsItExits(t *testing.T) {
	err := waitPollingHourly(t, "exit-3", "the wait did not end when the agent exited without a word")
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activity.ErrAgentExited {
		t.Fatalf("want a %s error, got %v", activity.ErrAgentExited, err)
	}
}

// A task cancelled while its agent works (its campaign cancelled, say)
// leaves no sandbox behind.
func TestRunSandboxedCancelledRemovesTheSandbox(t *testing.T) {
	a, _ := newActivities(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := a.RunSandboxed(ctx, activity.RunInput{Provision: activity.ProvisionInput{SandboxID: "cancelled"},
			Manifest: protocol.Manifest{TaskID: "cancelled", Title: "awaiting_input"}, Timeout: time.Hour})
		done <- err
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if st, err := a.Sandbox.Status(t.Context(), "cancelled"); err == nil && st.Phase == sandbox.PhaseRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox never ran")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled run ended with %v", err)
	}
	gone(t, a, "cancelled")
}

// An attempt the server gave up on (a heartbeat found it gone: it timed
// out, or another attempt took over) leaves its sandbox: the attempt
// that takes over provisions the same one from the last heartbeat and
// waits for its agent, which must not be removed under it.
func TestRunSandboxedLeavesTheSandboxTheServerGaveUpOn(t *testing.T) {
	a, _ := newActivities(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := a.RunSandboxed(ctx, activity.RunInput{Provision: activity.ProvisionInput{SandboxID: "given-up"},
			Manifest: protocol.Manifest{TaskID: "given-up", Title: "awaiting_input"}, Timeout: time.Hour})
		done <- err
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if st, err := a.Sandbox.Status(t.Context(), "given-up"); err == nil && st.Phase == sandbox.PhaseRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox never ran")
		}
	}
	// What the SDK cancels an attempt with when its heartbeat finds it
	// gone.
	cancel(serviceerror.NewNotFound("invalid activityID or activity already timed out or invoking workflow is completed"))
	if err := <-done; err == nil {
		t.Fatal("an attempt the server gave up on finished")
	}
	t.Cleanup(func() { _ = a.Sandbox.Cleanup(context.Background(), "given-up") })
	if st, err := a.Sandbox.Status(t.Context(), "given-up"); err != nil || st.Phase != sandbox.PhaseRunning {
		t.Errorf("the attempt the server gave up on removed the sandbox the next attempt takes up: %+v, %v", st, err)
	}
}

// A worker that is stopping leaves its sandbox to the attempt that takes
// over from it, which waits for that sandbox's agent.
func TestRunSandboxedLeavesTheSandboxWhenItsWorkerStops(t *testing.T) {
	a, env := newActivities(t)
	stop := make(chan struct{})
	env.SetWorkerStopChannel(stop)
	close(stop)
	_, err := runSandboxed(t, a, env, "stopping", "awaiting_input", 2*time.Second)
	if err == nil {
		t.Fatal("an agent that never finished finished")
	}
	t.Cleanup(func() { _ = a.Sandbox.Cleanup(context.Background(), "stopping") })
	if _, err := a.Sandbox.Status(t.Context(), "stopping"); err != nil {
		t.Errorf("the stopping worker removed the sandbox the next attempt takes up: %v", err)
	}
}

// hiddenWatch is a sandbox that does not say when the agent writes (as
// the Kubernetes ones do not), counting the reads of status.json.
type hiddenWatch struct {
	sandbox.Provider
	statusReads atomic.Int32
}

func (h *hiddenWatch) CopyFrom(ctx context.Context, id, src string) (io.ReadCloser, error) {
	if strings.HasSuffix(src, protocol.StatusFile) {
		h.statusReads.Add(1)
	}
	return h.Provider.CopyFrom(ctx, id, src)
}

// Where the sandbox cannot say when the agent writes, a wait reads the
// status less often while it stands: over three seconds of one status, a
// tenth of the reads a fixed 50 ms poll makes, and the wait still ends
// when the agent has finished.
func TestWaitReadsLessWhileTheStatusStands(t *testing.T) {
	a, env := newActivities(t)
	a.PollInterval = 50 * time.Millisecond
	h := &hiddenWatch{Provider: a.Sandbox}
	a.Sandbox = h
	ref := start(t, a, env, "slow-3", "complete")
	if st := waitFor(t, a, env, ref, protocol.PhaseComplete); st.Phase != protocol.PhaseComplete {
		t.Fatalf("status %+v; want complete", st)
	}
	// A fixed poll would have read about 66 times.
	if n := h.statusReads.Load(); n > 20 {
		t.Errorf("status.json read %d times while the agent worked three seconds; want it read less often while it stands", n)
	}
}
