package git_test

import (
	"context"
	"os"
	"os/exec"
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

// A bundle is a stranger's: one whose tree holds a .git directory (fsck
// refuses it), one that builds on a commit the repository lacks, one
// without the ref asked for, and a file that is no bundle are refused,
// and a good one gives its commit and tree.
func TestReadBundleChecksAStrangersObjects(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"go.mod": "go 1.21\n"})
	work := clone(t, g, remote, git.CloneOptions{})
	base := gittest.Run(t, work, "rev-parse", "HEAD")
	bundleOf := func(tree string) string {
		t.Helper()
		commit := gittest.Run(t, work, "commit-tree", "-m", "c", "-p", base, tree)
		gittest.Run(t, work, "update-ref", "refs/fleetlift/change", commit)
		path := filepath.Join(t.TempDir(), "b.bundle")
		gittest.Run(t, work, "bundle", "create", "--quiet", path, "refs/fleetlift/change", "^"+base)
		return path
	}
	blob := gitInput(t, work, "go 1.26\n", "hash-object", "-w", "--stdin")
	sub := gitInput(t, work, "100644 blob "+blob+"\tconfig\n", "mktree")
	evil := gitInput(t, work, "040000 tree "+sub+"\t.git\n100644 blob "+blob+"\tgo.mod\n", "mktree")
	good := gitInput(t, work, "100644 blob "+blob+"\tgo.mod\n", "mktree")

	s, err := g.CloneBare(ctx, remote, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.ReadBundle(ctx, open(t, bundleOf(evil)), "refs/fleetlift/change"); err == nil {
		t.Error("a bundle whose tree holds .git was taken")
	}
	if _, _, err := s.ReadBundle(ctx, open(t, bundleOf(good)), "refs/other"); err == nil || !strings.Contains(err.Error(), "holds no refs/other") {
		t.Errorf("a bundle without the ref: %v", err)
	}
	notBundle := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(notBundle, []byte("PACK"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadBundle(ctx, open(t, notBundle), "refs/fleetlift/change"); err == nil || !strings.Contains(err.Error(), "not a v2 git bundle") {
		t.Errorf("a file that is no bundle: %v", err)
	}
	other, err := g.NewScratch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, err := other.ReadBundle(ctx, open(t, bundleOf(good)), "refs/fleetlift/change"); err == nil || !strings.Contains(err.Error(), "does not have") {
		t.Errorf("a bundle on a base the repository lacks: %v", err)
	}
	commit, tree, err := s.ReadBundle(ctx, open(t, bundleOf(good)), "refs/fleetlift/change")
	if err != nil || tree != good || !git.IsObjectID(commit) {
		t.Errorf("a good bundle = %s, %s, %v; want tree %s", commit, tree, err, good)
	}
}

// gitInput runs git with args in dir, input on its standard input, and
// returns its output, trimmed.
func gitInput(t *testing.T, dir, input string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(input)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// open opens the file at p for the rest of the test.
func open(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
