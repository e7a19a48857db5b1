package activity_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
)

// units is a run of the named units (each its own sandbox, of that
// name, and a repository of that name) whose stand-in agents reach phase.
func units(phase string, names ...string) activity.UnitsInput {
	in := activity.UnitsInput{
		Template:    activity.RunInput{Manifest: protocol.Manifest{TaskID: "run", Title: phase}, Timeout: time.Minute, MaxSandboxes: 3},
		MaxAttempts: 3,
	}
	for _, n := range names {
		in.Units = append(in.Units, activity.UnitSpec{Key: n, SandboxID: n, TaskID: "c/" + n, Repositories: []protocol.Repository{{Name: n}}})
	}
	return in
}

func runUnits(t *testing.T, a *activity.Activities, env *testsuite.TestActivityEnvironment, in activity.UnitsInput) activity.UnitsOutcome {
	t.Helper()
	return runUnitsNamed(t, env, a.RunUnits, in)
}

// runUnitsNamed runs the activity fn (RunUnits, or its name) with in.
func runUnitsNamed(t *testing.T, env *testsuite.TestActivityEnvironment, fn any, in activity.UnitsInput) activity.UnitsOutcome {
	t.Helper()
	v, err := env.ExecuteActivity(fn, in)
	if err != nil {
		t.Fatal(err)
	}
	var out activity.UnitsOutcome
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func keys(out activity.UnitsOutcome) []string {
	var ks []string
	for _, d := range out.Done {
		ks = append(ks, d.Key)
	}
	return ks
}

// A run works through its units in turn, each in its own sandbox, removed
// after; each outcome keeps what the campaign records and not the diffs.
func TestRunUnitsRunsEachUnitInItsOwnSandbox(t *testing.T) {
	a, env := newActivities(t)
	a.StillWanted = (&wanted{}).stillWanted
	out := runUnits(t, a, env, units("complete", "u1", "u2", "u3"))
	if got := keys(out); !slices.Equal(got, []string{"u1", "u2", "u3"}) {
		t.Fatalf("units done %v", got)
	}
	for _, d := range out.Done {
		if d.Error != "" || d.Outcome.Status.Phase != protocol.PhaseComplete || d.Took <= 0 || len(d.Outcome.Result.Repositories) != 1 {
			t.Errorf("%s: %+v", d.Key, d)
		}
		if r := d.Outcome.Result.Repositories[0]; r.Status != "success" || len(r.Diffs) != 0 {
			t.Errorf("%s: repository %+v; want its status, without diffs", d.Key, r)
		}
	}
	gone(t, a, "u1", "u2", "u3")
}

// A run stops after a failed unit when the campaign has a threshold to
// check, and goes on otherwise; a unit whose every sandbox was lost is a
// failed unit with why, not the run's error.
func TestRunUnitsStopsAtAFailureOnlyWhenAsked(t *testing.T) {
	a, env := newActivities(t)
	a.StillWanted = (&wanted{}).stillWanted
	in := units("complete", "u1", "failing", "u3")
	in.StopAtFailure = true
	out := runUnits(t, a, env, in)
	if got := keys(out); !slices.Equal(got, []string{"u1", "failing"}) || !out.Done[1].Failed() {
		t.Fatalf("with a threshold: done %v (%+v); want the run to stop after the failed unit", got, out.Done)
	}

	in = units("complete", "lose-all", "u3")
	out = runUnits(t, a, env, in)
	if got := keys(out); !slices.Equal(got, []string{"lose-all", "u3"}) {
		t.Fatalf("without a threshold: done %v; want the run to go on after a failed unit", got)
	}
	if e := out.Done[0].Error; !strings.Contains(e, "3 sandboxes lost before the agent finished") {
		t.Errorf("a unit whose every sandbox was lost: error %q", e)
	}
	if out.Done[1].Failed() {
		t.Errorf("the unit after: %+v", out.Done[1])
	}
	gone(t, a, "lose-all", "lose-all-1", "lose-all-2", "u3")
}

// Once a run has worked Within, no further unit starts, and no heartbeat
// goes out before one.
func TestRunUnitsEndsOnceItHasWorkedWithin(t *testing.T) {
	activity.QuietBeats(t)
	a, env := newActivities(t)
	w := &wanted{}
	a.StillWanted = w.stillWanted
	in := units("complete", "u1", "u2")
	in.Within = time.Millisecond
	out := runUnits(t, a, env, in)
	if got := keys(out); !slices.Equal(got, []string{"u1"}) || len(w.next) != 0 {
		t.Errorf("done %v, heartbeats naming %v; want u1 alone, no heartbeat", got, w.next)
	}
}

// An attempt that takes over from a dead worker starts from the last
// heartbeat: the units done there are not run again, and are told as
// ended (a follower in this process shows them done, not as the
// campaign shows a run's units until it reports); the unit that was at
// work goes on in its sandbox without a heartbeat before it.
func TestRunUnitsTakesOverFromItsLastHeartbeat(t *testing.T) {
	activity.QuietBeats(t)
	a, env := newActivities(t)
	w := &wanted{}
	a.StillWanted = w.stillWanted
	var mu sync.Mutex
	var told []string
	a.UnitEnded = func(_ string, u status.UnitOutcome) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, u.Key)
	}
	ref := start(t, a, env, "u2", "complete")
	waitFor(t, a, env, ref, protocol.PhaseComplete)
	var progress map[string]any
	raw, _ := json.Marshal(map[string]any{
		"done":    []status.UnitOutcome{{Key: "u1", Outcome: status.RunOutcome{Status: protocol.Status{Phase: protocol.PhaseComplete}}}},
		"current": map[string]any{"sandbox": "u2"},
	})
	_ = json.Unmarshal(raw, &progress)
	env.SetHeartbeatDetails(progress)
	out := runUnits(t, a, env, units("failed", "u1", "u2", "u3"))
	if got := keys(out); !slices.Equal(got, []string{"u1", "u2", "u3"}) {
		t.Fatalf("done %v", got)
	}
	// u2's agent had finished complete; a new one would have failed
	// (the manifest handed again says failed).
	if out.Done[1].Outcome.Status.Phase != protocol.PhaseComplete || out.Done[2].Outcome.Status.Phase != protocol.PhaseFailed {
		t.Errorf("u2 %s, u3 %s; want u2's finished agent read, u3 run", out.Done[1].Outcome.Status.Phase, out.Done[2].Outcome.Status.Phase)
	}
	if !slices.Equal(w.next, []string{"u3"}) {
		t.Errorf("heartbeats before units naming %v; want only u3", w.next)
	}
	mu.Lock()
	if !slices.Equal(told, []string{"u1", "u2", "u3"}) {
		t.Errorf("told of units ending: %v; want u1, done before, then u2 and u3", told)
	}
	mu.Unlock()
	gone(t, a, "u2", "u3")
}

