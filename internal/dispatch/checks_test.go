package dispatch_test

import (
	"encoding/json"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// answering is a stand-in workflow that answers query with answer until
// it is signalled to end.
func answering(ctx sdkworkflow.Context, query string, answer []byte) error {
	if err := sdkworkflow.SetQueryHandler(ctx, query, func() (rawJSON, error) { return rawJSON(answer), nil }); err != nil {
		return err
	}
	sdkworkflow.GetSignalChannel(ctx, "end").Receive(ctx, nil)
	return nil
}

type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// The count max_pending_checks holds at is read from the followers of a
// campaign's pull requests: open ones with checks pending and those not
// read yet, not merged, closed, green or failed ones; for a page of a
// campaign, every page's.
func TestPendingChecksCountsEveryPage(t *testing.T) {
	c := embedded(t)
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(answering, sdkworkflow.RegisterOptions{Name: "answering"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	read := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	pr := func(state, checks string, checked bool) status.FollowedPR {
		p := status.FollowedPR{PullRequestStatus: forge.PullRequestStatus{State: state, Checks: checks}}
		if checked {
			p.CheckedAt = read
		}
		return p
	}
	page1 := status.PullRequests{Source: "campaign/big/page-1@r", PRs: []status.FollowedPR{
		pr(forge.StateOpen, forge.StatusPending, true), pr(forge.StateOpen, forge.StatusSuccess, true),
		pr(forge.StateMerged, forge.StatusPending, true), pr(forge.StateClosed, forge.StatusPending, true)}}
	page2 := status.PullRequests{Source: "campaign/big/page-2@r", PRs: []status.FollowedPR{
		pr(forge.StateOpen, forge.StatusPending, true), pr("", "", false), pr(forge.StateOpen, forge.StatusFailure, true)}}
	campaign := status.CampaignState{ID: "big", Pages: []status.PageRef{
		{WorkflowID: page1.Source, Units: 500, Done: true}, {WorkflowID: page2.Source, Units: 500}, {Units: 12}}}
	start := func(id, query string, v any) {
		t.Helper()
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: workflow.TaskQueue}, "answering", query, data); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.SignalWorkflow(t.Context(), id, "", "end", nil) })
	}
	start("campaign/big", status.QueryStatus, campaign)
	start(status.FollowerID(page1.Source), status.QueryPullRequests, page1)
	start(status.FollowerID(page2.Source), status.QueryPullRequests, page2)

	for _, tc := range []struct {
		name string
		in   workflow.PendingChecksInput
		want int
	}{
		// Page 2's own: one pending, one not read yet.
		{"the page alone", workflow.PendingChecksInput{Source: page2.Source}, 2},
		// With page 1's pending one.
		{"every page of its campaign", workflow.PendingChecksInput{Source: page2.Source, Campaign: "campaign/big"}, 3},
		// No follower yet: nothing is pending.
		{"a campaign with no pull request yet", workflow.PendingChecksInput{Source: "campaign/new"}, 0},
		// Page 2 opened 5, its follower read 3 of them from it: 2
		// more, whose checks have barely started.
		{"opened since the follower's read", workflow.PendingChecksInput{Source: page2.Source, Campaign: "campaign/big", Opened: 5}, 5},
		// A campaign whose follower has not started yet.
		{"opened before any follower", workflow.PendingChecksInput{Source: "campaign/new", Opened: 4}, 4},
		// What the follower read counts as it says: no more opened.
		{"all read", workflow.PendingChecksInput{Source: page2.Source, Opened: 3}, 2},
	} {
		n, err := dispatch.CountPendingChecks(t.Context(), c, tc.in)
		if err != nil || n != tc.want {
			t.Errorf("%s: %d pending (%v); want %d", tc.name, n, err, tc.want)
		}
	}
}
