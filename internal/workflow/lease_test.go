package workflow_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// leaseStep is something that happens to a lease at a time after it
// started: an update from a holder, or a look at the holder query.
type leaseStep struct {
	at     time.Duration
	update string // workflow.UpdateRenewLease, workflow.UpdateReleaseLease, or "" for the query
	holder string
	// reject is a substring of the rejection expected; empty: accepted.
	reject string
	// expires is what the query should answer (for query steps).
	expires time.Duration
}

func TestLease(t *testing.T) {
	const ttl = 15 * time.Second
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		steps []leaseStep
		// ends is when the workflow completes, after start.
		ends     time.Duration
		renewals int
		released bool
	}{
		{
			name: "no renewal expires after the TTL",
			ends: ttl,
		},
		{
			name: "holder renews and keeps it",
			steps: []leaseStep{
				{at: 5 * time.Second, update: workflow.UpdateRenewLease, holder: "a"},
				{at: 10 * time.Second, update: workflow.UpdateRenewLease, holder: "a"},
				{at: 12 * time.Second, holder: "a", expires: 25 * time.Second},
				{at: 20 * time.Second, update: workflow.UpdateRenewLease, holder: "a"},
				{at: 34 * time.Second, holder: "a", expires: 35 * time.Second},
			},
			ends:     35 * time.Second,
			renewals: 3,
		},
		{
			name: "renewal by another holder is rejected and does not extend",
			steps: []leaseStep{
				{at: 5 * time.Second, update: workflow.UpdateRenewLease, holder: "b", reject: `held by "a", not "b"`},
				{at: 6 * time.Second, holder: "a", expires: ttl},
			},
			ends: ttl,
		},
		{
			name: "release by the holder ends it at once",
			steps: []leaseStep{
				{at: 5 * time.Second, update: workflow.UpdateRenewLease, holder: "a"},
				{at: 7 * time.Second, update: workflow.UpdateReleaseLease, holder: "a"},
			},
			ends:     7 * time.Second,
			renewals: 1,
			released: true,
		},
		{
			name: "release by another holder is rejected",
			steps: []leaseStep{
				{at: 5 * time.Second, update: workflow.UpdateReleaseLease, holder: "b", reject: `held by "a", not "b"`},
			},
			ends: ttl,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetStartTime(start)
			for i, st := range tc.steps {
				env.RegisterDelayedCallback(func() { leaseStepRun(t, env, st, start, i) }, st.at)
			}
			env.ExecuteWorkflow(workflow.Lease, workflow.LeaseInput{Holder: "a", TTL: ttl})
			if !env.IsWorkflowCompleted() {
				t.Fatal("lease did not complete")
			}
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if got := env.Now().Sub(start); got != tc.ends {
				t.Errorf("lease ended %s after start, want %s", got, tc.ends)
			}
			var got workflow.LeaseState
			if err := env.GetWorkflowResult(&got); err != nil {
				t.Fatal(err)
			}
			if got.Holder != "a" || got.Renewals != tc.renewals || got.Released != tc.released {
				t.Errorf("result %+v, want holder a, %d renewals, released %v", got, tc.renewals, tc.released)
			}
		})
	}
}

func leaseStepRun(t *testing.T, env *testsuite.TestWorkflowEnvironment, st leaseStep, start time.Time, i int) {
	t.Helper()
	if st.update == "" {
		v, err := env.QueryWorkflow(workflow.QueryLeaseHolder)
		if err != nil {
			t.Errorf("step %d: query: %v", i, err)
			return
		}
		var got workflow.LeaseState
		if err := v.Get(&got); err != nil {
			t.Errorf("step %d: %v", i, err)
			return
		}
		if got.Holder != st.holder || !got.Expires.Equal(start.Add(st.expires)) {
			t.Errorf("step %d: holder %q expires %s, want %q at %s", i, got.Holder, got.Expires.Sub(start), st.holder, st.expires)
		}
		return
	}
	env.UpdateWorkflow(st.update, "", &testsuite.TestUpdateCallback{
		OnAccept: func() {
			if st.reject != "" {
				t.Errorf("step %d: %s by %q accepted, want rejected", i, st.update, st.holder)
			}
		},
		OnReject: func(err error) {
			var app *temporal.ApplicationError
			switch {
			case st.reject == "":
				t.Errorf("step %d: %s by %q rejected: %v", i, st.update, st.holder, err)
			case !errors.As(err, &app) || app.Type() != workflow.LeaseRejected || !strings.Contains(err.Error(), st.reject):
				t.Errorf("step %d: rejected with %v, want a %s error saying %q", i, err, workflow.LeaseRejected, st.reject)
			}
		},
		OnComplete: func(any, error) {},
	}, workflow.LeaseRenewal{Holder: st.holder})
}

