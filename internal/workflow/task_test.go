package workflow_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// agentScript stands in for the agent behind the sandbox activities: it
// answers AwaitAgentResult with the next phase for the steering it was
// given, and records what the workflow did.
type agentScript struct {
	mu        sync.Mutex
	first     protocol.Phase // phase after the manifest
	onSteer   func(protocol.Steering) protocol.Phase
	steerings []protocol.Steering
	current   protocol.Phase
	iteration int
	cleaned   int
	// cleanupSteps counts the CleanupSandbox steps of their own (not the
	// removals a wait did); failCleanups is how many removals fail first.
	cleanupSteps int
	failCleanups int
	waitErr      error
	// pushedTree, when set, is the tree the agent reports it pushed
	// instead of the one its result showed (scriptTree).
	pushedTree string
	// lose, when set, is asked before each wait for the agent (counted
	// from 0) whether the sandbox is lost then: the wait fails as the
	// activity reports an agent that died without finishing.
	lose  func(wait int) bool
	waits int
	// sandboxes are the sandboxes provisioned, in order; rerunTree, when
	// set, is the tree the work comes out as in every sandbox after the
	// first.
	sandboxes []string
	rerunTree string
	// repos, when set, are the agent's results instead of one changed
	// repository.
	repos []protocol.RepositoryResult
	// notes are every provisioned sandbox's; credentials what each
	// provisioning was given.
	notes       []string
	credentials []*activity.Credentials
	// usedAt is what the gateway counted for the sandboxes by their
	// order (CleanupSandbox reports it); usage is what the agent's
	// result says its own sandbox used; spent is the limits.spent of
	// each manifest handed over.
	usedAt map[int]*protocol.ModelUsage
	usage  *protocol.ModelUsage
	spent  []*protocol.ModelUsage
	// provisionErr, when set, is what every provisioning fails with.
	provisionErr error
	// full is how many provisionings find the worker full first;
	// provisions counts every provisioning asked for.
	full, provisions int
}

// scriptTree is the tree of the change the scripted agent collects.
const scriptTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

func (s *agentScript) register(env *testsuite.TestWorkflowEnvironment) {
	var a *activity.Activities
	env.OnActivity(a.ProvisionSandbox, mockAny, mockAny).Return(func(_ context.Context, in activity.ProvisionInput) (activity.SandboxRef, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.provisions++
		if s.full > 0 {
			s.full--
			return activity.SandboxRef{}, temporal.NewNonRetryableApplicationError("this worker runs as many sandboxes as it may at once (1, its --max-sandboxes)", activity.ErrWorkerFull, nil)
		}
		if s.provisionErr != nil {
			// A sandbox asked for, made or not, is removed after, once.
			if !slices.Contains(s.sandboxes, in.SandboxID) {
				s.sandboxes = append(s.sandboxes, in.SandboxID)
			}
			return activity.SandboxRef{}, s.provisionErr
		}
		s.sandboxes = append(s.sandboxes, in.SandboxID)
		s.credentials = append(s.credentials, in.Credentials)
		s.current, s.iteration = "", 0
		return activity.SandboxRef{ID: in.SandboxID, Provider: "script", Notes: s.notes}, nil
	})
	submit := func(_ context.Context, in activity.SubmitManifestInput) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.current = s.first
		s.spent = append(s.spent, in.Manifest.Limits.Spent)
		return nil
	}
	wait := func(_ context.Context, in activity.WaitInput) (protocol.Status, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.waitErr != nil {
			return protocol.Status{}, s.waitErr
		}
		n := s.waits
		s.waits++
		if s.lose != nil && s.lose(n) {
			return protocol.Status{}, temporal.NewNonRetryableApplicationError("agent in sandbox exited (code 137) without finishing: agent killed by signal 9", activity.ErrAgentExited, nil)
		}
		return protocol.Status{Phase: s.current, Iteration: s.iteration}, nil
	}
	read := func(context.Context, activity.ReadResultInput) (protocol.Result, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		tree := scriptTree
		if s.rerunTree != "" && len(s.sandboxes) > 1 {
			tree = s.rerunTree
		}
		if s.repos != nil {
			return protocol.Result{Status: s.current, Repositories: s.repos, ModelUsage: s.usage}, nil
		}
		rr := protocol.RepositoryResult{Name: "svc", Status: "success", FilesModified: []string{"main.go"}, Tree: tree}
		if s.current == protocol.PhaseComplete {
			pushed := tree
			if s.pushedTree != "" {
				pushed = s.pushedTree
			}
			rr.PullRequest = &protocol.PullRequestInfo{URL: "file:///svc#auto/x", Branch: "auto/x", Commit: "c0ffee", Tree: pushed}
		}
		return protocol.Result{Status: s.current, Repositories: []protocol.RepositoryResult{rr}, ModelUsage: s.usage}, nil
	}
	cleanup := func(context.Context, activity.CleanupInput) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.failCleanups > 0 {
			s.failCleanups--
			return errors.New("device or resource busy")
		}
		s.cleaned++
		return nil
	}
	env.OnActivity(a.AwaitAgentResult, mockAny, mockAny).Return(awaitResult(submit, wait, read, cleanup))
	env.OnActivity(a.SubmitSteering, mockAny, mockAny).Return(func(_ context.Context, in activity.SteeringInput) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.steerings = append(s.steerings, in.Steering)
		s.iteration = in.Steering.Iteration
		if s.onSteer != nil {
			s.current = s.onSteer(in.Steering)
		}
		return nil
	})
	env.OnActivity(a.CleanupSandbox, mockAny, mockAny).Return(func(ctx context.Context, in activity.CleanupInput) (activity.CleanupOutcome, error) {
		s.mu.Lock()
		s.cleanupSteps++
		used := s.usedAt[slices.Index(s.sandboxes, in.Sandbox.ID)]
		s.mu.Unlock()
		return activity.CleanupOutcome{ModelUsage: used}, cleanup(ctx, in)
	})
}

