package devserver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// waitSandboxes waits until the sandbox root holds n sandboxes.
func (e *env) waitSandboxes(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if entries, _ := os.ReadDir(filepath.Join(e.root, "sandboxes")); len(entries) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d sandboxes started", n)
		}
	}
}

// campaignState asks the campaign id for its state.
func (e *env) campaignState(t *testing.T, id string) status.CampaignState {
	t.Helper()
	v, err := e.c.QueryWorkflow(context.Background(), id, "", status.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st status.CampaignState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func phasesOf(st status.CampaignState) string {
	var s []string
	for _, u := range st.Units {
		s = append(s, u.Key+"="+string(u.Phase))
	}
	return strings.Join(s, " ")
}

// runOneAtATime starts campaign id over n repositories whose command
// sleeps sleep seconds, one unit at a time, with a worker, and returns
// once its first unit works in its sandbox.
func runOneAtATime(t *testing.T, id string, n int, sleep string) (*env, []string, client.WorkflowRun) {
	t.Helper()
	e := start(t)
	urls := bareRepos(t, e.root, n)
	w := e.newWorker(t)
	t.Cleanup(w.Stop)
	in := campaignOf(id, urls, sleep)
	in.MaxParallel = 1
	run := runCampaign(t, e, in)
	e.waitSandboxes(t, 1)
	return e, urls, run
}

// On the server, a suspension cancels the run of units at work (its
// gate): the unit at work finishes and opens its pull request, no
// further unit starts while suspended (the run heartbeats before each
// and learns it was cancelled), and the units it gave back start once
// resumed, each once.
func TestSuspendedCampaignsRunStartsNoFurtherUnit(t *testing.T) {
	e, urls, run := runOneAtATime(t, "gate", 4, "2")
	ctx := context.Background()
	if err := e.c.SignalWorkflow(ctx, run.GetID(), "", workflow.SignalSuspend, nil); err != nil {
		t.Fatal(err)
	}
	// The run reports once svc-0 ends: svc-0 completed, the rest back.
	var st status.CampaignState
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if st = e.campaignState(t, run.GetID()); phasesOf(st) == "svc-0=completed svc-1=pending svc-2=pending svc-3=pending" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("suspended: %s; want svc-0 completed, the rest given back", phasesOf(st))
		}
	}
	if got := branches(t, strings.TrimPrefix(urls[1], "file://")); len(got) != 0 {
		t.Errorf("svc-1 has branches %v while the campaign is suspended", got)
	}
	if err := e.c.SignalWorkflow(ctx, run.GetID(), "", workflow.SignalResume, nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := run.Get(wctx, &st); err != nil {
		t.Fatal(err)
	}
	if st.Summary.Completed != 4 {
		t.Fatalf("after resume: %s", phasesOf(st))
	}
	for _, u := range st.Units {
		if u.Attempts != 1 {
			t.Errorf("%s: %d attempts; a unit given back never started", u.Key, u.Attempts)
		}
	}
	checkBumped(t, urls, "auto/bump/gate")
}

// A campaign cancelled while a run of units works ends the unit at work
// (its sandbox removed before it pushed) and starts no other.
func TestCancelledCampaignEndsTheUnitAtWork(t *testing.T) {
	e, urls, run := runOneAtATime(t, "cancel", 3, "20")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.c.CancelWorkflow(ctx, run.GetID(), ""); err != nil {
		t.Fatal(err)
	}
	var ce *temporal.CanceledError
	if err := run.Get(ctx, nil); !errors.As(err, &ce) {
		t.Fatalf("campaign ended with %v; want it cancelled", err)
	}
	for _, u := range urls {
		if got := branches(t, strings.TrimPrefix(u, "file://")); len(got) != 0 {
			t.Errorf("%s has branches %v: want none, the unit at work ended before it pushed", u, got)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(e.root, "sandboxes")); len(left) != 0 {
		t.Errorf("%d sandboxes left behind", len(left))
	}
}