// unitsResult is what RunUnits returned.
type unitsResult struct {
	out activity.UnitsOutcome
	err error
}

// runAsync runs in with ctx, outside an activity, and hands what
// RunUnits returned on the channel.
func runAsync(ctx context.Context, a *activity.Activities, in activity.UnitsInput) <-chan unitsResult {
	done := make(chan unitsResult, 1)
	go func() {
		out, err := a.RunUnits(ctx, in)
		done <- unitsResult{out, err}
	}()
	return done
}

// A cancelled run removes the sandbox at work and reports the units it
// finished, that one cancelled: their pull requests are open.
func TestRunUnitsCancelledReportsWhatItDid(t *testing.T) {
	a, _ := newActivities(t)
	a.StillWanted = (&wanted{}).stillWanted
	ctx, cancel := context.WithCancel(t.Context())
	in := units("complete", "u1", "slow", "u3")
	in.Template.Manifest.TaskID = "slow-30"
	in.Units[0].SandboxID = "quick"
	done := runAsync(ctx, a, in)
	time.Sleep(500 * time.Millisecond)
	cancel()
	r := <-done
	if r.err != nil {
		t.Fatalf("a cancelled run failed: %v", r.err)
	}
	if got := keys(r.out); !slices.Equal(got, []string{"u1"}) || !r.out.Done[0].Cancelled {
		t.Errorf("done %v (%+v); want u1 cancelled", got, r.out.Done)
	}
	gone(t, a, "quick", "slow", "u3")
}

