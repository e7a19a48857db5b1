package activity_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// newActivities runs the activities against a real local sandbox whose
// agent is testdata/agent.sh.
func newActivities(t *testing.T) (*activity.Activities, *testsuite.TestActivityEnvironment) {
	t.Helper()
	p := localSandboxes(t)
	a := &activity.Activities{Sandbox: p, PollInterval: 20 * time.Millisecond, MaxResultBytes: 4000}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	return a, env
}

// provision provisions a sandbox as in asks, removed when the test ends.
func provision(t *testing.T, a *activity.Activities, env *testsuite.TestActivityEnvironment, in activity.ProvisionInput) activity.SandboxRef {
	t.Helper()
	v, err := env.ExecuteActivity(a.ProvisionSandbox, in)
	if err != nil {
		t.Fatal(err)
	}
	var ref activity.SandboxRef
	if err := v.Get(&ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.ExecuteActivity(a.CleanupSandbox, activity.CleanupInput{Sandbox: ref}) })
	return ref
}

// start provisions a sandbox and submits a manifest whose title names the
// phase the stand-in agent reaches.
func start(t *testing.T, a *activity.Activities, env *testsuite.TestActivityEnvironment, id, phase string) activity.SandboxRef {
	t.Helper()
	ref := provision(t, a, env, activity.ProvisionInput{SandboxID: id})
	if _, err := env.ExecuteActivity(a.SubmitManifest, activity.SubmitManifestInput{Sandbox: ref, Manifest: protocol.Manifest{TaskID: id, Title: phase}}); err != nil {
		t.Fatal(err)
	}
	return ref
}

// waitFor waits for the agent in ref to reach phase (or a final one) and
// returns its status; an error fails the test.
func waitFor(t *testing.T, a *activity.Activities, env *testsuite.TestActivityEnvironment, ref activity.SandboxRef, phase protocol.Phase) protocol.Status {
	t.Helper()
	v, err := env.ExecuteActivity(a.WaitForAgentPhase, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{phase}})
	if err != nil {
		t.Fatal(err)
	}
	var st protocol.Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestWaitForAgentPhaseThenReadResult(t *testing.T) {
	a, env := newActivities(t)
	ref := start(t, a, env, "wait-ok", "awaiting_input")
	if st := waitFor(t, a, env, ref, protocol.PhaseAwaitingInput); st.Phase != protocol.PhaseAwaitingInput {
		t.Fatalf("status %+v", st)
	}
	v, err := env.ExecuteActivity(a.ReadResult, activity.ReadResultInput{Sandbox: ref})
	if err != nil {
		t.Fatal(err)
	}
	var r protocol.Result
	if err := v.Get(&r); err != nil {
		t.Fatal(err)
	}
	diffs := r.Repositories[0].Diffs
	if len(diffs[0].Diff) != 3000 || diffs[0].Truncated || diffs[1].Diff != "" || !diffs[1].Truncated {
		t.Errorf("diffs past MaxResultBytes must be dropped and marked: %d %v / %d %v", len(diffs[0].Diff), diffs[0].Truncated, len(diffs[1].Diff), diffs[1].Truncated)
	}
}

// AwaitAgentResult hands a new sandbox's agent its manifest, and gives
// the phase it reached and its result in one step.
func TestAwaitResultHandsTheManifest(t *testing.T) {
	a, env := newActivities(t)
	ref := provision(t, a, env, activity.ProvisionInput{SandboxID: "with-manifest"})
	v, err := env.ExecuteActivity(a.AwaitAgentResult, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseAwaitingInput},
		Manifest: &protocol.Manifest{TaskID: "with-manifest", Title: "awaiting_input"}})
	if err != nil {
		t.Fatal(err)
	}
	var out activity.AgentOutcome
	if err := v.Get(&out); err != nil || out.Status.Phase != protocol.PhaseAwaitingInput {
		t.Fatalf("outcome %+v, %v", out.Status, err)
	}
	if len(out.Result.Repositories) == 0 || len(out.Result.Repositories[0].Diffs) == 0 {
		t.Fatalf("no result with the phase: %+v", out.Result)
	}
}

