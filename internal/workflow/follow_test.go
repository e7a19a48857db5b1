package workflow_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	activitypkg "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// registerFollower stands in for the PullRequests workflow a run
// starts beside it, which the campaign and task tests do not follow.
func registerFollower(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.FollowInput) (status.PullRequests, error) {
		return status.PullRequests{Source: in.Source}, nil
	}, sdkworkflow.RegisterOptions{Name: "PullRequests"})
}

// followerEnv is a test environment for the PullRequests workflow, with
// the activities to mock.
func followerEnv() (*testsuite.TestWorkflowEnvironment, *activity.Activities) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflow.PullRequests)
	var acts *activity.Activities
	env.RegisterActivity(acts)
	return env, acts
}

func followed(url, state string) status.FollowedPR {
	return status.FollowedPR{PullRequestInfo: protocol.PullRequestInfo{URL: url}, PullRequestStatus: forge.PullRequestStatus{State: state}}
}

func TestPullRequestsFollowsUntilTheSourceEndedAndNoneIsOpen(t *testing.T) {
	env, acts := followerEnv()
	// Pass 1: the run goes on with one open; pass 2: the forge cannot be
	// reached; pass 3: the run ended, one merged and one closed.
	passes := 0
	var known [][]status.FollowedPR
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			passes++
			known = append(known, in.Known)
			switch passes {
			case 1:
				return activity.RefreshOutcome{PRs: []status.FollowedPR{followed("a", forge.StateOpen)}, Every: time.Minute}, nil
			case 2:
				return activity.RefreshOutcome{}, errors.New("forge down")
			}
			return activity.RefreshOutcome{SourceEnded: true, Every: time.Minute,
				PRs: []status.FollowedPR{followed("a", forge.StateMerged), followed("b", forge.StateClosed)}}, nil
		})
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the follower did not end")
	}
	var st status.PullRequests
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if !st.Ended || len(st.PRs) != 2 || st.PRs[0].State != forge.StateMerged || st.Source != "campaign/x" {
		t.Errorf("final state %+v", st)
	}
	// After a failed read (retried five times), the next pass still
	// starts from what the first read.
	if len(known) < 3 || len(known[len(known)-1]) != 1 || known[len(known)-1][0].State != forge.StateOpen {
		t.Errorf("passes started from %+v", known)
	}
}

func TestPullRequestsRefreshReturnsAFreshRead(t *testing.T) {
	env, acts := followerEnv()
	passes := 0
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			passes++
			state := forge.StateOpen
			if passes >= 2 {
				state = forge.StateMerged
			}
			return activity.RefreshOutcome{PRs: []status.FollowedPR{followed("a", state)}, SourceEnded: passes >= 3, Every: time.Hour}, nil
		})
	var got status.PullRequests
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(status.UpdateRefresh, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("refresh rejected: %v", err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("refresh: %v", err)
					return
				}
				got = v.(status.PullRequests)
			},
		})
	}, time.Minute)
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "task/t"})
	// Asked a minute in, long before the hour is up: answered by a read
	// made after it was asked.
	if got.Passes != 2 || len(got.PRs) != 1 || got.PRs[0].State != forge.StateMerged {
		t.Errorf("refresh answered %+v", got)
	}
}

