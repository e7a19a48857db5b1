package reconcile_test

import (
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/mirror"
	"github.com/fleetlift/fleetlift/internal/reconcile"
)

// TestApprovalBranchNamesAreInjective: targets that an earlier scheme
// folded together (the task "a--b" and the repository b of campaign a
// both had the branch fleetlift/approval/a--b and the record
// approvals/a-b.yaml) each get an approval branch, and an approval record
// path, of their own; every branch is a valid branch name.
func TestApprovalBranchNamesAreInjective(t *testing.T) {
	targets := []string{
		"a", "a-b", "a--b", "a/b", "a/-b", "a-/b", "a/b/c", "a/b-c", "a-b/c", "a/b.c", "a/b_c", "a_b",
		"slog-rollout/payments", "slog-rollout--payments", "slog-rollout-payments", "slog-rollout/backend/api",
		"slog-rollout/backend-api", "slog-rollout-backend/api", "x/y.lock", "x/y.", "x/.y",
	}
	branches := map[string]string{}
	paths := map[string]string{}
	for _, target := range targets {
		b := reconcile.ApprovalBranch(target)
		if err := git.CheckBranch(b); err != nil {
			t.Errorf("%s: %v", target, err)
		}
		if other, ok := branches[b]; ok {
			t.Errorf("%s and %s share the approval branch %s", other, target, b)
		}
		branches[b] = target
		for _, p := range []string{mirror.ApprovalPath(target), mirror.SecondApprovalPath(target, "alice"), mirror.SecondApprovalPath(target, "bob")} {
			if strings.Count(p, "/") != 1 || strings.Contains(p, "..") {
				t.Errorf("%s: record path %s is not a file directly under approvals/", target, p)
			}
			if other, ok := paths[p]; ok {
				t.Errorf("%s and %s share the record path %s", other, target, p)
			}
			paths[p] = target
		}
	}
}
