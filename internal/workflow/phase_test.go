package workflow_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestCampaignWithFailedRepositoriesDoesNotReportCompleted: how a campaign
// ended is its final phase, in its result, its status query and the memo
// the state reader reads, with the counts in its message. Plain
// "completed" means every repository got its change.
func TestCampaignWithFailedRepositoriesDoesNotReportCompleted(t *testing.T) {
	cases := []struct {
		name  string
		units int
		fail  []string
		// threshold and action; zero threshold means 100 (never pause).
		threshold int
		action    string
		// signal, if set, is sent an hour in (while paused).
		signal    string
		arg       any
		wantPhase workflow.CampaignPhase
		wantMsg   string
	}{
		{name: "every repository completed", units: 4,
			wantPhase: workflow.CampaignCompleted, wantMsg: "4 repositories completed"},
		{name: "some repositories failed", units: 5, fail: []string{"r1", "r3"},
			wantPhase: workflow.CampaignCompletedWithFailures, wantMsg: "2 of 5 repositories failed, 3 completed"},
		{name: "every repository failed", units: 3, fail: []string{"r0", "r1", "r2"},
			wantPhase: workflow.CampaignFailed, wantMsg: "3 of 3 repositories failed"},
		{name: "paused at the threshold, then continued with --skip-remaining", units: 6, fail: []string{"r0"}, threshold: 30, action: "pause",
			signal: workflow.SignalContinue, arg: workflow.ContinueSignal{SkipRemaining: true},
			wantPhase: workflow.CampaignCompletedWithFailures,
			wantMsg:   "1 of 6 repositories failed, 1 completed, 4 skipped; continued with --skip-remaining"},
		{name: "every started repository failed, then --skip-remaining", units: 6, fail: []string{"r0", "r1"}, threshold: 30, action: "pause",
			signal: workflow.SignalContinue, arg: workflow.ContinueSignal{SkipRemaining: true},
			wantPhase: workflow.CampaignFailed,
			wantMsg:   "2 of 6 repositories failed, 4 skipped; continued with --skip-remaining"},
		{name: "paused at the threshold, then aborted", units: 6, fail: []string{"r0"}, threshold: 30, action: "pause",
			signal: workflow.SignalAbort, arg: workflow.RecordSignal{Record: "approvals/slog.yaml@abc"},
			wantPhase: workflow.CampaignAborted,
			wantMsg:   "1 of 6 repositories failed, 1 completed, 4 skipped; aborted by approvals/slog.yaml@abc"},
		{name: "aborted by the threshold", units: 6, fail: []string{"r1"}, threshold: 30, action: "abort",
			wantPhase: workflow.CampaignAborted,
			wantMsg:   "1 of 6 repositories failed, 1 completed, 4 skipped; aborted: 1 of 2 finished units failed, over the 30% threshold"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fleet{fail: map[string]bool{}}
			for _, k := range tc.fail {
				f.fail[k] = true
			}
			env := newCampaignEnv(f)
			var mu sync.Mutex
			var memoPhase any
			env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
				mu.Lock()
				defer mu.Unlock()
				if p, ok := args.Get(0).(map[string]any)[workflow.MemoPhase]; ok {
					memoPhase = p
				}
			}).Return(nil)
			in := campaignInput(tc.units)
			in.ThresholdPercent, in.FailureAction = 100, ""
			if tc.threshold > 0 {
				in.ThresholdPercent, in.FailureAction = tc.threshold, tc.action
			}
			if tc.signal != "" {
				env.RegisterDelayedCallback(func() { env.SignalWorkflow(tc.signal, tc.arg) }, time.Hour)
			}
			env.ExecuteWorkflow(workflow.Campaign, in)
			st := campaignResult(t, env)
			if st.Phase != tc.wantPhase || st.Message != tc.wantMsg {
				t.Errorf("result: %s (%s); want %s (%s)\n%s", st.Phase, st.Message, tc.wantPhase, tc.wantMsg, phases(st))
			}
			if q := queryState(t, env); q.Phase != tc.wantPhase || q.Message != tc.wantMsg {
				t.Errorf("status query after the end: %s (%s); want %s (%s)", q.Phase, q.Message, tc.wantPhase, tc.wantMsg)
			}
			mu.Lock()
			defer mu.Unlock()
			if memoPhase != string(tc.wantPhase) {
				t.Errorf("memo phase %v, want %s", memoPhase, tc.wantPhase)
			}
		})
	}
}