func TestPullRequestsMergeOnlyWhatIsReady(t *testing.T) {
	env, acts := followerEnv()
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	pr := func(repo string, s forge.PullRequestStatus) status.FollowedPR {
		return status.FollowedPR{Repo: repo, PullRequestInfo: protocol.PullRequestInfo{URL: "u/" + repo}, PullRequestStatus: s, CheckedAt: now}
	}
	ready := forge.PullRequestStatus{State: forge.StateOpen, Head: "h1", Mergeable: forge.MergeableBehind, Review: forge.DecisionApproved, Checks: forge.StatusSuccess}
	merged := false
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			a := pr("a", ready)
			if merged {
				a.State = forge.StateMerged
			}
			return activity.RefreshOutcome{Every: time.Hour, PRs: []status.FollowedPR{
				a,
				pr("b", forge.PullRequestStatus{State: forge.StateOpen, Mergeable: forge.MergeableYes, Review: forge.DecisionApproved,
					Checks: forge.StatusFailure, FailedChecks: []string{"ci/build"}}),
				pr("c", forge.PullRequestStatus{State: forge.StateOpen, Mergeable: forge.MergeableYes, Review: forge.DecisionNone}),
				pr("d", forge.PullRequestStatus{State: forge.StateOpen, Mergeable: forge.MergeableConflict, Review: forge.DecisionApproved}),
				{Repo: "e", PullRequestInfo: protocol.PullRequestInfo{URL: "u/e"}},
			}}, nil
		})
	var sent activity.ActInput
	env.OnActivity(acts.ActOnPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.ActInput) ([]status.ActOutcome, error) {
			sent, merged = in, true
			return []status.ActOutcome{{Repo: "a", URL: "u/a", Outcome: status.ActDone}}, nil
		})
	var got status.ActResult
	var rejected error
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(status.UpdateAct, "bad", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { rejected = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, status.ActRequest{Action: status.ActMerge, Method: "octopus"})
		env.UpdateWorkflow(status.UpdateAct, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("merge rejected: %v", err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("merge: %v", err)
					return
				}
				got = v.(status.ActResult)
			},
		}, status.ActRequest{Action: status.ActMerge, Method: forge.MergeSquash})
	}, time.Minute)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 3*time.Hour)
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})

	if rejected == nil || !strings.Contains(rejected.Error(), `no merge method "octopus"`) {
		t.Errorf("an unknown method: %v", rejected)
	}
	// Only the one approved, green and merging cleanly went to the
	// forge, at the head read.
	if len(sent.PRs) != 1 || sent.PRs[0].Repo != "a" || sent.PRs[0].Head != "h1" || sent.Request.Method != forge.MergeSquash {
		t.Errorf("sent to the forge: %+v", sent)
	}
	want := map[string]string{"a": "done", "b": "skipped: checks failed: ci/build", "c": "skipped: no reviewer approved it",
		"d": "skipped: it conflicts with its base", "e": "skipped: not read from its forge yet"}
	if len(got.Outcomes) != len(want) {
		t.Fatalf("outcomes %+v", got.Outcomes)
	}
	for _, o := range got.Outcomes {
		s := o.Outcome
		if o.Reason != "" {
			s += ": " + o.Reason
		}
		if want[o.Repo] != s {
			t.Errorf("%s: %q; want %q", o.Repo, s, want[o.Repo])
		}
	}
}

func TestPullRequestsMergeAsDeclaredAfterTheirSoakTime(t *testing.T) {
	env, acts := followerEnv()
	start := env.Now()
	policy := &status.MergePolicy{Method: forge.MergeSquash, Unapproved: true, After: 30 * time.Minute, DeleteBranch: true}
	var mergedAt time.Time
	refusedOnce := false
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			out := activity.RefreshOutcome{Every: 10 * time.Minute, Merge: policy, SourceEnded: true}
			for _, k := range in.Known {
				out.PRs = append(out.PRs, k)
			}
			if len(out.PRs) == 0 {
				out.PRs = []status.FollowedPR{{Repo: "a", PullRequestInfo: protocol.PullRequestInfo{URL: "u/a"}},
					{Repo: "b", PullRequestInfo: protocol.PullRequestInfo{URL: "u/b"}}}
			}
			for i := range out.PRs {
				p := &out.PRs[i]
				p.CheckedAt = env.Now()
				if p.State == "" {
					p.PullRequestStatus = forge.PullRequestStatus{State: forge.StateOpen, Head: "h-" + p.Repo, Mergeable: forge.MergeableYes}
				}
				if p.Repo == "a" && !mergedAt.IsZero() {
					p.State = forge.StateMerged
				}
				if p.Repo == "b" && refusedOnce {
					// Fixed by hand on the forge after the refusal.
					p.State = forge.StateClosed
				}
			}
			return out, nil
		})
	var sent []activity.ActInput
	env.OnActivity(acts.ActOnPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.ActInput) ([]status.ActOutcome, error) {
			sent = append(sent, in)
			var out []status.ActOutcome
			for _, p := range in.PRs {
				if p.Repo == "a" {
					mergedAt = env.Now()
					out = append(out, status.ActOutcome{Repo: "a", URL: p.URL, Outcome: status.ActDone})
				} else {
					refusedOnce = true
					out = append(out, status.ActOutcome{Repo: p.Repo, URL: p.URL, Outcome: status.ActFailed, Reason: "branch protection"})
				}
			}
			return out, nil
		})
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the follower did not end once merged and closed")
	}
	if len(sent) != 1 || len(sent[0].PRs) != 2 || sent[0].Request.Method != forge.MergeSquash || !sent[0].Request.DeleteBranch {
		t.Fatalf("merges sent: %+v", sent)
	}
	// Ready at the first read; merged at the first read 30 minutes on.
	if d := mergedAt.Sub(start); d < 30*time.Minute || d > 40*time.Minute {
		t.Errorf("merged %s after the start; want after its 30-minute soak, at the next read", d)
	}
	var st status.PullRequests
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	for _, p := range st.PRs {
		if p.Repo == "b" && p.MergeError != "branch protection" {
			t.Errorf("b's refusal not kept: %+v", p)
		}
	}
}