// wanted records a run's heartbeats (how many units were done at each)
// and answers, from the cancelAt-th on, that the campaign cancelled the
// run.
type wanted struct {
	mu       sync.Mutex
	done     []int
	next     []string // the sandbox each heartbeat named
	cancelAt int
}

func (w *wanted) stillWanted(_ context.Context, p any) (bool, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return false, err
	}
	var progress struct {
		Done    []status.UnitOutcome `json:"done"`
		Current struct {
			Sandbox string `json:"sandbox"`
		} `json:"current"`
	}
	if err := json.Unmarshal(raw, &progress); err != nil {
		return false, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = append(w.done, len(progress.Done))
	w.next = append(w.next, progress.Current.Sandbox)
	return w.cancelAt == 0 || len(w.done) < w.cancelAt, nil
}

// Before each unit but the first a run heartbeats the units done and the
// unit's sandbox (which an attempt after a dead worker goes on in), and
// that is all it sends while its units are short; once the campaign has
// cancelled it, no further unit starts (their sandboxes are never made).
func TestRunUnitsHeartbeatsBeforeEachUnit(t *testing.T) {
	activity.QuietBeats(t)
	a, env := newActivities(t)
	w := &wanted{}
	a.StillWanted = w.stillWanted
	out := runUnits(t, a, env, units("complete", "u1", "u2", "u3"))
	if got := keys(out); !slices.Equal(got, []string{"u1", "u2", "u3"}) {
		t.Fatalf("units done %v", got)
	}
	if !slices.Equal(w.done, []int{1, 2}) || !slices.Equal(w.next, []string{"u2", "u3"}) {
		t.Errorf("heartbeats with %v units done naming sandboxes %v; want heartbeats with 1 and 2 done naming u2 and u3", w.done, w.next)
	}

	// A unit's own error is its outcome, not a cancellation: the run
	// goes on.
	out = runUnits(t, a, env, units("complete", "lose-all", "u4"))
	if got := keys(out); !slices.Equal(got, []string{"lose-all", "u4"}) || out.Done[0].Cancelled ||
		!strings.Contains(out.Done[0].Error, "3 sandboxes lost before the agent finished") {
		t.Fatalf("done %v (%+v); want lose-all failed with why, not cancelled, and u4 after it", got, out.Done)
	}

	w = &wanted{cancelAt: 2}
	a.StillWanted = w.stillWanted
	out = runUnits(t, a, env, units("complete", "v1", "v2", "v3"))
	if got := keys(out); !slices.Equal(got, []string{"v1", "v2"}) || !slices.Equal(w.done, []int{1, 2}) {
		t.Errorf("done %v after heartbeats with %v done; want v1 and v2, the run cancelled before v3", got, w.done)
	}
	gone(t, a, "u1", "u2", "u3", "lose-all", "lose-all-1", "lose-all-2", "u4", "v1", "v2", "v3")
}

// The campaign cancels a run once it may start no further unit of it: the unit at work goes on, unless the campaign says it was itself
// cancelled, and no unit starts after it. A run's context that ends for
// another reason (the worker stopping, the activity gone) ends the unit
// at once, without asking.
func TestRunsUnitAtWorkOutlivesTheRunsCancellation(t *testing.T) {
	for _, c := range []struct {
		name                      string
		cause                     error
		goesOn, cancelled, asking bool
	}{
		{"the campaign cancelled the run", temporal.NewCanceledError(), true, false, true},
		{"the campaign itself was cancelled", temporal.NewCanceledError(), false, true, true},
		{"the run's context ended otherwise", errors.New("activity gone"), true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _ := newActivities(t)
			a.StillWanted = (&wanted{}).stillWanted
			var asks atomic.Int32
			a.UnitGoesOn = func(context.Context) (bool, error) {
				asks.Add(1)
				return c.goesOn, nil
			}
			ctx, cancel := context.WithCancelCause(t.Context())
			in := units("complete", "u1", "u2")
			in.Template.Manifest.TaskID = "slow-2"
			done := runAsync(ctx, a, in)
			time.Sleep(500 * time.Millisecond)
			cancel(c.cause)
			r := <-done
			if r.err != nil {
				t.Fatalf("the run failed: %v", r.err)
			}
			if got := keys(r.out); !slices.Equal(got, []string{"u1"}) {
				t.Fatalf("done %v; want u1 alone, u2 not started", got)
			}
			u1 := r.out.Done[0]
			if u1.Cancelled != c.cancelled || (!c.cancelled && u1.Outcome.Status.Phase != protocol.PhaseComplete) {
				t.Errorf("u1 %+v: want cancelled %v", u1, c.cancelled)
			}
			if (asks.Load() > 0) != c.asking {
				t.Errorf("the campaign was asked %d times whether u1 goes on; want asked: %v", asks.Load(), c.asking)
			}
			gone(t, a, "u1", "u2")
		})
	}
}

