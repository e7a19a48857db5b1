package reconcile_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// Who may approve is what the watched branch said before the approval
// was committed: one push that adds an approver and that approver's
// records approves nothing, then or at any later revision; an approver
// added by an earlier commit approves from the next one on.
func TestApproverRulesComeFromBeforeTheApproval(t *testing.T) {
	const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	work := t.TempDir()
	gittest.Run(t, work, "init", "--quiet", "-b", "main")
	commit := func(who string, files map[string]string) string {
		gittest.WriteFiles(t, work, files)
		gittest.Run(t, work, "add", "-A")
		gittest.Run(t, work, "commit", "--quiet", "--author", who+" <"+who+"@example.com>", "-m", "by "+who)
		return gittest.Run(t, work, "rev-parse", "HEAD")
	}
	config := func(approvers ...string) string {
		return "version: 1\nkind: Config\nwatch:\n  branch: main\n  path: campaigns\nforge:\n  type: local\n" +
			"approvers:\n  - path: campaigns/**\n    users: [" + strings.Join(approvers, ", ") + "]\n"
	}
	record := func(by string) string {
		return "version: 1\nkind: Approval\ntarget: slog\naction: approve\nresult_digest: " + digest + "\nby: " + by + "\n"
	}
	commit("casey", map[string]string{"fleetlift.yaml": config("alice"), "campaigns/slog.yaml": camp{id: "slog"}.yaml()})
	// One push: mallory makes herself an approver and approves.
	forged := commit("mallory", map[string]string{"fleetlift.yaml": config("alice", "mallory"), "approvals/mallory.yaml": record("mallory")})
	later := commit("casey", map[string]string{"README.md": "unrelated\n"})
	// Now that the rule is in, a later approval by mallory counts, as
	// does alice's.
	last := commit("alice", map[string]string{"approvals/alice.yaml": record("alice")})
	last = commit("mallory", map[string]string{"approvals/mallory-again.yaml": record("mallory")})

	repo, err := source.Open(context.Background(), source.Options{URL: work, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	src := &reconcile.GitSource{Repo: repo, Ref: "main", Loader: &spec.Loader{Eval: spec.InProcess(1)}}
	for _, tc := range []struct {
		sha     string
		allowed []string
		refused []string
	}{
		{forged, nil, []string{"approvals/mallory.yaml"}},
		{later, nil, []string{"approvals/mallory.yaml"}},
		{last, []string{"approvals/alice.yaml", "approvals/mallory-again.yaml"}, []string{"approvals/mallory.yaml"}},
	} {
		rev, err := src.Read(context.Background(), tc.sha)
		if err != nil {
			t.Fatal(err)
		}
		var allowed, refused []string
		for _, a := range rev.Desired.Approvals {
			allowed = append(allowed, a.File)
		}
		for _, r := range rev.Desired.Refused {
			refused = append(refused, r.Record.File)
			if r.Record.File == "approvals/mallory.yaml" && !strings.Contains(r.Reason, "mallory") {
				t.Errorf("at %s: mallory's first record refused for %q; want the reason to name her", tc.sha[:7], r.Reason)
			}
		}
		if strings.Join(allowed, ",") != strings.Join(tc.allowed, ",") || strings.Join(refused, ",") != strings.Join(tc.refused, ",") {
			t.Errorf("at %s: allowed %v, refused %v (%+v); want allowed %v, refused %v", tc.sha[:7], allowed, refused, rev.Desired.Refused, tc.allowed, tc.refused)
		}
	}
}