// TestKeepCurrentMakesConflictedChangesAgainOncePerBase: with
// keep_current: conflicted, the follower has the campaign run again the
// unit whose pull request conflicts with its base, once for each base
// commit; it leaves the one someone else pushed to, the one only behind,
// and a task's, saying why.
func TestKeepCurrentMakesConflictedChangesAgainOncePerBase(t *testing.T) {
	env, acts := followerEnv()
	var asked [][]string
	env.RegisterActivityWithOptions(func(ctx context.Context, in workflow.RegenerateInput) (int, error) {
		if in.Source != "campaign/x" {
			t.Errorf("asked %s to run units again", in.Source)
		}
		asked = append(asked, in.Units)
		return len(in.Units), nil
	}, activitypkg.RegisterOptions{Name: workflow.RegenerateActivity})
	pr := func(unit, url, mergeable, base string, foreign bool) status.FollowedPR {
		p := followed(url, forge.StateOpen)
		p.Unit, p.Repo, p.Mergeable, p.BaseSHA, p.Foreign, p.CheckedAt = unit, unit, mergeable, base, foreign, time.Now()
		return p
	}
	passes := 0
	var last []status.FollowedPR
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			passes++
			last = in.Known
			if passes == 4 {
				// Merged, and the run has ended: the follower ends.
				return activity.RefreshOutcome{SourceEnded: true, PRs: []status.FollowedPR{followed("a", forge.StateMerged)}}, nil
			}
			// Each read keeps what the follower knew of each (KeptFor),
			// as the activity does.
			known := map[string]status.FollowedPR{}
			for _, k := range in.Known {
				known[k.URL] = k
			}
			base := "b1"
			if passes == 3 {
				base = "b2" // the base moved again
			}
			fresh := []status.FollowedPR{
				pr("svc-a", "a", forge.MergeableConflict, base, false),
				pr("svc-b", "b", forge.MergeableConflict, base, true),
				pr("svc-c", "c", forge.MergeableBehind, base, false),
				pr("", "d", forge.MergeableConflict, base, false),
			}
			for i := range fresh {
				if k, ok := known[fresh[i].URL]; ok {
					fresh[i].KeptFor, fresh[i].KeepNote = k.KeptFor, k.KeepNote
				}
			}
			return activity.RefreshOutcome{PRs: fresh, KeepCurrent: status.KeepConflicted, Every: time.Minute}, nil
		})
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("the follower did not end: %v", env.GetWorkflowError())
	}
	// Passes 1 and 2 read base b1: one run again; pass 3 read b2: another.
	if len(asked) != 2 || len(asked[0]) != 1 || asked[0][0] != "svc-a" || len(asked[1]) != 1 || asked[1][0] != "svc-a" {
		t.Errorf("units asked to run again: %v, want [[svc-a] [svc-a]]", asked)
	}
	notes := map[string]string{}
	for _, p := range last {
		notes[p.URL] = p.KeepNote
	}
	if !strings.Contains(notes["a"], "made again on b2") {
		t.Errorf("conflicted pull request's note %q", notes["a"])
	}
	if !strings.Contains(notes["b"], "someone else pushed") || !strings.Contains(notes["d"], "single task") || notes["c"] != "" {
		t.Errorf("notes %q", notes)
	}
}

