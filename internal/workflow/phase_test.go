package workflow_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/fleetlift/fleetlift/internal/status"
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
		wantPhase status.CampaignPhase
		wantMsg   string
	}{
		{name: "every repository completed", units: 4,
			wantPhase: status.CampaignCompleted, wantMsg: "4 repositories completed"},
		{name: "some repositories failed", units: 5, fail: []string{"r1", "r3"},
			wantPhase: status.CampaignCompletedWithFailures, wantMsg: "2 of 5 repositories failed, 3 completed"},
		{name: "every repository failed", units: 3, fail: []string{"r0", "r1", "r2"},
			wantPhase: status.CampaignFailed, wantMsg: "3 of 3 repositories failed"},
		{name: "paused at the threshold, then continued with --skip-remaining", units: 6, fail: []string{"r0"}, threshold: 30, action: "pause",
			signal: workflow.SignalContinue, arg: workflow.ContinueSignal{SkipRemaining: true},
			wantPhase: status.CampaignCompletedWithFailures,
			wantMsg:   "1 of 6 repositories failed, 1 completed, 4 skipped; continued with --skip-remaining"},
		{name: "every started repository failed, then --skip-remaining", units: 6, fail: []string{"r0", "r1"}, threshold: 30, action: "pause",
			signal: workflow.SignalContinue, arg: workflow.ContinueSignal{SkipRemaining: true},
			wantPhase: status.CampaignFailed,
			wantMsg:   "2 of 6 repositories failed, 4 skipped; continued with --skip-remaining"},
		{name: "paused at the threshold, then aborted", units: 6, fail: []string{"r0"}, threshold: 30, action: "pause",
			signal: workflow.SignalAbort, arg: workflow.RecordSignal{Record: "approvals/slog.yaml@abc"},
			wantPhase: status.CampaignAborted,
			wantMsg:   "1 of 6 repositories failed, 1 completed, 4 skipped; aborted by approvals/slog.yaml@abc"},
		{name: "aborted by the threshold", units: 6, fail: []string{"r1"}, threshold: 30, action: "abort",
			wantPhase: status.CampaignAborted,
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
				if p, ok := args.Get(0).(map[string]any)[status.MemoPhase]; ok {
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
		phase status.CampaignPhase
		s     status.Summary
		want  status.CampaignPhase
		msg   string
	}{
		{"no change: every unit completed", status.CampaignRunning, status.Summary{Total: 3, Completed: 3},
			status.CampaignCompleted, "3 repositories completed"},
		{"one repository", status.CampaignRunning, status.Summary{Total: 1, Completed: 1},
			status.CampaignCompleted, "1 repository completed"},
		{"no units", status.CampaignRunning, status.Summary{},
			status.CampaignCompleted, "no repositories"},
		{"skipped units alone", status.CampaignRunning, status.Summary{Total: 4, Completed: 1, Skipped: 3},
			status.CampaignCompleted, "1 of 4 repositories completed, 3 skipped"},
		{"one failed", status.CampaignRunning, status.Summary{Total: 4, Completed: 3, Failed: 1},
			status.CampaignCompletedWithFailures, "1 of 4 repositories failed, 3 completed"},
		{"one cancelled", status.CampaignRunning, status.Summary{Total: 4, Completed: 3, Cancelled: 1},
			status.CampaignCompletedWithFailures, "1 of 4 repositories cancelled, 3 completed"},
		{"failed and cancelled, none completed", status.CampaignRunning, status.Summary{Total: 2, Failed: 1, Cancelled: 1},
			status.CampaignFailed, "1 of 2 repositories failed, 1 cancelled"},
		{"aborted stays aborted", status.CampaignAborted, status.Summary{Total: 4, Completed: 2, Skipped: 2},
			status.CampaignAborted, "2 of 4 repositories completed, 2 skipped"},
		{"an old result: completed with failures", status.CampaignCompleted, status.Summary{Total: 2, Completed: 1, Failed: 1},
			status.CampaignCompletedWithFailures, "1 of 2 repositories failed, 1 completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := status.FinalPhase(c.phase, c.s); got != c.want {
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
	old := status.CampaignState{ID: "c", Phase: status.CampaignCompleted, Message: "continued with --skip-remaining",
		Summary: status.Summary{Total: 6, Completed: 1, Failed: 1, Skipped: 4}}
	got := status.Final(old)
	if got.Phase != status.CampaignCompletedWithFailures ||
		got.Message != "1 of 6 repositories failed, 1 completed, 4 skipped; continued with --skip-remaining" {
		t.Errorf("Final(old) = %s (%s)", got.Phase, got.Message)
	}
	if again := status.Final(got); again.Phase != got.Phase || again.Message != got.Message {
		t.Errorf("Final of a final state changed it: %s (%s)", again.Phase, again.Message)
	}
}