// A run the server gave up on (a heartbeat found the attempt gone) ends
// at once, counting its unit at work neither done nor cancelled: the
// attempt that takes over goes on with that unit in its sandbox, which
// stays.
func TestRunUnitsTheServerGaveUpOnLeavesItsUnitToTheNextAttempt(t *testing.T) {
	a, _ := newActivities(t)
	a.StillWanted = (&wanted{}).stillWanted
	var asks atomic.Int32
	a.UnitGoesOn = func(context.Context) (bool, error) { asks.Add(1); return true, nil }
	ctx, cancel := context.WithCancelCause(t.Context())
	in := units("complete", "u1", "u2")
	in.Template.Manifest.TaskID = "slow-30"
	done := runAsync(ctx, a, in)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if st, err := a.Sandbox.Status(t.Context(), "u1"); err == nil && st.Phase == sandbox.PhaseRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("u1's sandbox never ran")
		}
	}
	cancel(serviceerror.NewNotFound("invalid activityID or activity already timed out or invoking workflow is completed"))
	r := <-done
	if r.err == nil {
		t.Fatal("a run the server gave up on ended as if it had finished")
	}
	if len(r.out.Done) != 0 || asks.Load() != 0 {
		t.Errorf("units done %+v, asked %d times whether u1 goes on; want none done, none asked: the next attempt goes on with u1", r.out.Done, asks.Load())
	}
	t.Cleanup(func() { _ = a.Sandbox.Cleanup(context.Background(), "u1") })
	if st, err := a.Sandbox.Status(t.Context(), "u1"); err != nil || st.Phase != sandbox.PhaseRunning {
		t.Errorf("u1's sandbox was removed under the attempt that takes over: %+v, %v", st, err)
	}
	gone(t, a, "u2")
}

// Each unit of a run is told as it starts and as it ends, with its
// campaign's workflow and its attempt; and the heartbeat a run sends
// before a unit, as the server shows it among the campaign's
// pending activities, reads back as the units done before it and that
// unit at work. Other activities' heartbeats add
// nothing.
func TestRunUnitsTellsEachUnitAsItEnds(t *testing.T) {
	a, env := newActivities(t)
	var mu sync.Mutex
	var told []status.UnitOutcome
	var started []status.UnitRef
	var wids []string
	var beats []*commonpb.Payloads
	a.UnitStarted = func(wid string, u status.UnitRef) {
		mu.Lock()
		defer mu.Unlock()
		started = append(started, u)
	}
	a.UnitEnded = func(wid string, u status.UnitOutcome) {
		mu.Lock()
		defer mu.Unlock()
		told, wids = append(told, u), append(wids, wid)
	}
	a.StillWanted = func(_ context.Context, p any) (bool, error) {
		b, err := converter.GetDefaultDataConverter().ToPayloads(p)
		mu.Lock()
		defer mu.Unlock()
		beats = append(beats, b)
		return true, err
	}
	in := units("complete", "u1", "u2", "u3")
	for i := range in.Units {
		in.Units[i].Attempt = i + 1
	}
	// By the name the readers of pending activities know it by.
	out := runUnitsNamed(t, env, status.RunUnitsName, in)
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 3 || !reflect.DeepEqual(told, out.Done) {
		t.Fatalf("told %+v; want the run's outcomes, %+v", told, out.Done)
	}
	for i, u := range told {
		if u.Attempt != i+1 || wids[i] == "" || wids[i] != wids[0] {
			t.Errorf("%s told of attempt %d, campaign %q", u.Key, u.Attempt, wids[i])
		}
	}
	if want := []status.UnitRef{{Key: "u1", Attempt: 1}, {Key: "u2", Attempt: 2}, {Key: "u3", Attempt: 3}}; !slices.Equal(started, want) {
		t.Errorf("told of units starting: %+v, want %+v", started, want)
	}
	// The heartbeats before u2 and u3.
	if len(beats) != 2 {
		t.Fatalf("%d heartbeats before units; want 2", len(beats))
	}
	pending := []*workflowpb.PendingActivityInfo{
		{ActivityType: &commonpb.ActivityType{Name: "RunSandboxed"}, HeartbeatDetails: beats[1]},
		{ActivityType: &commonpb.ActivityType{Name: status.RunUnitsName}},
		{ActivityType: &commonpb.ActivityType{Name: status.RunUnitsName}, HeartbeatDetails: beats[1]},
	}
	got := statetemporal.RunsProgressOf(pending)
	if !reflect.DeepEqual(got.Done, out.Done[:2]) || !slices.Equal(got.AtWork, []status.UnitRef{{Key: "u3", Attempt: 3}}) {
		t.Errorf("the pending runs read back as %+v; want u1 and u2's outcomes, u3 at work", got)
	}
}