// TestDoneWhenChecksMergedRepositoriesOnASchedule: once a pull request
// merged, done_when runs in a sandbox on its repository's base branch
// (mode check); it runs again after done_when.every: a check that could
// not run keeps what the last one said, and one that fails after
// passing marks the repository regressed. An open pull request is not
// checked, and the follower keeps checking after its run ended.
func TestDoneWhenChecksMergedRepositoriesOnASchedule(t *testing.T) {
	env, acts := followerEnv()
	check := &status.DoneCheck{Image: "golang", Every: time.Hour, Resources: sandbox.Resources{Memory: "2Gi"}, Namespace: "batch",
		Manifest: protocol.Manifest{TaskID: "x", Mode: protocol.ModeCheck,
			Execution: protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"sh", "-c", "! grep -rq log.Printf ."}}}}
	merged := followed("https://git.example/acme/svc-a/pulls/1", forge.StateMerged)
	merged.Unit, merged.Repo, merged.Repository, merged.Base = "svc-a", "svc-a", "https://git.example/acme/svc-a.git", "main"
	open := followed("https://git.example/acme/svc-b/pulls/2", forge.StateOpen)
	open.Unit, open.Repo, open.Repository, open.Base = "svc-b", "svc-b", "https://git.example/acme/svc-b.git", "main"

	start := env.Now()
	var last []status.FollowedPR
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			last = in.Known
			prs := []status.FollowedPR{merged, open}
			for i := range prs {
				for _, k := range in.Known {
					if k.URL == prs[i].URL {
						prs[i] = k // what the follower recorded stays
					}
				}
			}
			elapsed := env.Now().Sub(start)
			if elapsed > 150*time.Minute {
				// The campaign was removed: its run was cancelled (its
				// policy can no longer be read) and svc-b's closed.
				prs[1].State = forge.StateClosed
				return activity.RefreshOutcome{SourceEnded: true, PRs: prs, Every: time.Minute}, nil
			}
			return activity.RefreshOutcome{SourceEnded: elapsed > 10*time.Minute, PRs: prs, Every: time.Minute, Done: check}, nil
		})
	var runs []activity.RunInput
	env.OnActivity(acts.RunSandboxed, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RunInput) (status.RunOutcome, error) {
			runs = append(runs, in)
			r := protocol.RepositoryResult{Name: "svc-a", Status: "success", Base: "c1"}
			switch len(runs) {
			case 2:
				r = protocol.RepositoryResult{Name: "svc-a", Status: "failed", Error: "clone: connection refused"}
			case 3:
				r = protocol.RepositoryResult{Name: "svc-a", Status: "failed", Base: "c3", ErrorKind: protocol.CheckFailed,
					Error: "check exited with status 1"}
			}
			return status.RunOutcome{Result: protocol.Result{Repositories: []protocol.RepositoryResult{r}}}, nil
		})
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("the follower did not end: %v", env.GetWorkflowError())
	}
	if len(runs) != 3 {
		t.Fatalf("done_when ran %d times in 150 minutes, want 3 (at the merge, after 1h, after 2h)", len(runs))
	}
	m := runs[0].Manifest
	if m.Mode != protocol.ModeCheck || len(m.Repositories) != 1 || m.Repositories[0].URL != merged.Repository ||
		m.Repositories[0].Branch != "main" || m.Repositories[0].Name != "svc-a" ||
		runs[0].Provision.Image != "golang" || runs[0].Provision.Resources.Memory != "2Gi" ||
		runs[0].Provision.Placement == nil || runs[0].Provision.Placement.Namespace != "batch" {
		t.Errorf("the check ran as %+v in %+v", m, runs[0].Provision)
	}
	var a status.FollowedPR
	for _, p := range last {
		if p.URL == merged.URL {
			a = p
		}
		if p.URL == open.URL && p.Done != "" {
			t.Errorf("an open pull request was checked: %+v", p)
		}
	}
	if a.Done != state.DoneRegressed || a.DoneBase != "c3" || !strings.Contains(a.DoneNote, "check exited with status 1") {
		t.Errorf("after passing, an infrastructure failure and a failing check: done %q at %q, %q", a.Done, a.DoneBase, a.DoneNote)
	}
}