var mockAny = mock.Anything

// standardSteer is how the agent answers steering.
func standardSteer(st protocol.Steering) protocol.Phase {
	switch st.Action {
	case protocol.ActionApprove:
		return protocol.PhaseComplete
	case protocol.ActionSteer:
		return protocol.PhaseAwaitingInput
	}
	return protocol.PhaseCancelled
}

func taskInput() workflow.TaskInput {
	return workflow.TaskInput{ID: "t", Manifest: protocol.Manifest{TaskID: "t", Mode: protocol.ModeTransform, RequireApproval: true}, Timeout: time.Hour}
}

func runTask(t *testing.T, s *agentScript, in workflow.TaskInput, during func(env *testsuite.TestWorkflowEnvironment)) (status.TaskResult, *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflow.Task)
	s.register(env)
	registerFollower(env)
	if during != nil {
		during(env)
	}
	env.ExecuteWorkflow(workflow.Task, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var res status.TaskResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	if s.cleaned != len(s.sandboxes) {
		t.Errorf("sandboxes cleaned up %d times, want once each of %d", s.cleaned, len(s.sandboxes))
	}
	return res, env
}

func signalAt(env *testsuite.TestWorkflowEnvironment, after time.Duration, name string, arg any) {
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(name, arg) }, after)
}

// decideAt signals a decision on the result awaiting approval then, as
// `fleetlift approve ID --digest D` does after reading D from the status:
// arg makes the payload from the current digest.
func decideAt(t *testing.T, env *testsuite.TestWorkflowEnvironment, after time.Duration, name string, arg func(digest string) any) {
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(name, arg(queryTask(t, env).ResultDigest))
	}, after)
}

func approval(d string) any { return workflow.DecisionSignal{ResultDigest: d} }

func steering(prompt string) func(string) any {
	return func(d string) any {
		return workflow.SteerSignal{Prompt: prompt, DecisionSignal: workflow.DecisionSignal{ResultDigest: d}}
	}
}

func TestTaskWithoutApprovalCompletes(t *testing.T) {
	s := &agentScript{first: protocol.PhaseComplete}
	in := taskInput()
	in.Manifest.RequireApproval = false
	res, _ := runTask(t, s, in, nil)
	if res.Phase != status.TaskCompleted || len(res.Repositories) != 1 || res.Repositories[0].PullRequest == nil {
		t.Errorf("result: %+v", res)
	}
	if len(s.steerings) != 0 {
		t.Errorf("no steering expected, got %+v", s.steerings)
	}
}