// A unit whose sandbox the provider refuses fails at once, saying why
// once, and the run goes on to the next unit: another attempt would be
// refused the same way, so the run is not failed and tried again.
func TestRunUnitsFailsARefusedUnitAtOnce(t *testing.T) {
	a, env := newActivities(t)
	a.StillWanted = (&wanted{}).stillWanted
	in := units("complete", "u1", "u2")
	// A name no sandbox can have: the provider refuses it.
	in.Units[0].SandboxID = "not a sandbox name"
	out := runUnits(t, a, env, in)
	if got := keys(out); !slices.Equal(got, []string{"u1", "u2"}) {
		t.Fatalf("units done %v; want u1 and u2", got)
	}
	refused, next := out.Done[0], out.Done[1]
	if !strings.HasPrefix(refused.Error, "provision sandbox: ") || strings.Count(refused.Error, "provision") != 1 || !strings.Contains(refused.Error, "not a sandbox name") {
		t.Errorf("refused unit's error %q; want one \"provision sandbox: \" and the reason", refused.Error)
	}
	if next.Error != "" || next.Outcome.Status.Phase != protocol.PhaseComplete {
		t.Errorf("the unit after it: %+v; want it complete", next)
	}

	// On its own, the activity's refusal is not retried.
	_, err := env.ExecuteActivity(a.ProvisionSandbox, activity.ProvisionInput{SandboxID: "not a sandbox name"})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != activity.ErrSandboxRefused || !strings.HasPrefix(ae.Message(), "provision sandbox: ") {
		t.Errorf("ProvisionSandbox of a refused sandbox: %v; want a non-retryable %s error saying \"provision sandbox: \"", err, activity.ErrSandboxRefused)
	}
}

// What a unit's model calls used, its lost sandboxes' included, stays in
// what the campaign keeps of its outcome: the campaign's cost and its
// max_cost_per_campaign count it.
func TestRunUnitsKeepTheUnitsModelUsage(t *testing.T) {
	a, env := newActivities(t)
	a.StillWanted = (&wanted{}).stillWanted
	out := runUnits(t, a, env, units("complete", "lose-first"))
	if len(out.Done) != 1 {
		t.Fatalf("units done %v", keys(out))
	}
	o := out.Done[0].Outcome
	if u := o.Result.ModelUsage; u == nil || u.Requests != 3 || u.CostUSD != 0.75 {
		t.Errorf("the unit's usage %+v; want both its sandboxes': 3 requests, $0.75", u)
	}
	if u := o.LostUsage; u == nil || u.Requests != 2 || len(o.Lost) != 1 {
		t.Errorf("lost %q using %+v; want one sandbox lost, its 2 requests", o.Lost, u)
	}
}