// hourlyCheck is a done_when check of `true`, every hour.
func hourlyCheck() *status.DoneCheck {
	return &status.DoneCheck{Image: "golang", Every: time.Hour,
		Manifest: protocol.Manifest{TaskID: "x", Mode: protocol.ModeCheck,
			Execution: protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"true"}}}}
}

// A push to the default branch of a repository whose pull request
// merged has done_when run there within seconds, not at its next turn an
// hour later; a push to another branch does not, and pushes close
// together run it at most once a minute.
func TestDoneWhenRunsAgainOnAPushToTheDefaultBranch(t *testing.T) {
	env, acts := followerEnv()
	check := hourlyCheck()
	merged := mergedSvcA()
	start := env.Now()
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			p := recorded(in, merged)
			if env.Now().Sub(start) > 100*time.Minute {
				return activity.RefreshOutcome{SourceEnded: true, PRs: []status.FollowedPR{p}, Every: time.Hour}, nil
			}
			return activity.RefreshOutcome{SourceEnded: true, PRs: []status.FollowedPR{p}, Every: time.Hour, Done: check}, nil
		})
	runs := checksAt(env, acts, start)
	pushAt(env, 10*time.Minute, "main")
	pushAt(env, 20*time.Minute, "feature")
	pushAt(env, 30*time.Minute, "main")
	pushAt(env, 30*time.Minute+20*time.Second, "main")
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("the follower did not end: %v", env.GetWorkflowError())
	}
	// The hourly pass at 60 minutes finds the last run 29 minutes old.
	want := []time.Duration{0, 10 * time.Minute, 30 * time.Minute, 31 * time.Minute}
	if len(*runs) != len(want) {
		t.Fatalf("done_when ran at %v; want about %v (at the merge, then after each push to main, a minute apart)", *runs, want)
	}
	for i, w := range want {
		if (*runs)[i] < w || (*runs)[i] > w+15*time.Second {
			t.Errorf("run %d of done_when at +%s; want +%s", i, (*runs)[i], w)
		}
	}
}

// A push that came while done_when was declared asks nothing of the
// follower once the definition no longer declares it: no check runs and
// the follower reads nothing more until its next pass.
func TestAPushAsksNothingOnceDoneWhenIsGone(t *testing.T) {
	env, acts := followerEnv()
	check := hourlyCheck()
	merged := followed("https://git.example/acme/svc-a/pulls/1", forge.StateMerged)
	merged.Base = "main"
	open := followed("https://git.example/acme/svc-b/pulls/2", forge.StateOpen)
	start := env.Now()
	var reads []time.Duration
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			since := env.Now().Sub(start)
			reads = append(reads, since)
			prs := []status.FollowedPR{merged, open}
			for i := range prs {
				prs[i] = recorded(in, prs[i])
			}
			out := activity.RefreshOutcome{PRs: prs, Every: time.Hour, Done: check}
			if since > 45*time.Second {
				// done_when was taken out of the definition.
				out.Done = nil
			}
			if since > 90*time.Minute {
				prs[1].State = forge.StateClosed
				out.SourceEnded = true
			}
			return out, nil
		})
	runs := checksAt(env, acts, start)
	pushAt(env, 30*time.Second, "main")
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("the follower did not end: %v", env.GetWorkflowError())
	}
	// At the start, for the push a minute in (done_when is gone by then),
	// then the hourly passes.
	want := []time.Duration{0, time.Minute, time.Hour, 2 * time.Hour}
	if len(*runs) != 1 || !slices.Equal(reads, want) {
		t.Errorf("done_when ran %d times, reads at %v; want once, and reads at %v", len(*runs), reads, want)
	}
}

