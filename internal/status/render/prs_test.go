package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
)

// TestPRsShowDoneAgainstMergedAgainstOpen: `fleetlift prs` tells a
// merged repository that done_when passes from one that merged but is
// not done, or regressed, and from the open ones, in the table, its
// counts and -o json.
func TestPRsShowDoneAgainstMergedAgainstOpen(t *testing.T) {
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	pr := func(repo, state, done, note string) status.FollowedPR {
		p := status.FollowedPR{Repo: repo, PullRequestInfo: protocol.PullRequestInfo{URL: "https://git.example/acme/" + repo + "/pulls/1", Branch: "auto/x"},
			PullRequestStatus: forge.PullRequestStatus{State: state}, CheckedAt: at, Done: done, DoneNote: note}
		if done != "" {
			p.DoneAt = at
		}
		return p
	}
	runs := []RunPRs{{Run: "campaign/x", PRs: []status.FollowedPR{
		pr("a", forge.StateMerged, state.DoneYes, ""),
		pr("b", forge.StateMerged, state.DoneRegressed, "check exited with status 1: log.Printf is still used"),
		pr("c", forge.StateMerged, state.DoneNo, "check exited with status 1"),
		pr("d", forge.StateOpen, "", ""),
	}}}
	var table bytes.Buffer
	PRs(&table, runs)
	out := table.String()
	for _, want := range []string{"merged, done ", "merged, regressed", "done_when: check exited with status 1: log.Printf is still used",
		"pull requests: 1 open, 3 merged; of the merged, 1 done, 1 not done, 1 regressed (done_when)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var js bytes.Buffer
	if err := PRsJSON(&js, runs); err != nil {
		t.Fatal(err)
	}
	var got struct {
		PullRequests []struct {
			Repository, State, Done string
			DoneAt                  time.Time `json:"done_at"`
		} `json:"pull_requests"`
		Counts map[string]int `json:"counts"`
		Done   map[string]int `json:"done"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Counts["merged"] != 3 || got.Done["done"] != 1 || got.Done["regressed"] != 1 || got.Done["not_done"] != 1 ||
		got.PullRequests[0].Done != "done" || !got.PullRequests[0].DoneAt.Equal(at) || got.PullRequests[3].Done != "" {
		t.Errorf("json: %s", js.String())
	}
	if s := prSummary(runs[0].PRs, runs[0].PRs[1].URL); s != "merged, regressed" {
		t.Errorf("status shows %q beside b's pull request", s)
	}
}