// TestFinalPhase: what each mix of unit outcomes ends in, and how it reads.
// A cancelled unit (rejected, or no approval in time) did not get its
// change either.
func TestFinalPhase(t *testing.T) {
	cases := []struct {
		name  string
		phase workflow.CampaignPhase
		s     workflow.Summary
		want  workflow.CampaignPhase
		msg   string
	}{
		{"no change: every unit completed", workflow.CampaignRunning, workflow.Summary{Total: 3, Completed: 3},
			workflow.CampaignCompleted, "3 repositories completed"},
		{"one repository", workflow.CampaignRunning, workflow.Summary{Total: 1, Completed: 1},
			workflow.CampaignCompleted, "1 repository completed"},
		{"no units", workflow.CampaignRunning, workflow.Summary{},
			workflow.CampaignCompleted, "no repositories"},
		{"skipped units alone", workflow.CampaignRunning, workflow.Summary{Total: 4, Completed: 1, Skipped: 3},
			workflow.CampaignCompleted, "1 of 4 repositories completed, 3 skipped"},
		{"one failed", workflow.CampaignRunning, workflow.Summary{Total: 4, Completed: 3, Failed: 1},
			workflow.CampaignCompletedWithFailures, "1 of 4 repositories failed, 3 completed"},
		{"one cancelled", workflow.CampaignRunning, workflow.Summary{Total: 4, Completed: 3, Cancelled: 1},
			workflow.CampaignCompletedWithFailures, "1 of 4 repositories cancelled, 3 completed"},
		{"failed and cancelled, none completed", workflow.CampaignRunning, workflow.Summary{Total: 2, Failed: 1, Cancelled: 1},
			workflow.CampaignFailed, "1 of 2 repositories failed, 1 cancelled"},
		{"aborted stays aborted", workflow.CampaignAborted, workflow.Summary{Total: 4, Completed: 2, Skipped: 2},
			workflow.CampaignAborted, "2 of 4 repositories completed, 2 skipped"},
		{"an old result: completed with failures", workflow.CampaignCompleted, workflow.Summary{Total: 2, Completed: 1, Failed: 1},
			workflow.CampaignCompletedWithFailures, "1 of 2 repositories failed, 1 completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := workflow.FinalPhase(c.phase, c.s); got != c.want {
				t.Errorf("FinalPhase = %s, want %s", got, c.want)
			}
			if got := c.s.Describe(); got != c.msg {
				t.Errorf("Describe = %q, want %q", got, c.msg)
			}
		})
	}
}

// TestFinalOfAnOldResult: a campaign that finished before the final phases
// were told apart recorded "completed" whatever its units did; it is
// reported as it ended, its reason kept.
func TestFinalOfAnOldResult(t *testing.T) {
	old := workflow.CampaignState{ID: "c", Phase: workflow.CampaignCompleted, Message: "continued with --skip-remaining",
		Summary: workflow.Summary{Total: 6, Completed: 1, Failed: 1, Skipped: 4}}
	got := workflow.Final(old)
	if got.Phase != workflow.CampaignCompletedWithFailures ||
		got.Message != "1 of 6 repositories failed, 1 completed, 4 skipped; continued with --skip-remaining" {
		t.Errorf("Final(old) = %s (%s)", got.Phase, got.Message)
	}
	if again := workflow.Final(got); again.Phase != got.Phase || again.Message != got.Message {
		t.Errorf("Final of a final state changed it: %s (%s)", again.Phase, again.Message)
	}
}