// A webhook's hint has the follower read the open pull requests in the
// repositories it names at once, and only those, rather than at its
// next pass an hour later; hints that follow closely wait for
// hintSpacing. A hint for a repository it follows nothing in reads only
// what the source opened since, and nothing once the source has ended.
func TestPullRequestsReadWhatAHintNames(t *testing.T) {
	env, acts := followerEnv()
	const api, web = "https://github.com/Acme/api/pull/1", "https://github.com/acme/web/pull/2"
	start := env.Now()
	type read struct {
		at     time.Duration
		hinted bool
		only   string
	}
	var reads []read
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			since := env.Now().Sub(start)
			reads = append(reads, read{since.Round(time.Second), in.Hinted, strings.Join(in.Only, ",")})
			st := forge.StateOpen
			if since > 90*time.Minute {
				st = forge.StateMerged
			}
			a, w := followed(api, st), followed(web, st)
			a.Mergeable, w.Mergeable = forge.MergeableYes, forge.MergeableYes
			return activity.RefreshOutcome{PRs: []status.FollowedPR{a, w}, SourceEnded: since > 30*time.Minute, Every: time.Hour}, nil
		})
	hint := func(at time.Duration, repos ...string) {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(status.SignalHint, status.PullRequestHint{Repositories: repos})
		}, at)
	}
	hint(time.Minute, "github.com/acme/api")
	hint(time.Minute+2*time.Second, "github.com/acme/api", "github.com/acme/other")
	hint(5*time.Minute, "github.com/acme/other")
	hint(70*time.Minute, "github.com/acme/other")
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	var st status.PullRequests
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	want := []read{{0, false, ""}, {time.Minute, true, api}, {time.Minute + hintSpacingForTest, true, api},
		{5 * time.Minute, true, ""}, {time.Hour, false, ""}, {2 * time.Hour, false, ""}}
	if !slices.Equal(reads, want) {
		t.Fatalf("reads %+v, want %+v", reads, want)
	}
	if st.PartialReads != 3 || st.Passes != 3 {
		t.Errorf("counted %d partial reads and %d passes, want 3 and 3", st.PartialReads, st.Passes)
	}
}

// hintSpacingForTest is the follower's hintSpacing.
const hintSpacingForTest = 10 * time.Second

// A pull request whose read for a hint failed (a forge may hold the
// request about one it is merging), or whose forge had not yet worked
// out whether it merges, is read again after hintSpacing, at most three
// times.
func TestPullRequestsReadAgainWhatAHintCouldNotRead(t *testing.T) {
	env, acts := followerEnv()
	const api = "https://github.com/acme/api/pull/1"
	start := env.Now()
	var reads []time.Duration
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			reads = append(reads, env.Now().Sub(start).Round(time.Second))
			p := followed(api, forge.StateOpen)
			p.CheckedAt, p.Mergeable = env.Now(), forge.MergeableYes
			switch {
			case len(reads) == 1:
			case len(reads) == 3:
				// Its base moved: the forge is working out whether it
				// merges.
				p.Mergeable = ""
			case len(reads) <= 5:
				p.Error = "Get " + api + ": context deadline exceeded"
			default:
				p.State = forge.StateMerged
			}
			return activity.RefreshOutcome{PRs: []status.FollowedPR{p}, SourceEnded: true, Every: time.Hour}, nil
		})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(status.SignalHint, status.PullRequestHint{Repositories: []string{"github.com/acme/api"}})
	}, time.Minute)
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	// The first read; the hint's, and three more 10s apart, none of
	// which says whether it merges; then the hour's pass, which finds
	// it merged.
	want := []time.Duration{0, time.Minute, time.Minute + 10*time.Second, time.Minute + 20*time.Second, time.Minute + 30*time.Second, time.Hour}
	if !slices.Equal(reads, want) {
		t.Errorf("reads at %v, want %v", reads, want)
	}
}