// A report-mode task's result carries each repository's report as the
// agent collected it: the failed one with its raw text, its validation
// errors and how it failed, the empty one with its warning.
func TestTaskReportsReachTheResult(t *testing.T) {
	valid := &protocol.Report{Frontmatter: map[string]any{"score": 8.0}, Body: "# fine", Raw: "---\nscore: 8\n---\n# fine"}
	invalid := &protocol.Report{Frontmatter: map[string]any{"score": 11.0}, Raw: "---\nscore: 11\n---\n",
		ValidationErrors: []string{"/score: maximum: got 11, want 10"}}
	empty := &protocol.Report{Warning: protocol.ReportEmptyWarning}
	s := &agentScript{first: protocol.PhaseComplete, repos: []protocol.RepositoryResult{
		{Name: "a", Status: "success", Report: valid},
		{Name: "b", Status: "failed", Report: invalid, Error: "frontmatter does not match output.schema", ErrorKind: protocol.ReportSchemaInvalid},
		{Name: "c", Status: "success", Report: empty},
	}}
	in := taskInput()
	in.Manifest.Mode, in.Manifest.RequireApproval = protocol.ModeReport, false
	res, _ := runTask(t, s, in, nil)
	if res.Phase != status.TaskCompleted || len(res.Repositories) != 3 {
		t.Fatalf("result: %+v", res)
	}
	a, b, c := res.Repositories[0], res.Repositories[1], res.Repositories[2]
	if a.Report == nil || a.Report.Body != "# fine" || a.ErrorKind != "" {
		t.Errorf("valid report: %+v", a)
	}
	if b.Status != "failed" || b.ErrorKind != protocol.ReportSchemaInvalid || b.Report == nil || b.Report.Raw != invalid.Raw ||
		len(b.Report.ValidationErrors) != 1 {
		t.Errorf("failed report: %+v", b)
	}
	if c.Report == nil || c.Report.Warning != protocol.ReportEmptyWarning {
		t.Errorf("empty report: %+v", c)
	}
}

func TestTaskApprove(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(status.QueryStatus)
			if err != nil {
				t.Fatal(err)
			}
			var st status.TaskState
			if err := v.Get(&st); err != nil {
				t.Fatal(err)
			}
			if st.Phase != status.TaskAwaitingApproval || st.Result == nil || st.Result.Repositories[0].FilesModified[0] != "main.go" {
				t.Errorf("while waiting: %+v", st)
			}
			env.SignalWorkflow(workflow.SignalApprove, workflow.DecisionSignal{ResultDigest: st.ResultDigest})
		}, time.Minute)
	})
	if res.Phase != status.TaskCompleted || res.Repositories[0].PullRequest == nil {
		t.Errorf("result: %+v", res)
	}
	if len(s.steerings) != 1 || s.steerings[0].Action != protocol.ActionApprove {
		t.Errorf("steerings: %+v", s.steerings)
	}
}

func TestTaskSteerTwiceThenApprove(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		decideAt(t, env, time.Minute, workflow.SignalSteer, steering("also update tests"))
		decideAt(t, env, 2*time.Minute, workflow.SignalSteer, steering("use slog.Info"))
		decideAt(t, env, 3*time.Minute, workflow.SignalApprove, approval)
	})
	if res.Phase != status.TaskCompleted || res.Steers != 2 {
		t.Errorf("result: %+v", res)
	}
	var got []string
	for _, st := range s.steerings {
		got = append(got, string(st.Action)+":"+st.Prompt)
	}
	want := "steer:also update tests,steer:use slog.Info,approve:"
	if strings.Join(got, ",") != want {
		t.Errorf("steerings %v, want %s", got, want)
	}
	if s.steerings[1].Iteration != 2 {
		t.Errorf("second steer iteration %d, want 2", s.steerings[1].Iteration)
	}
}

func TestTaskReject(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		decideAt(t, env, time.Minute, workflow.SignalReject, approval)
	})
	if res.Phase != status.TaskCancelled || res.Error != "rejected" {
		t.Errorf("result: %+v", res)
	}
	if len(s.steerings) != 1 || s.steerings[0].Action != protocol.ActionCancel {
		t.Errorf("the agent must be told to stop: %+v", s.steerings)
	}
	if res.Repositories[0].PullRequest != nil {
		t.Error("a rejected task must not have a pull request")
	}
}

func TestTaskCancelWorkflowWhileAwaiting(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	})
	if res.Phase != status.TaskCancelled {
		t.Errorf("result: %+v", res)
	}
	if len(s.steerings) != 1 || s.steerings[0].Action != protocol.ActionCancel {
		t.Errorf("the agent must be told to stop: %+v", s.steerings)
	}
}

func TestTaskApprovalTimeout(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
	in := taskInput()
	in.ApprovalTimeout = 24 * time.Hour
	res, _ := runTask(t, s, in, nil)
	if res.Phase != status.TaskCancelled || !strings.Contains(res.Error, "no approval within 24h0m0s") {
		t.Errorf("result: %+v", res)
	}
}