// TestLeaseContinuesAsNew: after RenewalsPerRun renewals the lease
// continues as new with the same holder and deadline, and the next run
// keeps that deadline rather than starting a fresh TTL.
func TestLeaseContinuesAsNew(t *testing.T) {
	const ttl = 15 * time.Second
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	for i, at := range []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second} {
		env.RegisterDelayedCallback(func() {
			leaseStepRun(t, env, leaseStep{update: workflow.UpdateRenewLease, holder: "a"}, start, i)
		}, at)
	}
	env.ExecuteWorkflow(workflow.Lease, workflow.LeaseInput{Holder: "a", TTL: ttl, RenewalsPerRun: 3})
	var can *sdkworkflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after 3 renewals, got %v", err)
	}
	var next workflow.LeaseInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	want := workflow.LeaseInput{Holder: "a", TTL: ttl, Expires: start.Add(30 * time.Second), Renewals: 3, RenewalsPerRun: 3}
	if next.Holder != want.Holder || next.TTL != want.TTL || !next.Expires.Equal(want.Expires) ||
		next.Renewals != want.Renewals || next.RenewalsPerRun != want.RenewalsPerRun {
		t.Fatalf("carried %+v, want %+v", next, want)
	}

	// The next run, started when the first ended, holds until the
	// carried deadline and still counts the earlier renewals.
	env2 := s.NewTestWorkflowEnvironment()
	env2.SetStartTime(env.Now())
	env2.RegisterDelayedCallback(func() {
		leaseStepRun(t, env2, leaseStep{holder: "a", expires: 30 * time.Second}, start, 0)
		leaseStepRun(t, env2, leaseStep{update: workflow.UpdateRenewLease, holder: "b", reject: "not"}, start, 1)
	}, time.Second)
	env2.ExecuteWorkflow(workflow.Lease, next)
	if err := env2.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if got := env2.Now().Sub(start); got != 30*time.Second {
		t.Errorf("continued lease ended %s after the first start, want 30s", got)
	}
	var got workflow.LeaseState
	if err := env2.GetWorkflowResult(&got); err != nil || got.Holder != "a" || got.Renewals != 3 {
		t.Errorf("continued lease result %+v %v", got, err)
	}
}

func TestLeaseNeedsHolderAndTTL(t *testing.T) {
	for _, in := range []workflow.LeaseInput{{TTL: time.Second}, {Holder: "a"}} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.ExecuteWorkflow(workflow.Lease, in)
		var app *temporal.ApplicationError
		if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != "InvalidLease" {
			t.Errorf("%+v: want an InvalidLease error, got %v", in, err)
		}
	}
}