// The follower of a page run again (or of a campaign started again)
// ends once a later run of the page follows its units' pull requests,
// keeping what it read: two followers would merge and make changes
// again twice.
func TestPullRequestsEndWhenAPageIsRunAgain(t *testing.T) {
	env, acts := followerEnv()
	reads := 0
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			reads++
			if reads == 2 {
				return activity.RefreshOutcome{SupersededBy: "campaign/big/page-1@abc/run-2", Every: time.Minute}, nil
			}
			return activity.RefreshOutcome{PRs: []status.FollowedPR{followed("a", forge.StateOpen)}, SourceEnded: true, Every: time.Minute,
				Merge: &status.MergePolicy{}, KeepCurrent: status.KeepBehind}, nil
		})
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/big/page-1@abc"})
	var st status.PullRequests
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if !st.Ended || st.SupersededBy != "campaign/big/page-1@abc/run-2" || reads != 2 || len(st.PRs) != 1 {
		t.Errorf("after %d reads: %+v; want ended, superseded, the pull request as last read", reads, st)
	}
}

func TestPageIndex(t *testing.T) {
	for _, id := range []string{status.PageID("campaign/big", 0, "abc", 1), status.PageID("campaign/big", 11, "abc", 3)} {
		i, ok := status.PageIndex(id)
		if !ok || status.PageID("campaign/big", i, "abc", 1) != strings.SplitN(id, "/run-", 2)[0] {
			t.Errorf("PageIndex(%q) = %d, %v", id, i, ok)
		}
	}
	if _, ok := status.PageIndex("campaign/big"); ok {
		t.Error("a campaign's id is taken for a page's")
	}
}

// A reopen the reconciler records while a read of the pull requests is
// out is not undone by what that read brings back (it carries the marks
// as they were sent): the next plan must not reopen the regression again.
func TestPullRequestsReopenDuringAReadStands(t *testing.T) {
	env, acts := followerEnv()
	regressed := followed("u/api", forge.StateMerged)
	regressed.Unit, regressed.Done, regressed.DoneBase = "api", state.DoneRegressed, "b1"
	passes := 0
	var second []status.FollowedPR
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			passes++
			if passes == 2 {
				second = in.Known
			}
			return activity.RefreshOutcome{PRs: in.Known, SourceEnded: passes >= 2, Every: time.Hour}, nil
		})
	marked := -1
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(status.UpdateReopened, "r1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("reopened rejected: %v", err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("reopened: %v", err)
					return
				}
				marked = v.(int)
			},
		}, []string{"api"})
	}, 30*time.Second)
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/slog",
		State: &status.PullRequests{Source: "campaign/slog", PRs: []status.FollowedPR{regressed}}})
	var st status.PullRequests
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if marked != 1 {
		t.Errorf("the update marked %d pull requests, want 1", marked)
	}
	if len(st.PRs) != 1 || st.PRs[0].ReopenedFor != "b1" {
		t.Errorf("after the read that was out during the reopen: %+v, want it reopened for b1", st.PRs)
	}
	if len(second) != 1 || second[0].ReopenedFor != "b1" {
		t.Errorf("the next read was sent %+v, want the mark", second)
	}
}

// recorded is p as the follower last recorded it, if it did.
func recorded(in activity.RefreshInput, p status.FollowedPR) status.FollowedPR {
	for _, k := range in.Known {
		if k.URL == p.URL {
			return k
		}
	}
	return p
}

// mergedSvcA is a merged pull request of svc-a, to main.
func mergedSvcA() status.FollowedPR {
	p := followed("https://git.example/acme/svc-a/pulls/1", forge.StateMerged)
	p.Unit, p.Repo, p.Repository, p.Base = "svc-a", "svc-a", "https://git.example/acme/svc-a.git", "main"
	return p
}

// pushAt hints the follower of a push to svc-a's branch at that time.
func pushAt(env *testsuite.TestWorkflowEnvironment, at time.Duration, branch string) {
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(status.SignalHint, status.PullRequestHint{Pushed: []status.PushHint{{Repository: "git.example/acme/svc-a", Branch: branch}}})
	}, at)
}

