package dispatch_test

import (
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/status"
)

// TestRegenerable: prs update and prs retry make changes again for a
// campaign's units, and say why not for a task or a campaign in pages.
func TestRegenerable(t *testing.T) {
	if why := dispatch.Regenerable(&status.Run{Campaign: &status.CampaignState{}}); why != "" {
		t.Errorf("a campaign: %q", why)
	}
	if why := dispatch.Regenerable(&status.Run{Task: &status.TaskState{}}); !strings.Contains(why, "single task") {
		t.Errorf("a task: %q", why)
	}
	paged := &status.Run{Campaign: &status.CampaignState{Pages: []status.PageRef{{WorkflowID: "campaign/big/page-1@x"}}}}
	if why := dispatch.Regenerable(paged); !strings.Contains(why, "pages") {
		t.Errorf("a campaign in pages: %q", why)
	}
}
