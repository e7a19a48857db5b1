package dispatch

import (
	"slices"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
)

// A reopen the plan asks for again, because it read the state before
// the followers recorded the first, makes nothing again: only units
// whose regression is not recorded as reopened (for the commit it
// regressed at) are regenerated.
func TestReopenOnlyWhatIsNotReopenedYet(t *testing.T) {
	pr := func(unit, url, reopenedFor string) status.FollowedPR {
		return status.FollowedPR{Unit: unit, PullRequestInfo: protocol.PullRequestInfo{URL: url},
			Done: state.DoneRegressed, DoneBase: "b2", ReopenedFor: reopenedFor}
	}
	followed := []status.FollowedPR{
		pr("api", "u/api/1", "b2"), // reopened for this regression
		pr("web", "u/web/1", "b1"), // reopened for an earlier one: regressed again
		pr("cli", "u/cli/1", ""),   // never reopened
	}
	got := notReopened([]string{"api", "web", "cli", "new"}, followed)
	if want := []string{"web", "cli", "new"}; !slices.Equal(got, want) {
		t.Errorf("reopened %q, want %q", got, want)
	}
}
