package status_test

import (
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/status"
)

// TestRegenerateBlocker: which pull requests keep_current, prs update
// and prs retry make again, and what they say of the others.
func TestRegenerateBlocker(t *testing.T) {
	open := func(mergeable, checks string) status.FollowedPR {
		return status.FollowedPR{Unit: "svc", CheckedAt: time.Now(),
			PullRequestStatus: forge.PullRequestStatus{State: forge.StateOpen, Mergeable: mergeable, Checks: checks}}
	}
	foreign := open(forge.MergeableConflict, "")
	foreign.Foreign = true
	task := open(forge.MergeableConflict, "")
	task.Unit = ""
	merged := open("", "")
	merged.State = forge.StateMerged
	tests := []struct {
		name  string
		p     status.FollowedPR
		mode  string
		named bool
		why   string
		same  bool
	}{
		{"conflicting, conflicted", open(forge.MergeableConflict, ""), status.KeepConflicted, false, "", false},
		{"behind, conflicted", open(forge.MergeableBehind, ""), status.KeepConflicted, false, "it is not conflicted", true},
		{"behind, behind", open(forge.MergeableBehind, ""), status.KeepBehind, false, "", false},
		{"conflicting, behind", open(forge.MergeableConflict, ""), status.KeepBehind, false, "", false},
		{"failing, failing", open(forge.MergeableYes, forge.StatusFailure), status.KeepFailing, false, "", false},
		{"green, failing", open(forge.MergeableYes, forge.StatusSuccess), status.KeepFailing, false, "it is not failing", true},
		{"green, named", open(forge.MergeableYes, forge.StatusSuccess), status.KeepFailing, true, "", false},
		{"someone pushed", foreign, status.KeepConflicted, false, "someone else pushed to its branch: fleetlift does not overwrite their commits", false},
		{"someone pushed, named", foreign, status.KeepBehind, true, "someone else pushed to its branch: fleetlift does not overwrite their commits", false},
		{"a task's", task, status.KeepConflicted, false, "a single task's pull requests are made again by running the task again", false},
		{"merged", merged, status.KeepBehind, true, "it is merged", true},
		{"unread", status.FollowedPR{Unit: "svc"}, status.KeepBehind, false, "not read from its forge yet", false},
	}
	for _, tt := range tests {
		why, same := status.RegenerateBlocker(tt.p, tt.mode, tt.named)
		if why != tt.why || same != tt.same {
			t.Errorf("%s: %q, %v; want %q, %v", tt.name, why, same, tt.why, tt.same)
		}
	}
}

// TestUnitKeepsItsPullRequestWhenRunAgain: a unit run again that
// proposes nothing (it failed, or could not push over someone's branch)
// still has the pull request its first run opened; one that proposes
// it again has it once.
func TestUnitKeepsItsPullRequestWhenRunAgain(t *testing.T) {
	pr := protocol.PullRequestInfo{URL: "https://forge/acme/svc/pull/1", Branch: "auto/x", Commit: "c1"}
	first := status.WithResult(status.UnitResult{Key: "svc"}, status.TaskResult{Phase: status.TaskCompleted,
		Repositories: []status.RepoResult{{Name: "svc", Status: "success", PullRequest: &pr}}}, false)
	failed := status.WithResult(first, status.TaskResult{Phase: status.TaskFailed, Error: "verifier failed",
		Repositories: []status.RepoResult{{Name: "svc", Status: "failed"}}}, false)
	if len(failed.PRs) != 1 || failed.PRs[0].URL != pr.URL || failed.Phase != status.TaskFailed {
		t.Errorf("after a failed run again: %+v", failed)
	}
	again := pr
	again.Commit = "c2"
	redone := status.WithResult(failed, status.TaskResult{Phase: status.TaskCompleted,
		Repositories: []status.RepoResult{{Name: "svc", Status: "success", PullRequest: &again}}}, false)
	if len(redone.PRs) != 1 || redone.PRs[0].Commit != "c2" {
		t.Errorf("after it was made again: %+v", redone.PRs)
	}
}
