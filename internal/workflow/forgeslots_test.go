package workflow_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// slotAsks asks the slots in env for a slot of each id as its time
// passes (from the start), and records when each was granted, or the
// error it was answered with.
type slotAsks struct {
	mu      sync.Mutex
	granted map[string]time.Time
	refused map[string]error
}

func askSlots(env *testsuite.TestWorkflowEnvironment, asks map[string]time.Duration) *slotAsks {
	a := &slotAsks{granted: map[string]time.Time{}, refused: map[string]error{}}
	for id, at := range asks {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(workflow.UpdateForgeSlot, id, &testsuite.TestUpdateCallback{
				OnAccept: func() {},
				OnReject: func(err error) { a.refuse(id, err) },
				OnComplete: func(v any, err error) {
					if err != nil {
						a.refuse(id, err)
						return
					}
					a.mu.Lock()
					defer a.mu.Unlock()
					a.granted[id] = env.Now()
				},
			}, workflow.ForgeSlotRequest{ID: id, Caller: "test"})
		}, at)
	}
	return a
}

func (a *slotAsks) refuse(id string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refused[id] = err
}

func (a *slotAsks) at(id string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.granted[id]
	return t, ok
}

// slotsEnv is a test environment for the slots, and its start.
func slotsEnv() (time.Time, *testsuite.TestWorkflowEnvironment) {
	start := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	return start, env
}

// querySlotsAt is what the slots in env answer once at has passed from
// the start (filled in then).
func querySlotsAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, at time.Duration) *workflow.ForgeSlotsState {
	var st workflow.ForgeSlotsState
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(workflow.QueryForgeSlots)
		if err == nil {
			err = v.Get(&st)
		}
		if err != nil {
			t.Errorf("query the slots: %v", err)
		}
	}, at)
	return &st
}

func release(env *testsuite.TestWorkflowEnvironment, id string, at time.Duration) {
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflow.SignalForgeRelease, id) }, at)
}

// With two slots, two of three transfers asked at once start at once
// and the third once the first gives its slot back; the slots then end,
// idle.
func TestForgeSlotsBoundTransfersAtOnce(t *testing.T) {
	start, env := slotsEnv()
	asks := askSlots(env, map[string]time.Duration{"a": 0, "b": time.Millisecond, "c": 2 * time.Millisecond})
	release(env, "a", 40*time.Second)
	release(env, "b", 50*time.Second)
	release(env, "c", 90*time.Second)
	mid := querySlotsAt(t, env, 10*time.Second)
	env.ExecuteWorkflow(workflow.ForgeSlots, workflow.ForgeSlotsInput{Key: "github.com/bot", Slots: 2})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the slots ended with %v; want them to end idle", err)
	}
	for id, want := range map[string]time.Duration{"a": 0, "b": 0, "c": 40 * time.Second} {
		at, ok := asks.at(id)
		if d := at.Sub(start); !ok || d < want || d > want+time.Second {
			t.Errorf("slot %s granted at +%s (granted: %v); want +%s", id, d, ok, want)
		}
	}
	if len(mid.Held) != 2 || mid.Waiting != 1 || mid.Slots != 2 {
		t.Errorf("after 10 s the slots say %+v; want 2 of 2 held and 1 waiting", mid)
	}
}

// A slot its worker never gives back (it died mid-transfer) is taken
// back at the end of its lease, and the transfer waiting for it starts.
func TestForgeSlotsTakeBackALostSlot(t *testing.T) {
	start, env := slotsEnv()
	asks := askSlots(env, map[string]time.Duration{"lost": 0, "next": time.Second})
	release(env, "next", 11*time.Minute)
	end := querySlotsAt(t, env, 10*time.Minute+30*time.Second)
	env.ExecuteWorkflow(workflow.ForgeSlots, workflow.ForgeSlotsInput{Key: "github.com/bot", Slots: 1, Lease: 10 * time.Minute})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the slots ended with %v; want them to end idle", err)
	}
	at, ok := asks.at("next")
	if d := at.Sub(start); !ok || d < 10*time.Minute || d > 10*time.Minute+2*time.Second {
		t.Errorf("the transfer after the lost one started at +%s (granted: %v); want at the end of the lease, +10m", d, ok)
	}
	if end.Expired != 1 || len(end.Held) != 1 || end.Held[0].ID != "next" {
		t.Errorf("after the lease the slots say %+v; want 1 expired and next held", end)
	}
}

// An ask given back before it is granted (its transfer was cancelled
// while it waited) takes no slot: the next ask gets it.
func TestForgeSlotsForgetAWithdrawnAsk(t *testing.T) {
	start, env := slotsEnv()
	asks := askSlots(env, map[string]time.Duration{"a": 0, "gone": time.Second, "b": 2 * time.Second})
	release(env, "gone", 5*time.Second)
	release(env, "a", 20*time.Second)
	release(env, "b", 30*time.Second)
	// Given back before its ask arrives: the ask is refused on arrival.
	release(env, "late", 6*time.Second)
	asks2 := askSlots(env, map[string]time.Duration{"late": 7 * time.Second})
	env.ExecuteWorkflow(workflow.ForgeSlots, workflow.ForgeSlotsInput{Key: "github.com/bot", Slots: 1})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the slots ended with %v; want them to end idle", err)
	}
	if at, ok := asks.at("b"); !ok || at.Sub(start) < 20*time.Second || at.Sub(start) > 21*time.Second {
		t.Errorf("b granted at +%s (granted: %v); want +20s, when a gave its slot back", at.Sub(start), ok)
	}
	for _, c := range []struct {
		a  *slotAsks
		id string
	}{{asks, "gone"}, {asks2, "late"}} {
		c.a.mu.Lock()
		err, granted := c.a.refused[c.id], c.a.granted[c.id]
		c.a.mu.Unlock()
		if err == nil || !strings.Contains(err.Error(), "given back before it was granted") || !granted.IsZero() {
			t.Errorf("the withdrawn ask %s: granted %v, refused with %v; want it refused as given back", c.id, granted, err)
		}
	}
}

// After GrantsPerRun grants the slots continue as new, carrying the
// slots still held.
func TestForgeSlotsContinueAsNewWithWhatIsHeld(t *testing.T) {
	_, env := slotsEnv()
	askSlots(env, map[string]time.Duration{"a": 0, "b": time.Millisecond})
	env.ExecuteWorkflow(workflow.ForgeSlots, workflow.ForgeSlotsInput{Key: "github.com/bot", Slots: 4, GrantsPerRun: 2})
	var can *sdkworkflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("the slots ended with %v; want them to continue as new", err)
	}
	var next workflow.ForgeSlotsInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if len(next.Held) != 2 || next.Total != 2 || next.Slots != 4 {
		t.Errorf("the next run starts with %+v; want the 2 slots held, 2 granted in all", next)
	}
}