// AwaitAgentResult with CleanUp removes the sandbox of an agent it finds
// finished, after reading its result, and keeps one that awaits input.
func TestAwaitResultRemovesAFinishedSandbox(t *testing.T) {
	a, env := newActivities(t)
	for _, phase := range []protocol.Phase{protocol.PhaseAwaitingInput, protocol.PhaseFailed} {
		id := "clean-" + string(phase)
		ref := provision(t, a, env, activity.ProvisionInput{SandboxID: id})
		v, err := env.ExecuteActivity(a.AwaitAgentResult, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseAwaitingInput},
			Manifest: &protocol.Manifest{TaskID: id, Title: string(phase)}, CleanUp: true})
		if err != nil {
			t.Fatal(err)
		}
		var out activity.AgentOutcome
		if err := v.Get(&out); err != nil || out.Status.Phase != phase || len(out.Result.Repositories) == 0 {
			t.Fatalf("%s: outcome %+v, %v", phase, out, err)
		}
		_, err = a.Sandbox.Status(context.Background(), ref.ID)
		finished := phase.Terminal()
		if gone := errors.Is(err, sandbox.ErrNotFound); gone != finished || out.CleanedUp != finished {
			t.Errorf("%s: sandbox gone %v (%v), reported removed %v; want both %v", phase, gone, err, out.CleanedUp, finished)
		}
	}
}

func TestWaitReturnsTerminalPhaseItDidNotAskFor(t *testing.T) {
	a, env := newActivities(t)
	ref := start(t, a, env, "wait-failed", "failed")
	if st := waitFor(t, a, env, ref, protocol.PhaseAwaitingInput); st.Phase != protocol.PhaseFailed {
		t.Fatalf("a failed agent must end the wait: %+v", st)
	}
}

func TestWaitFailsWithoutRetryWhenTheAgentExits(t *testing.T) {
	a, env := newActivities(t)
	ref := start(t, a, env, "exit-3", "complete")
	_, err := env.ExecuteActivity(a.WaitForAgentPhase, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseComplete}})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activity.ErrAgentExited || !ae.NonRetryable() {
		t.Fatalf("want a non-retryable %s error, got %v", activity.ErrAgentExited, err)
	}
	if !strings.Contains(ae.Error(), "exited (code 3) without finishing") {
		t.Errorf("message: %v", ae)
	}
}

func TestWaitOnAGoneSandbox(t *testing.T) {
	a, env := newActivities(t)
	_, err := env.ExecuteActivity(a.WaitForAgentPhase, activity.WaitInput{Sandbox: activity.SandboxRef{ID: "never-made"}, Phases: []protocol.Phase{protocol.PhaseComplete}})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activity.ErrSandboxGone {
		t.Fatalf("want %s, got %v", activity.ErrSandboxGone, err)
	}
}

func TestSteeringReachesTheSandbox(t *testing.T) {
	a, env := newActivities(t)
	ref := start(t, a, env, "steer", "awaiting_input")
	if _, err := env.ExecuteActivity(a.SubmitSteering, activity.SteeringInput{Sandbox: ref, Steering: protocol.Steering{Action: protocol.ActionSteer, Prompt: "also tests", Iteration: 1}}); err != nil {
		t.Fatal(err)
	}
	rc, err := a.Sandbox.CopyFrom(t.Context(), ref.ID, ".fleetlift/steering.json")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := new(strings.Builder)
	if _, err := io.Copy(buf, rc); err != nil || !strings.Contains(buf.String(), `"prompt": "also tests"`) {
		t.Errorf("steering.json: %q %v", buf.String(), err)
	}
}