// Hints signalled to the lease reach its holder in the answer to its
// next renewal, merged and once; those still waiting when the lease
// continues as new go with it.
func TestLeaseHandsHintsToTheHolder(t *testing.T) {
	const ttl = 15 * time.Second
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var s testsuite.WorkflowTestSuite
	var answers []*workflow.LeaseHints
	renew := func(env *testsuite.TestWorkflowEnvironment) func() {
		return func() {
			env.UpdateWorkflow(workflow.UpdateRenewLease, "", &testsuite.TestUpdateCallback{
				OnAccept: func() {},
				OnReject: func(err error) { t.Errorf("renewal rejected: %v", err) },
				OnComplete: func(v any, err error) {
					if err != nil {
						t.Errorf("renewal: %v", err)
						return
					}
					answers = append(answers, v.(workflow.LeaseState).Hints)
				},
			}, workflow.LeaseRenewal{Holder: "a"})
		}
	}
	signal := func(env *testsuite.TestWorkflowEnvironment, h workflow.LeaseHints) func() {
		return func() { env.SignalWorkflow(workflow.SignalLeaseHints, h) }
	}
	check := func(want ...*workflow.LeaseHints) {
		t.Helper()
		if len(answers) != len(want) {
			t.Fatalf("%d renewals answered, want %d", len(answers), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(answers[i], want[i]) {
				t.Errorf("renewal %d handed %+v, want %+v", i+1, answers[i], want[i])
			}
		}
		answers = nil
	}

	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	env.RegisterDelayedCallback(signal(env, workflow.LeaseHints{PullRequests: []string{"github.com/acme/a"}}), 1*time.Second)
	env.RegisterDelayedCallback(signal(env, workflow.LeaseHints{Repository: true, PullRequests: []string{"github.com/acme/a", "github.com/acme/b"}}), 2*time.Second)
	env.RegisterDelayedCallback(renew(env), 5*time.Second)
	env.RegisterDelayedCallback(renew(env), 10*time.Second)
	env.RegisterDelayedCallback(signal(env, workflow.LeaseHints{PullRequests: []string{"github.com/acme/c"}}), 11*time.Second)
	env.RegisterDelayedCallback(renew(env), 12*time.Second)
	env.ExecuteWorkflow(workflow.Lease, workflow.LeaseInput{Holder: "a", TTL: ttl})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	check(&workflow.LeaseHints{Repository: true, PullRequests: []string{"github.com/acme/a", "github.com/acme/b"}},
		nil, &workflow.LeaseHints{PullRequests: []string{"github.com/acme/c"}})

	// Signals bound a run's history as renewals do: hints that no
	// renewal took yet go on to the next run, which hands them over.
	env2 := s.NewTestWorkflowEnvironment()
	env2.SetStartTime(start)
	env2.RegisterDelayedCallback(signal(env2, workflow.LeaseHints{PullRequests: []string{"github.com/acme/d"}}), 1*time.Second)
	env2.RegisterDelayedCallback(signal(env2, workflow.LeaseHints{PullRequests: []string{"github.com/acme/e"}}), 2*time.Second)
	env2.ExecuteWorkflow(workflow.Lease, workflow.LeaseInput{Holder: "a", TTL: ttl, RenewalsPerRun: 2})
	var can *sdkworkflow.ContinueAsNewError
	if err := env2.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after 2 signals, got %v", err)
	}
	var next workflow.LeaseInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	env3 := s.NewTestWorkflowEnvironment()
	env3.SetStartTime(env2.Now())
	env3.RegisterDelayedCallback(renew(env3), time.Second)
	env3.ExecuteWorkflow(workflow.Lease, next)
	check(&workflow.LeaseHints{PullRequests: []string{"github.com/acme/d", "github.com/acme/e"}})
}

// Hints gathered for the leader keep each repository and each push once.
func TestLeaseHintsMergeEachOnce(t *testing.T) {
	var l workflow.LeaseHints
	push := status.PushHint{Repository: "git.example/acme/api", Branch: "main"}
	l.Merge(workflow.LeaseHints{PullRequests: []string{"git.example/acme/api"}, Pushes: []status.PushHint{push}})
	l.Merge(workflow.LeaseHints{PullRequests: []string{"git.example/acme/api"}, Pushes: []status.PushHint{push, {Repository: "git.example/acme/api", Branch: "dev"}}})
	if len(l.PullRequests) != 1 || len(l.Pushes) != 2 || l.Empty() {
		t.Errorf("merged %+v; want the repository once and two pushes", l)
	}
}
