package git_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// A change bundled in process is one git takes as a stranger's: the
// bundle verifies against a clone of the base, and fetching it with
// every object checked (fsck) gives the commit, with the tree changed
// deep down, a file removed and a new directory, and nothing else moved.
func TestBundleIsOneGitFetches(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	remote := gittest.NewRemote(t, "", "svc", map[string]string{
		"go.mod": "go 1.21\n", "a/b/c.go": "package b\n", "a/keep.go": "package a\n", "gone.txt": "x\n", "docs/readme": "r\n",
	})
	dir := clone(t, g, remote, git.CloneOptions{})
	base, err := g.RevParse(ctx, dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	gittest.WriteFiles(t, dir, map[string]string{"a/b/c.go": "package b // changed\n", "new/dir/n.go": "package dir\n"})
	if err := os.Remove(filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	c, err := g.Changes(ctx, dir, git.DiffOptions{Base: base})
	if err != nil {
		t.Fatal(err)
	}
	commit, err := g.CommitTree(ctx, dir, git.TreeCommit{Tree: c.Tree, Parent: base, Message: "change"})
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "change.bundle")
	if err := g.Bundle(ctx, dir, bundle, "refs/fleetlift/change", commit, base); err != nil {
		t.Fatal(err)
	}

	other := filepath.Join(t.TempDir(), "other")
	gittest.Run(t, "", "clone", "-q", "--bare", remote, other)
	gittest.Run(t, other, "bundle", "verify", "-q", bundle)
	gittest.Run(t, other, "-c", "transfer.fsckObjects=true", "fetch", "-q", bundle, "refs/fleetlift/change:refs/heads/change")
	if got := gittest.Run(t, other, "rev-parse", "change^{tree}"); got != c.Tree {
		t.Errorf("fetched tree %s, want %s", got, c.Tree)
	}
	gittest.Run(t, other, "fsck", "--no-dangling", "--strict")
	if got := gittest.Run(t, other, "diff", "--name-status", base, "change"); got != "M\ta/b/c.go\nD\tgone.txt\nA\tnew/dir/n.go" {
		t.Errorf("the bundled change:\n%s", got)
	}
	// Only what the base lacks: the commit, the changed and new trees
	// (root, a, a/b, new, new/dir) and the two new blobs.
	data, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	_, pack, _ := strings.Cut(string(data), "\n\n")
	packFile := filepath.Join(t.TempDir(), "change.pack")
	if err := os.WriteFile(packFile, []byte(pack), 0o600); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, other, "index-pack", packFile)
	got := gittest.Run(t, other, "verify-pack", "-v", strings.TrimSuffix(packFile, ".pack")+".idx")
	if n := strings.Count(got, " commit ") + strings.Count(got, " tree ") + strings.Count(got, " blob "); n != 8 {
		t.Errorf("the bundle holds %d objects, want 8:\n%s", n, got)
	}

	if err := g.Bundle(ctx, dir, bundle, "HEAD", commit, base); err == nil {
		t.Error("a bundle of a ref outside refs/ was written")
	}
}