// A sandbox's files are written by code the worker does not trust to keep
// them small: the worker reads a bounded amount, and what it records in
// workflow history fits there.
func TestSandboxFilesAreReadWithinBounds(t *testing.T) {
	a, env := newActivities(t)
	ref := start(t, a, env, "bounds", "awaiting_input")
	if _, err := env.ExecuteActivity(a.WaitForAgentPhase, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseAwaitingInput}}); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		t.Helper()
		if err := a.Sandbox.CopyTo(t.Context(), ref.ID, bytes.NewReader(data), ".fleetlift/"+name); err != nil {
			t.Fatal(err)
		}
	}
	nonRetryable := func(err error) bool {
		var ae *temporal.ApplicationError
		return errors.As(err, &ae) && ae.Type() == activity.ErrResultTooLarge && ae.NonRetryable()
	}

	// 300,000 changed files: recorded as the first thousand and a count.
	many := protocol.Result{Status: protocol.PhaseAwaitingInput, AgentOutput: strings.Repeat("o", 1<<20)}
	rr := protocol.RepositoryResult{Name: "svc", Status: "success", Tree: "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}
	for i := range 300_000 {
		p := fmt.Sprintf("dir/file-%06d.go", i)
		rr.FilesModified = append(rr.FilesModified, p)
		rr.Diffs = append(rr.Diffs, protocol.FileDiff{Path: p, Status: "modified", Diff: "+x\n"})
	}
	many.Repositories = []protocol.RepositoryResult{rr}
	data, _ := json.Marshal(many)
	write(protocol.ResultFile, data)
	v, err := env.ExecuteActivity(a.ReadResult, activity.ReadResultInput{Sandbox: ref})
	if err != nil {
		t.Fatalf("ReadResult of 300,000 files: %v", err)
	}
	var got protocol.Result
	if err := v.Get(&got); err != nil {
		t.Fatal(err)
	}
	enc, _ := json.Marshal(got)
	r0 := got.Repositories[0]
	if len(enc) > 2<<20 || len(r0.FilesModified) != 1000 || len(r0.Diffs) != 1000 || r0.FilesOmitted != 299_000 || r0.Tree != rr.Tree {
		t.Errorf("recorded %d bytes, %d files, %d diffs, %d omitted, tree %q; want under 2 MiB, 1000, 1000, 299000 and the tree kept",
			len(enc), len(r0.FilesModified), len(r0.Diffs), r0.FilesOmitted, r0.Tree)
	}
	if len(got.AgentOutput) > 20<<10 {
		t.Errorf("agent output of %d bytes recorded", len(got.AgentOutput))
	}

	// A report that fails its schema in 5,000 ways: recorded with a
	// hundred of them listed.
	check := activity.ReportCheckOf(protocol.Manifest{Output: &protocol.Output{
		Schema: json.RawMessage(`{"properties": {"items": {"type": "array", "items": {"type": "string"}}}}`)}})
	readReport := func(fm map[string]any) (*protocol.Report, string) {
		t.Helper()
		data, _ := json.Marshal(protocol.Result{Status: protocol.PhaseComplete, Repositories: []protocol.RepositoryResult{{
			Name: "svc", Status: "success", Report: &protocol.Report{Frontmatter: fm, Raw: "---\n..."},
		}}})
		write(protocol.ResultFile, data)
		v, err := env.ExecuteActivity(a.ReadResult, activity.ReadResultInput{Sandbox: ref, Reports: check})
		if err != nil {
			t.Fatalf("ReadResult of a bulky report: %v", err)
		}
		var got protocol.Result
		if err := v.Get(&got); err != nil {
			t.Fatal(err)
		}
		rr := got.Repositories[0]
		if rr.Status != "failed" || rr.ErrorKind != protocol.ReportSchemaInvalid || len(rr.Error) > 4<<10 {
			t.Errorf("bulky report's repository: %s %s, error of %d bytes", rr.Status, rr.ErrorKind, len(rr.Error))
		}
		return rr.Report, rr.Error
	}
	rep, _ := readReport(map[string]any{"items": make([]any, 5000)})
	if rep == nil || len(rep.ValidationErrors) != 100 || rep.ValidationErrors[0] != "/items/0: got null, want string" || rep.ValidationErrors[99] != "and 4901 more" {
		t.Errorf("a report with 5,000 violations recorded as %+v", rep)
	}
	// A 1 MiB frontmatter is neither checked nor recorded: the report
	// fails, its raw text kept.
	var items []any
	for range 5000 {
		items = append(items, strings.Repeat("i", 200))
	}
	rep, msg := readReport(map[string]any{"items": items})
	if !strings.Contains(msg, "the frontmatter is 992 KiB, over the 64 KiB the worker checks against output.schema") {
		t.Errorf("a 1 MiB frontmatter failed with %q", msg)
	}
	if rep == nil || rep.ValidationErrors != nil || rep.Frontmatter != nil ||
		!strings.Contains(rep.Warning, "frontmatter is over the 64 KiB") || rep.Raw != "---\n..." {
		t.Errorf("a 1 MiB frontmatter recorded as %+v", rep)
	}

	// A result.json past 64 MiB is refused, not read into memory.
	huge := append([]byte(`{"status":"awaiting_input","agent_output":"`), bytes.Repeat([]byte("x"), 65<<20)...)
	write(protocol.ResultFile, append(huge, `"}`...))
	if _, err := env.ExecuteActivity(a.ReadResult, activity.ReadResultInput{Sandbox: ref}); !nonRetryable(err) {
		t.Errorf("ReadResult of a 65 MiB result.json: %v; want a non-retryable %s", err, activity.ErrResultTooLarge)
	}

	// So is a status.json past 64 KiB.
	write(protocol.StatusFile, append([]byte(`{"phase":"awaiting_input","message":"`), append(bytes.Repeat([]byte("m"), 1<<20), `"}`...)...))
	if _, err := env.ExecuteActivity(a.WaitForAgentPhase, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseAwaitingInput}}); !nonRetryable(err) {
		t.Errorf("WaitForAgentPhase on a 1 MiB status.json: %v; want a non-retryable %s", err, activity.ErrResultTooLarge)
	}
}