// checksAt records when done_when ran, each time passing.
func checksAt(env *testsuite.TestWorkflowEnvironment, acts *activity.Activities, start time.Time) *[]time.Duration {
	var runs []time.Duration
	env.OnActivity(acts.RunSandboxed, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RunInput) (status.RunOutcome, error) {
			runs = append(runs, env.Now().Sub(start))
			r := protocol.RepositoryResult{Name: "svc-a", Status: "success", Base: "c1"}
			return status.RunOutcome{Result: protocol.Result{Repositories: []protocol.RepositoryResult{r}}}, nil
		})
	return &runs
}

// A forge slower than the follower's interval (each read takes longer
// than `--pull-requests-every`) still has a push to the default branch
// run done_when within seconds: the push that came during a read is
// taken after it, not only while the follower waits.
func TestDoneWhenRunsOnAPushWhenReadsOutlastTheInterval(t *testing.T) {
	env, acts := followerEnv()
	merged := mergedSvcA()
	start := env.Now()
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).After(2 * time.Second).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			p := recorded(in, merged)
			out := activity.RefreshOutcome{SourceEnded: true, PRs: []status.FollowedPR{p}, Every: time.Second, Done: hourlyCheck()}
			if env.Now().Sub(start) > 4*time.Minute {
				out.Done = nil
			}
			return out, nil
		})
	runs := checksAt(env, acts, start)
	pushAt(env, 3*time.Minute, "main")
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("the follower did not end: %v", env.GetWorkflowError())
	}
	if len(*runs) != 2 || (*runs)[1] < 3*time.Minute || (*runs)[1] > 3*time.Minute+15*time.Second {
		t.Errorf("done_when ran at %v; want at the merge and within 15s of the push at +3m", *runs)
	}
}

// A push whose run of done_when waits for donePushSpacing when the
// follower continues as new runs in the next run of the follower.
func TestAPushOutlastsContinueAsNew(t *testing.T) {
	env, acts := followerEnv()
	merged := mergedSvcA()
	start := env.Now()
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			p := recorded(in, merged)
			return activity.RefreshOutcome{SourceEnded: true, PRs: []status.FollowedPR{p}, Every: time.Second, Done: hourlyCheck()}, nil
		})
	runs := checksAt(env, acts, start)
	// A read a second: the run continues as new after 200 reads. The
	// push at +170s runs done_when at once; the one at +190s waits
	// for a minute after that run, beyond the end of this run.
	pushAt(env, 170*time.Second, "main")
	pushAt(env, 190*time.Second, "main")
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	var can *sdkworkflow.ContinueAsNewError
	if !errors.As(env.GetWorkflowError(), &can) {
		t.Fatalf("the follower ended with %v, want it to continue as new", env.GetWorkflowError())
	}
	ended := env.Now()
	if len(*runs) != 2 || ended.Sub(start) > 230*time.Second {
		t.Fatalf("done_when ran at %v and the run continued as new at +%s; want two runs, and that before +230s", *runs, ended.Sub(start))
	}
	var next workflow.FollowInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(next.DoneDue, []string{merged.URL}) {
		t.Fatalf("the next run is told done_when is due at %v, want %s", next.DoneDue, merged.URL)
	}

	// The next run, from when this one ended, runs it a minute after
	// the last.
	env2, acts2 := followerEnv()
	env2.SetStartTime(ended)
	last := next.State.PRs[0].DoneAt
	env2.OnActivity(acts2.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			out := activity.RefreshOutcome{SourceEnded: true, PRs: in.Known, Every: time.Hour, Done: hourlyCheck()}
			if env2.Now().Sub(ended) > 2*time.Minute {
				out.Done = nil
			}
			return out, nil
		})
	runs2 := checksAt(env2, acts2, last)
	env2.ExecuteWorkflow(workflow.PullRequests, next)
	if !env2.IsWorkflowCompleted() || env2.GetWorkflowError() != nil {
		t.Fatalf("the next run did not end: %v", env2.GetWorkflowError())
	}
	if len(*runs2) != 1 || (*runs2)[0] < time.Minute || (*runs2)[0] > time.Minute+15*time.Second {
		t.Errorf("the next run ran done_when at %v after the last run; want once, a minute after", *runs2)
	}
}