func TestTaskAgentTimeout(t *testing.T) {
	s := &agentScript{first: protocol.PhaseExecuting,
		waitErr: temporal.NewTimeoutError(0, errors.New("start-to-close"))}
	res, _ := runTask(t, s, taskInput(), nil)
	if res.Phase != status.TaskFailed || !strings.Contains(res.Error, "agent: ") {
		t.Errorf("result: %+v", res)
	}
}

// A task whose sandbox cannot be provisioned says why, and names the
// step once: the activity's own error names it already, a timeout does
// not.
func TestTaskProvisioningFailureNamesTheStepOnce(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{temporal.NewNonRetryableApplicationError("provision sandbox: image golang: No such image (no image is pulled: build or load it on the engine)", activity.ErrSandboxRefused, nil),
			"provision sandbox: image golang: No such image (no image is pulled: build or load it on the engine)"},
		{temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil), "provision sandbox: timed out (StartToClose)"},
	} {
		s := &agentScript{first: protocol.PhaseComplete, provisionErr: c.err}
		res, _ := runTask(t, s, taskInput(), nil)
		if res.Phase != status.TaskFailed || res.Error != c.want {
			t.Errorf("provisioning failed with %v: result %s %q; want failed %q", c.err, res.Phase, res.Error, c.want)
		}
	}
}

// A task that finds the worker full waits and asks again, until a worker
// has room for its sandbox; then it runs as any other.
func TestTaskWaitsForAWorkerWithRoom(t *testing.T) {
	s := &agentScript{first: protocol.PhaseComplete, full: 4}
	in := taskInput()
	in.Manifest.RequireApproval = false
	var meanwhile status.TaskState
	res, _ := runTask(t, s, in, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { meanwhile = queryTask(t, env) }, 5*time.Second)
	})
	if meanwhile.Phase != status.TaskProvisioning || !strings.Contains(meanwhile.Message, "waiting for a worker with room") {
		t.Errorf("while it waited, the task said %s %q; want provisioning, waiting for a worker with room", meanwhile.Phase, meanwhile.Message)
	}
	if res.Phase != status.TaskCompleted || res.Error != "" {
		t.Fatalf("result %s %q; want completed", res.Phase, res.Error)
	}
	if s.provisions != 5 || len(s.sandboxes) != 1 {
		t.Errorf("%d provisionings, %d sandboxes; want 5 (4 finding the worker full) and 1", s.provisions, len(s.sandboxes))
	}
}

// The wait that finds the agent finished removes its sandbox: no step of
// its own follows, unless that removal failed.
func TestTaskFinishedWaitRemovesTheSandbox(t *testing.T) {
	for _, first := range []protocol.Phase{protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled} {
		s := &agentScript{first: first}
		in := taskInput()
		in.Manifest.RequireApproval = false
		runTask(t, s, in, nil) // checks one removal per sandbox
		if s.cleanupSteps != 0 {
			t.Errorf("%s: %d cleanup steps after the wait removed the sandbox, want none", first, s.cleanupSteps)
		}
	}
	s := &agentScript{first: protocol.PhaseComplete, failCleanups: 1}
	in := taskInput()
	in.Manifest.RequireApproval = false
	runTask(t, s, in, nil)
	if s.cleanupSteps != 1 {
		t.Errorf("the wait's removal failed: %d cleanup steps, want 1", s.cleanupSteps)
	}
}

// A result awaiting approval keeps its sandbox: the approval goes to the
// agent in it, and the last wait removes it.
func TestTaskApprovalKeepsTheSandboxUntilTheEnd(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		decideAt(t, env, time.Minute, workflow.SignalApprove, approval)
	})
	if res.Phase != status.TaskCompleted || len(s.steerings) != 1 || s.cleanupSteps != 0 {
		t.Errorf("phase %s, %d steerings, %d cleanup steps: want completed, 1, 0", res.Phase, len(s.steerings), s.cleanupSteps)
	}
}

func TestTaskAgentFailed(t *testing.T) {
	s := &agentScript{first: protocol.PhaseFailed}
	res, _ := runTask(t, s, taskInput(), nil)
	if res.Phase != status.TaskFailed {
		t.Errorf("result: %+v", res)
	}
}

