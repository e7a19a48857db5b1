package reviews_test

import (
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/reconcile/reviews"
)

// TestBranchNamesAreInjective: targets that an earlier scheme
// folded together (the task "a--b" and the repository b of campaign a
// both had the branch fleetlift/approval/a--b and the record
// approvals/a-b.yaml) each get an approval branch per result, and an
// approval record path, of their own; every branch is a valid branch
// name.
func TestBranchNamesAreInjective(t *testing.T) {
	targets := []string{
		"a", "a-b", "a--b", "a/b", "a/-b", "a-/b", "a/b/c", "a/b-c", "a-b/c", "a/b.c", "a/b_c", "a_b",
		"slog-rollout/payments", "slog-rollout--payments", "slog-rollout-payments", "slog-rollout/backend/api",
		"slog-rollout/backend-api", "slog-rollout-backend/api", "x/y.lock", "x/y.", "x/.y",
	}
	digests := []string{"sha256:" + strings.Repeat("1", 64), "sha256:" + strings.Repeat("2", 64)}
	branches := map[string]string{}
	paths := map[string]string{}
	for _, target := range targets {
		for _, digest := range digests {
			b, err := reviews.Branch(target, digest)
			if err != nil {
				t.Fatal(err)
			}
			if err := git.CheckBranch(b); err != nil {
				t.Errorf("%s: %v", target, err)
			}
			if other, ok := branches[b]; ok {
				t.Errorf("%s and %s share the approval branch %s", other, target+" "+digest, b)
			}
			branches[b] = target + " " + digest
		}
		for _, p := range []string{approval.RecordPath(target), approval.SecondRecordPath(target, "alice"), approval.SecondRecordPath(target, "bob")} {
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

func TestBranchRefusesOtherDigests(t *testing.T) {
	for _, d := range []string{"", "sha256:abc", "md5:" + strings.Repeat("1", 64), "sha256:" + strings.Repeat("A", 64), "sha256:" + strings.Repeat("1", 63) + "/"} {
		if b, err := reviews.Branch("slog/payments", d); err == nil {
			t.Errorf("Branch(%q) = %s, want an error", d, b)
		}
	}
}
