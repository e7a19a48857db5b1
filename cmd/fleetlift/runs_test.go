package main

import (
	"encoding/json"
	"flag"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/fleetlift/fleetlift/internal/activity"
)

var recordRunsHistory = flag.String("record-runs-history", "", "write the history of TestRunCampaignRunsShortUnitsInRuns' campaign to this file (a replay test's fixture of a campaign that ran runs of units)")

// TestRunCampaignRunsShortUnitsInRuns: on the embedded server, a
// campaign of short units runs them in runs of several, each run one
// activity that heartbeats before each unit after its first: every
// repository gets its branch once, and the campaign's history holds
// fewer activities than units.
func TestRunCampaignRunsShortUnitsInRuns(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 8)
	def := writeDef(t, root, "runs.yaml", bumpCampaign("runs", urls, "max_parallel: 2\n"))
	addr, state := freeAddr(t), filepath.Join(root, "state")
	out, code := runCLI(t, "run", "--file", def, "--temporal-address", addr, "--state-dir", state)
	if code != 0 || !strings.Contains(out, "8 repositories: 8 completed, 0 failed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		got, err := exec.Command("git", "-C", bare, "show", "auto/runs/runs:go.mod").Output()
		if err != nil || !strings.Contains(string(got), "go 1.26") {
			t.Errorf("%s: branch auto/runs/runs missing or unchanged: %v", bare, err)
		}
	}

	srv := startServer(t, addr, state)
	c, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if *recordRunsHistory != "" {
		writeHistory(t, c, "campaign/runs", *recordRunsHistory)
	}
	var runs, units int
	seen := map[string]bool{}
	it := c.GetWorkflowHistory(t.Context(), "campaign/runs", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		a := e.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != "RunUnits" {
			continue
		}
		runs++
		var in activity.UnitsInput
		if err := json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in); err != nil {
			t.Fatal(err)
		}
		for _, u := range in.Units {
			units++
			seen[u.Key] = true
		}
	}
	// A run for each slot, of its fair share: 4 and 4.
	if runs != 2 || len(seen) != 8 {
		t.Errorf("%d runs held %d units (%d distinct): want all 8 units in 2 runs", runs, units, len(seen))
	}
	if units != 8 {
		t.Errorf("%d units taken into runs for 8: a unit was given back (the campaign cancelled its run, or the heartbeat failed)", units)
	}
}