// awaitResult is the stand-in AwaitAgentResult made of the stand-ins for
// the activities it joins.
func awaitResult(submit func(context.Context, activity.SubmitManifestInput) error,
	wait func(context.Context, activity.WaitInput) (protocol.Status, error),
	read func(context.Context, activity.ReadResultInput) (protocol.Result, error),
	cleanup func(context.Context, activity.CleanupInput) error) func(context.Context, activity.WaitInput) (activity.AgentOutcome, error) {
	return func(ctx context.Context, in activity.WaitInput) (activity.AgentOutcome, error) {
		if in.Manifest != nil {
			if err := submit(ctx, activity.SubmitManifestInput{Sandbox: in.Sandbox, Manifest: *in.Manifest}); err != nil {
				return activity.AgentOutcome{}, err
			}
		}
		st, err := wait(ctx, in)
		if err != nil {
			return activity.AgentOutcome{}, err
		}
		r, err := read(ctx, activity.ReadResultInput{Sandbox: in.Sandbox})
		if err != nil {
			return activity.AgentOutcome{}, err
		}
		out := activity.AgentOutcome{Status: st, Result: r}
		if in.CleanUp && st.Phase.Terminal() {
			out.CleanedUp = cleanup(ctx, activity.CleanupInput{Sandbox: in.Sandbox}) == nil
		}
		return out, nil
	}
}

// runSandboxed is the stand-in RunSandboxed made of the stand-ins for the
// steps it takes; lost says which sandboxes it lost on the way.
func runSandboxed(lost func(activity.RunInput) []string, provision func(context.Context, activity.ProvisionInput) (activity.SandboxRef, error),
	wait func(context.Context, activity.WaitInput) (protocol.Status, error),
	read func(context.Context, activity.ReadResultInput) (protocol.Result, error),
	cleanup func(context.Context, activity.CleanupInput) error) func(context.Context, activity.RunInput) (status.RunOutcome, error) {
	return func(ctx context.Context, in activity.RunInput) (status.RunOutcome, error) {
		ref, err := provision(ctx, in.Provision)
		if err != nil {
			return status.RunOutcome{}, err
		}
		defer func() { _ = cleanup(ctx, activity.CleanupInput{Sandbox: ref}) }()
		st, err := wait(ctx, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled}})
		if err != nil {
			return status.RunOutcome{}, err
		}
		r, err := read(ctx, activity.ReadResultInput{Sandbox: ref})
		if err != nil {
			return status.RunOutcome{}, err
		}
		return status.RunOutcome{Status: st, Result: r, Lost: lost(in)}, nil
	}
}

// TestChangeMadeAgainCarriesTheApprovalStatus: a unit run again for
// pull requests it has open (keep_current, `prs update`) marks them
// fleetlift/approval pending while the new change awaits a decision,
// then success on the head pushed once approved, or failure on the
// earlier head once rejected.
func TestChangeMadeAgainCarriesTheApprovalStatus(t *testing.T) {
	earlier := protocol.PullRequestInfo{URL: "https://forge/acme/svc/pull/3", Repository: "https://forge/acme/svc.git", Commit: "c0"}
	for _, tt := range []struct {
		name   string
		signal string
		want   []string
	}{
		{"approved", workflow.SignalApprove, []string{"pending c0", "success"}},
		{"rejected", workflow.SignalReject, []string{"pending c0", "failure c0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
			in := taskInput()
			in.Open = []protocol.PullRequestInfo{earlier}
			var got []string
			res, _ := runTask(t, s, in, func(env *testsuite.TestWorkflowEnvironment) {
				var a *activity.Activities
				env.OnActivity(a.SetApprovalStatus, mockAny, mockAny).Return(func(_ context.Context, in activity.ApprovalStatusInput) error {
					for _, pr := range in.PRs {
						st := in.State
						if pr.Commit == earlier.Commit {
							st += " " + pr.Commit
						}
						// Each is tried three times: the forge is down.
						if len(got) == 0 || got[len(got)-1] != st {
							got = append(got, st)
						}
					}
					return errors.New("the forge is down: the task goes on")
				})
				decideAt(t, env, time.Minute, tt.signal, approval)
			})
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("statuses %q, want %q", got, tt.want)
			}
			if (res.Phase == status.TaskCompleted) != (tt.signal == workflow.SignalApprove) {
				t.Errorf("result %+v", res)
			}
		})
	}
	// A first run has no pull requests open: nothing to mark.
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
	calls := 0
	runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		var a *activity.Activities
		env.OnActivity(a.SetApprovalStatus, mockAny, mockAny).Return(func(context.Context, activity.ApprovalStatusInput) error {
			calls++
			return nil
		})
		decideAt(t, env, time.Minute, workflow.SignalApprove, approval)
	})
	if calls != 0 {
		t.Errorf("a first run set %d statuses", calls)
	}
}
