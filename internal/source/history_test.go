package source_test

import (
	"context"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// TestLastChanges: each path is attributed to the latest commit that
// changed it, by whoever made that commit; a path missing at the revision
// is left out.
func TestLastChanges(t *testing.T) {
	work := t.TempDir()
	gittest.Run(t, work, "init", "--quiet", "-b", "main")
	commit := func(who string, files map[string]string) string {
		gittest.WriteFiles(t, work, files)
		gittest.Run(t, work, "add", "-A")
		gittest.Run(t, work, "commit", "--quiet", "--author", who+" <"+who+"@example.com>", "-m", "by "+who)
		return gittest.Run(t, work, "rev-parse", "HEAD")
	}
	first := commit("casey", map[string]string{"campaigns/a.yaml": "a1", "campaigns/b.yaml": "b1"})
	second := commit("robin", map[string]string{"approvals/a.yaml": "ok"})
	third := commit("sam", map[string]string{"campaigns/b.yaml": "b2"})

	r := open(t, work)
	got, err := r.LastChanges(context.Background(), third, []string{"campaigns/a.yaml", "campaigns/b.yaml", "approvals/a.yaml", "approvals/gone.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ hash, author string }{
		"campaigns/a.yaml": {first, "casey"},
		"campaigns/b.yaml": {third, "sam"},
		"approvals/a.yaml": {second, "robin"},
	}
	if len(got) != len(want) {
		t.Errorf("got %d paths (%v), want %d", len(got), got, len(want))
	}
	for p, w := range want {
		c := got[p]
		if c.Hash != w.hash || c.AuthorName != w.author || c.AuthorEmail != w.author+"@example.com" || c.CommitterName != "Test" {
			t.Errorf("%s: last changed by %+v, want %s by %s", p, c, w.hash, w.author)
		}
	}
	// At the first commit, b.yaml was last changed by it.
	got, err = r.LastChanges(context.Background(), first, []string{"campaigns/b.yaml", "approvals/a.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["campaigns/b.yaml"].Hash != first {
		t.Errorf("at the first commit: %+v", got)
	}
}
