package plan_test

import (
	"reflect"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/state"
)

const (
	resultNow   = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	resultStale = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	taskResult  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func approvalState() []state.Campaign {
	return []state.Campaign{
		{ID: "slog-rollout", Kind: state.KindCampaign, Phase: state.PhaseAwaitingApproval, Generation: 1,
			Repos: []state.Repo{
				{Name: "ledger", Status: state.RepoFailed},
				{Name: "payments", Status: state.RepoAwaitingApproval},
				{Name: "search", Status: state.RepoCompleted},
			},
			PendingApprovals: []state.PendingApproval{{Target: "slog-rollout/payments", ResultDigest: resultNow}}},
		{ID: "paused", Kind: state.KindCampaign, Phase: state.PhasePaused, Generation: 2, Repos: []state.Repo{{Name: "a", Status: state.RepoFailed}},
			AppliedApprovals: []string{approval.Record{File: "approvals/done.yaml", Target: "paused", Generation: 2, By: "alice", Action: approval.Continue}.ID()}},
		{ID: "finished", Kind: state.KindCampaign, Phase: state.PhaseCompleted, Generation: 1, Repos: []state.Repo{{Name: "a", Status: state.RepoCompleted}}},
		{ID: "go-bump", Kind: state.KindTask, Phase: state.PhaseAwaitingApproval, Generation: 1,
			PendingApprovals: []state.PendingApproval{{Target: "go-bump", ResultDigest: taskResult}}},
	}
}

func approvalsFixture() []approval.Record {
	return []approval.Record{
		{File: "approvals/payments.yaml", Target: "slog-rollout/payments", ResultDigest: resultNow, By: "alice", Action: approval.Approve},
		{File: "approvals/old.yaml", Target: "slog-rollout/payments", ResultDigest: resultStale, By: "bob", Action: approval.Approve},
		{File: "approvals/retry.yaml", Target: "slog-rollout", Generation: 1, By: "carol", Action: approval.Retry},
	}
}

func TestApprovals(t *testing.T) {
	type want struct {
		File   string
		Status plan.ApprovalStatus
		Reason string
	}
	// rec makes a record; continue, abort and retry name the generation
	// recorded for their campaign (approvalState).
	generations := map[string]int64{"slog-rollout": 1, "paused": 2, "finished": 1, "go-bump": 1, "gone": 1}
	rec := func(file, target, digest string, a approval.Action) approval.Record {
		r := approval.Record{File: file, Target: target, ResultDigest: digest, By: "alice", Action: a}
		if a.BindsRun() {
			r.Generation = generations[r.Campaign()]
		}
		return r
	}
	generation := func(r approval.Record, g int64) approval.Record {
		r.Generation = g
		return r
	}
	steer := rec("approvals/steer.yaml", "slog-rollout/payments", resultNow, approval.Steer)
	steer.Prompt = "Keep the log levels."
	cases := []struct {
		name    string
		records []approval.Record
		want    []want
	}{
		{name: "no change: no records"},
		{
			name:    "approval applied",
			records: []approval.Record{rec("approvals/a.yaml", "slog-rollout/payments", resultNow, approval.Approve)},
			want:    []want{{"approvals/a.yaml", plan.ApprovalApply, ""}},
		},
		{
			name:    "task approval applied",
			records: []approval.Record{rec("approvals/a.yaml", "go-bump", taskResult, approval.Reject)},
			want:    []want{{"approvals/a.yaml", plan.ApprovalApply, ""}},
		},
		{
			name:    "steer applied",
			records: []approval.Record{steer},
			want:    []want{{"approvals/steer.yaml", plan.ApprovalApply, ""}},
		},
		{
			name:    "stale approval",
			records: []approval.Record{rec("approvals/a.yaml", "slog-rollout/payments", resultStale, approval.Approve)},
			want: []want{{"approvals/a.yaml", plan.ApprovalIgnored,
				"result changed since approved: digest sha256:000000000000, now sha256:111111111111"}},
		},
		{
			name:    "nothing awaits approval",
			records: []approval.Record{rec("approvals/a.yaml", "slog-rollout/search", resultNow, approval.Approve)},
			want:    []want{{"approvals/a.yaml", plan.ApprovalIgnored, "nothing awaits approval for slog-rollout/search"}},
		},
		{
			name:    "removed campaign: nothing awaits approval",
			records: []approval.Record{rec("approvals/a.yaml", "gone/x", resultNow, approval.Approve)},
			want:    []want{{"approvals/a.yaml", plan.ApprovalIgnored, "nothing awaits approval for gone/x"}},
		},
		{
			name:    "invalid record",
			records: []approval.Record{rec("approvals/a.yaml", "slog-rollout/payments", "", approval.Steer)},
			want: []want{{"approvals/a.yaml", plan.ApprovalIgnored,
				"no result digest: steer must name the result it saw; steer without a prompt"}},
		},
		{
			name: "approve and reject of one result conflict",
			records: []approval.Record{
				rec("approvals/b.yaml", "slog-rollout/payments", resultNow, approval.Reject),
				rec("approvals/a.yaml", "slog-rollout/payments", resultNow, approval.Approve),
			},
			want: []want{
				{"approvals/a.yaml", plan.ApprovalIgnored, "conflicts with approvals/b.yaml (reject); none of them applies"},
				{"approvals/b.yaml", plan.ApprovalIgnored, "conflicts with approvals/a.yaml (approve); none of them applies"},
			},
		},
		{
			name: "a stale record does not conflict with a current one",
			records: []approval.Record{
				rec("approvals/b.yaml", "slog-rollout/payments", resultStale, approval.Reject),
				rec("approvals/a.yaml", "slog-rollout/payments", resultNow, approval.Approve),
			},
			want: []want{
				{"approvals/a.yaml", plan.ApprovalApply, ""},
				{"approvals/b.yaml", plan.ApprovalIgnored, "result changed since approved: digest sha256:000000000000, now sha256:111111111111"},
			},
		},
		{
			name: "duplicate approvals apply once",
			records: []approval.Record{
				rec("approvals/b.yaml", "slog-rollout/payments", resultNow, approval.Approve),
				rec("approvals/a.yaml", "slog-rollout/payments", resultNow, approval.Approve),
			},
			want: []want{
				{"approvals/a.yaml", plan.ApprovalApply, ""},
				{"approvals/b.yaml", plan.ApprovalIgnored, "same as approvals/a.yaml, which applies"},
			},
		},
		{
			name:    "continue a paused campaign",
			records: []approval.Record{rec("approvals/c.yaml", "paused", "", approval.Continue)},
			want:    []want{{"approvals/c.yaml", plan.ApprovalApply, ""}},
		},
		{
			name:    "a record the run already carried out",
			records: []approval.Record{rec("approvals/done.yaml", "paused", "", approval.Continue)},
			want:    []want{{"approvals/done.yaml", plan.ApprovalDone, "carried out by the current run"}},
		},
		{
			name:    "a record edited after it was carried out applies again",
			records: []approval.Record{{File: "approvals/done.yaml", Target: "paused", Generation: 2, By: "bob", Action: approval.Continue}},
			want:    []want{{"approvals/done.yaml", plan.ApprovalApply, ""}},
		},
		{
			name:    "continue naming an earlier generation",
			records: []approval.Record{generation(rec("approvals/c.yaml", "paused", "", approval.Continue), 1)},
			want: []want{{"approvals/c.yaml", plan.ApprovalIgnored,
				"names generation 1 of paused, and the recorded run is generation 2: a record decides only about the run it names"}},
		},
		{
			name:    "abort naming an earlier generation",
			records: []approval.Record{generation(rec("approvals/d.yaml", "paused", "", approval.Abort), 1)},
			want: []want{{"approvals/d.yaml", plan.ApprovalIgnored,
				"names generation 1 of paused, and the recorded run is generation 2: a record decides only about the run it names"}},
		},
		{
			name:    "continue naming no generation",
			records: []approval.Record{generation(rec("approvals/c.yaml", "paused", "", approval.Continue), 0)},
			want: []want{{"approvals/c.yaml", plan.ApprovalIgnored,
				"no generation: continue must name the run it decides about (the generation `fleetlift status` shows)"}},
		},
		{
			name:    "approve naming its generation",
			records: []approval.Record{generation(rec("approvals/a.yaml", "slog-rollout/payments", resultNow, approval.Approve), 1)},
			want:    []want{{"approvals/a.yaml", plan.ApprovalApply, ""}},
		},
		{
			name:    "approve naming another generation",
			records: []approval.Record{generation(rec("approvals/a.yaml", "slog-rollout/payments", resultNow, approval.Approve), 2)},
			want: []want{{"approvals/a.yaml", plan.ApprovalIgnored,
				"names generation 2 of slog-rollout, and the recorded run is generation 1: a record decides only about the run it names"}},
		},
		{
			name:    "continue a campaign that is not paused",
			records: []approval.Record{rec("approvals/c.yaml", "slog-rollout", "", approval.Continue)},
			want:    []want{{"approvals/c.yaml", plan.ApprovalIgnored, "nothing to continue: slog-rollout is awaiting_approval, not paused"}},
		},
		{
			name: "continue and abort conflict",
			records: []approval.Record{
				rec("approvals/c.yaml", "paused", "", approval.Continue),
				rec("approvals/d.yaml", "paused", "", approval.Abort),
			},
			want: []want{
				{"approvals/c.yaml", plan.ApprovalIgnored, "conflicts with approvals/d.yaml (abort); none of them applies"},
				{"approvals/d.yaml", plan.ApprovalIgnored, "conflicts with approvals/c.yaml (continue); none of them applies"},
			},
		},
		{
			name:    "abort a finished campaign",
			records: []approval.Record{rec("approvals/d.yaml", "finished", "", approval.Abort)},
			want:    []want{{"approvals/d.yaml", plan.ApprovalIgnored, "nothing to abort: finished is completed"}},
		},
		{
			name:    "abort a campaign with no recorded run",
			records: []approval.Record{rec("approvals/d.yaml", "gone", "", approval.Abort)},
			want:    []want{{"approvals/d.yaml", plan.ApprovalIgnored, "gone has no recorded run"}},
		},
		{
			name: "retry failed repositories",
			records: []approval.Record{
				rec("approvals/r1.yaml", "slog-rollout", "", approval.Retry),
				rec("approvals/r2.yaml", "slog-rollout/ledger", "", approval.Retry),
				rec("approvals/r3.yaml", "slog-rollout/search", "", approval.Retry),
				rec("approvals/r4.yaml", "finished", "", approval.Retry),
			},
			want: []want{
				{"approvals/r4.yaml", plan.ApprovalIgnored, "nothing to retry: no repository of finished failed"},
				{"approvals/r1.yaml", plan.ApprovalApply, ""},
				{"approvals/r2.yaml", plan.ApprovalApply, ""},
				{"approvals/r3.yaml", plan.ApprovalIgnored, "nothing to retry: slog-rollout/search has not failed"},
			},
		},
		{
			name:    "campaign actions do not apply to a task",
			records: []approval.Record{rec("approvals/c.yaml", "go-bump", "", approval.Continue)},
			want:    []want{{"approvals/c.yaml", plan.ApprovalIgnored, "continue acts on a campaign; go-bump is a Task"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := plan.Compute(plan.Desired{Approvals: c.records}, approvalState(), plan.Policy{})
			var got []want
			for _, a := range p.Approvals {
				got = append(got, want{a.Record.File, a.Status, a.Reason})
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("approvals:\n got %+v\nwant %+v", got, c.want)
			}
			applied, done := 0, 0
			for _, w := range c.want {
				switch w.Status {
				case plan.ApprovalApply:
					applied++
				case plan.ApprovalDone:
					done++
				}
			}
			s := p.Summary()
			if s.ApprovalsApplied != applied || s.ApprovalsDone != done || s.ApprovalsIgnored != len(c.want)-applied-done {
				t.Errorf("summary: %d applied, %d done, %d ignored; want %d, %d, %d", s.ApprovalsApplied, s.ApprovalsDone, s.ApprovalsIgnored, applied, done, len(c.want)-applied-done)
			}
			if p.HasChanges() != (applied > 0) {
				t.Errorf("HasChanges() = %t with %d approvals applied", p.HasChanges(), applied)
			}
		})
	}
}

// TestApprovalsForAnEndingRun: nothing applies to a run the same plan
// cancels.
func TestApprovalsForAnEndingRun(t *testing.T) {
	rec := approval.Record{File: "approvals/a.yaml", Target: "slog-rollout/payments", ResultDigest: resultNow, By: "alice", Action: approval.Approve}
	before := files{"campaigns/slog.yaml": slogRollout.yaml()}
	cases := []struct {
		name   string
		after  files
		policy plan.Policy
		status plan.ApprovalStatus
		reason string
	}{
		{"no change", before, plan.Policy{}, plan.ApprovalApply, ""},
		{"updated in place", files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.prompt = "x" }).yaml()}, plan.Policy{}, plan.ApprovalApply, ""},
		{"restarted", files{"campaigns/slog.yaml": slogRollout.with(func(c *camp) { c.update = "restart" }).yaml()}, plan.Policy{},
			plan.ApprovalIgnored, "its run is cancelled: the campaign restarts with its new spec"},
		{"removed and pruned", files{}, plan.Policy{Prune: true}, plan.ApprovalIgnored, "its run is cancelled: the campaign is pruned"},
		{"removed and orphaned", files{}, plan.Policy{}, plan.ApprovalApply, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recorded := applied(t, before)
			recorded[0].PendingApprovals = []state.PendingApproval{{Target: "slog-rollout/payments", ResultDigest: resultNow}}
			desired := load(t, c.after)
			desired.Approvals = []approval.Record{rec}
			p := plan.Compute(desired, recorded, c.policy)
			if got := p.Approvals[0]; got.Status != c.status || got.Reason != c.reason {
				t.Errorf("approval: %s %q, want %s %q", got.Status, got.Reason, c.status, c.reason)
			}
		})
	}
}

func TestApprovalCurrentDigest(t *testing.T) {
	p := plan.Compute(plan.Desired{Approvals: approvalsFixture()[1:2]}, approvalState(), plan.Policy{})
	if got := p.Approvals[0].Current; got != resultNow {
		t.Errorf("Current = %q, want the digest awaiting approval now, %q", got, resultNow)
	}
}

// TestRefusedApprovals: a record the approval gate refused shows as
// ignored with the gate's reason, even when it names the current result,
// and it does not conflict with a record that counts.
func TestRefusedApprovals(t *testing.T) {
	ok := approval.Record{File: "approvals/a.yaml", Target: "slog-rollout/payments", ResultDigest: resultNow, By: "alice", Action: approval.Approve}
	bad := approval.Record{File: "approvals/b.yaml", Target: "slog-rollout/payments", ResultDigest: resultNow, By: "mallory", Action: approval.Reject}
	p := plan.Compute(plan.Desired{Approvals: []approval.Record{ok}, Refused: []plan.Refusal{{Record: bad, Reason: "mallory may not approve campaigns/slog.yaml"}}},
		approvalState(), plan.Policy{})
	got := map[string]plan.ApprovalChange{}
	for _, a := range p.Approvals {
		got[a.Record.File] = a
	}
	if a := got["approvals/a.yaml"]; a.Status != plan.ApprovalApply {
		t.Errorf("the record that counts: %s (%s)", a.Status, a.Reason)
	}
	if a := got["approvals/b.yaml"]; a.Status != plan.ApprovalIgnored || a.Reason != "mallory may not approve campaigns/slog.yaml" || a.Current != resultNow {
		t.Errorf("the refused record: %+v", a)
	}
}
