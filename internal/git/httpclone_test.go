package git_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// fleetRemote is a bare repository <root>/api.git with what a clone must
// get right: nested directories, an executable, a link, a submodule's
// place, history whose blobs are deltas of each other, and a second
// branch.
func fleetRemote(t *testing.T, root string) string {
	t.Helper()
	long := strings.Repeat("package main // a line long enough to delta against\n", 200)
	remote := gittest.NewRemote(t, root, "api", map[string]string{
		"go.mod":            "module api\n\ngo 1.21\n",
		"cmd/api/main.go":   long,
		"a/b/c/deep.txt":    "deep\n",
		"a.txt":             "sorts before the directory a\n",
		"link":              gittest.LinkPrefix + "a/b/c/deep.txt",
		"scripts/build.sh":  "#!/bin/sh\necho build\n",
		"docs/README.md":    "# api\n",
		"docs/empty-ish.md": "",
	})
	work := t.TempDir()
	gittest.Run(t, work, "clone", "--quiet", remote, ".")
	gittest.Run(t, work, "update-index", "--chmod=+x", "scripts/build.sh")
	// A submodule's place: a gitlink, without .gitmodules (not followed).
	gittest.Run(t, work, "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("ab", 20)+",vendor/lib")
	gittest.Run(t, work, "commit", "--quiet", "-m", "modes")
	gittest.Run(t, work, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	for i := range 3 {
		gittest.Commit(t, remote, "main", map[string]string{"cmd/api/main.go": long + strings.Repeat("// more\n", i+1)})
	}
	gittest.Run(t, root, "--git-dir="+remote, "branch", "release", "main~1")
	// Tags of the tip, of the commit before it (release's tip) and of an
	// old commit: a clone gets those of the commits it fetched.
	gittest.Run(t, root, "--git-dir="+remote, "tag", "-a", "v1.0", "-m", "v1.0", "main")
	gittest.Run(t, root, "--git-dir="+remote, "tag", "latest", "main")
	gittest.Run(t, root, "--git-dir="+remote, "tag", "-a", "v0.9", "-m", "v0.9", "main~1")
	gittest.Run(t, root, "--git-dir="+remote, "tag", "old", "main~3")
	gittest.Run(t, remote, "config", "http.receivepack", "true")
	// Packed, as a forge's repositories are: the clone's pack then holds
	// deltas.
	gittest.Run(t, root, "--git-dir="+remote, "repack", "-adq")
	return remote
}

// tokenGit is a Git that sends the token to origin.
func tokenGit(origin string) *git.Git {
	g := newGit(git.DefaultTokenEnv + "=" + token)
	g.TokenOrigins = []string{origin}
	return g
}

// noGit is tokenGit whose every git process fails to start.
func noGit(t *testing.T, origin string) *git.Git {
	g := tokenGit(origin)
	g.Binary = filepath.Join(t.TempDir(), "no-git-here")
	return g
}

// A shallow clone of a branch over HTTP is made in this process, in two
// requests and without one git process, and is the clone git makes: the
// same files, modes and link, index, HEAD, remote configuration and
// shallow commits; git finds it clean and sound.
func TestHTTPCloneInProcess(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	remote := fleetRemote(t, root)
	srv, requests := countingGit(t, root, false)
	url := srv.URL + "/api.git"
	for _, o := range []git.CloneOptions{{Depth: 1}, {Depth: 2}, {Depth: 50}, {Branch: "release", Depth: 1}} {
		t.Run(fmt.Sprintf("%sdepth%d", o.Branch, o.Depth), func(t *testing.T) {
			requests()
			dir := filepath.Join(t.TempDir(), "clone")
			if err := noGit(t, srv.URL).Clone(ctx, url, dir, o); err != nil {
				t.Fatalf("in-process clone: %v", err)
			}
			want := []string{"GET /api.git/info/refs token=yes", "POST /api.git/git-upload-pack token=yes"}
			if got := requests(); !slices.Equal(got, want) {
				t.Errorf("requests = %q, want %q", got, want)
			}
			// What git clone makes of the same repository (a local path
			// is never cloned in process).
			ref := filepath.Join(t.TempDir(), "ref")
			if err := newGit().Clone(ctx, remote, ref, o); err != nil {
				t.Fatal(err)
			}
			sameClone(t, dir, ref)
		})
	}
}

// sameClone fails unless the clone at dir is what git clone made at ref.
func sameClone(t *testing.T, dir, ref string) {
	t.Helper()
	for _, args := range [][]string{
		{"ls-files", "--stage"},
		{"rev-parse", "HEAD", "HEAD^{tree}"},
		{"symbolic-ref", "HEAD"},
		{"for-each-ref", "--format=%(refname) %(objectname) %(objecttype) %(symref) %(*objectname)", "refs/heads", "refs/remotes", "refs/tags"},
		{"config", "--get-regexp", `^(remote|branch)\.`},
		{"log", "--format=%H %P"},
		{"rev-list", "--count", "HEAD"},
	} {
		got, want := gittest.Run(t, dir, args...), gittest.Run(t, ref, args...)
		want = strings.ReplaceAll(want, ref, dir)
		if args[0] == "config" {
			// The URLs differ (HTTP here, a path there).
			got, want = dropURL(got), dropURL(want)
		}
		if got != want {
			t.Errorf("git %s:\n got %s\nwant %s", strings.Join(args, " "), got, want)
		}
	}
	shallow := func(d string) string {
		b, _ := os.ReadFile(filepath.Join(d, ".git", "shallow"))
		return string(b)
	}
	if got, want := shallow(dir), shallow(ref); got != want {
		t.Errorf(".git/shallow = %q, want %q", got, want)
	}
	if out := gittest.Run(t, dir, "status", "--porcelain", "--ignore-submodules=none"); out != "" {
		t.Errorf("git status in the clone: %s", out)
	}
	if out := gittest.Run(t, dir, "fsck", "--no-progress", "--no-dangling"); out != "" {
		t.Errorf("git fsck in the clone: %s", out)
	}
	// The directories left for git to make when it needs them are made.
	gittest.Run(t, dir, "tag", "-a", "-m", "checked", "nested/checked")
	gittest.Run(t, dir, "tag", "-d", "nested/checked")
	for _, rel := range []string{"go.mod", "cmd/api/main.go", "a/b/c/deep.txt", "scripts/build.sh", "docs/empty-ish.md"} {
		got, err1 := os.Lstat(filepath.Join(dir, rel))
		want, err2 := os.Lstat(filepath.Join(ref, rel))
		if err1 != nil || err2 != nil || got.Mode() != want.Mode() || got.Size() != want.Size() {
			t.Errorf("%s: %v %v, want %v %v", rel, got.Mode(), err1, want.Mode(), err2)
		}
	}
	if target, err := os.Readlink(filepath.Join(dir, "link")); err != nil || target != "a/b/c/deep.txt" {
		t.Errorf("link -> %q, %v", target, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "vendor", "lib")); err != nil || !fi.IsDir() {
		t.Errorf("the submodule's place: %v", err)
	}
}

func dropURL(config string) string {
	var out []string
	for _, line := range strings.Split(config, "\n") {
		if !strings.HasPrefix(line, "remote.origin.url ") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// A clone made in process is one the rest works on in process too: its
// index's tree cache lets a commit be written without git write-tree,
// and the commit goes up without git push.
func TestHTTPCloneThenPushInProcess(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	fleetRemote(t, root)
	srv, requests := countingGit(t, root, false)
	url := srv.URL + "/api.git"
	g := tokenGit(srv.URL)
	dir := filepath.Join(t.TempDir(), "clone")
	if err := g.Clone(ctx, url, dir, git.CloneOptions{Depth: 1}); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := git.IndexTree(dir); err != nil || !ok || id != gittest.Run(t, dir, "rev-parse", "HEAD^{tree}") {
		t.Fatalf("the clone's tree cache gives %s, %v, %v; want HEAD's tree", id, ok, err)
	}
	gittest.WriteFiles(t, dir, map[string]string{"go.mod": "module api\n\ngo 1.26\n"})
	tree, err := g.Snapshot(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := noGit(t, srv.URL).CommitTree(ctx, dir, git.TreeCommit{Tree: tree, Parent: gittest.Run(t, dir, "rev-parse", "HEAD"),
		Message: "bump go", Author: git.Identity{Name: "Bot", Email: "bot@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	requests()
	if err := noGit(t, srv.URL).Push(ctx, dir, url, git.RefUpdate{Src: commit, Dst: "refs/heads/bump", Lease: true}); err != nil {
		t.Fatalf("push: %v", err)
	}
	if got := requests(); len(got) != 2 {
		t.Errorf("push requests = %q, want the advertisement and the pack", got)
	}
	if got := gittest.Run(t, root, "--git-dir="+filepath.Join(root, "api.git"), "show", "bump:go.mod"); !strings.Contains(got, "go 1.26") {
		t.Errorf("pushed go.mod = %q", got)
	}
	// The push went over the connection the clone left open.
	if n := connectionsTo(srv); n != 1 {
		t.Errorf("the clone and the push opened %d connections, want 1", n)
	}
}

// The diff of an in-process clone's files, each changed in one place, is
// made without a git process, and is the one git makes of a clone of its
// own with the same changes.
func TestHTTPCloneDiffInProcess(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	// fleetRemote's gitlink leaves staging to git.
	main := strings.Repeat("package main // a line long enough to delta against\n", 50)
	remote := gittest.NewRemote(t, root, "api", map[string]string{
		"go.mod": "module api\n\ngo 1.21\n", "cmd/api/main.go": main, "docs/README.md": "# api\n",
	})
	gittest.Commit(t, remote, "main", map[string]string{"cmd/api/main.go": main + "// more\n"})
	gittest.Run(t, root, "--git-dir="+remote, "repack", "-adq")
	srv, _ := countingGit(t, root, false)
	dir := filepath.Join(t.TempDir(), "clone")
	if err := tokenGit(srv.URL).Clone(ctx, srv.URL+"/api.git", dir, git.CloneOptions{Depth: 1}); err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(t.TempDir(), "ref")
	if err := newGit().Clone(ctx, remote, ref, git.CloneOptions{Depth: 1}); err != nil {
		t.Fatal(err)
	}
	edit := map[string]string{
		"go.mod":          "module api\n\ngo 1.26\n",
		"cmd/api/main.go": main + "// more, and then some\n",
	}
	base := strings.TrimSpace(gittest.Run(t, ref, "rev-parse", "HEAD"))
	gittest.WriteFiles(t, dir, edit)
	got, err := noGit(t, srv.URL).Changes(ctx, dir, git.DiffOptions{Base: base})
	if err != nil {
		t.Fatalf("diff without git: %v", err)
	}
	gittest.WriteFiles(t, ref, edit)
	want, err := newGit().Changes(ctx, ref, git.DiffOptions{Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Files) != 2 || got.Tree != want.Tree || !slices.Equal(got.Files, want.Files) {
		t.Fatalf("in process: %+v\ngit: %+v", got, want)
	}
}

// What the in-process clone does not take is git's: a .gitattributes is
// applied by git's checkout (line endings converted as git clone does),
// and a tree with a path git refuses fails the clone as git clone fails
// it, with nothing of it checked out.
func TestHTTPCloneLeavesTheRestToGit(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	gittest.NewRemote(t, root, "crlf", map[string]string{
		".gitattributes": "*.txt text eol=crlf\n",
		"a.txt":          "one\ntwo\n",
		"b.bin":          "one\ntwo\n",
	})
	evil := gittest.NewRemote(t, root, "evil", map[string]string{"ok.txt": "ok\n"})
	// A tree with a .GIT directory, which git never checks out.
	blob := gittest.Run(t, root, "--git-dir="+evil, "rev-parse", "main:ok.txt")
	inner := mktree(t, evil, "100644 blob "+blob+"\tconfig")
	top := mktree(t, evil, "040000 tree "+inner+"\t.GIT", "100644 blob "+blob+"\tok.txt")
	commit := gittest.Run(t, root, "--git-dir="+evil, "commit-tree", "-m", "evil", top)
	gittest.Run(t, root, "--git-dir="+evil, "update-ref", "refs/heads/main", commit)

	// A link and a directory of one name: the directory's file must not
	// be written where the link points.
	outside := t.TempDir()
	links := gittest.NewRemote(t, root, "links", map[string]string{"ok.txt": "ok\n"})
	linkBlob := hashObject(t, links, outside)
	sub := mktree(t, links, "100644 blob "+blob+"\tx")
	top = mktree(t, links, "120000 blob "+linkBlob+"\ta", "040000 tree "+sub+"\ta")
	commit = gittest.Run(t, root, "--git-dir="+links, "commit-tree", "-m", "links", top)
	gittest.Run(t, root, "--git-dir="+links, "update-ref", "refs/heads/main", commit)

	srv, requests := countingGit(t, root, false)
	g := tokenGit(srv.URL)

	_ = g.Clone(ctx, srv.URL+"/links.git", filepath.Join(t.TempDir(), "links"), git.CloneOptions{Depth: 1})
	if _, err := os.Lstat(filepath.Join(outside, "x")); err == nil {
		t.Error("a file was written through a link")
	}
	requests()

	dir := filepath.Join(t.TempDir(), "crlf")
	if err := g.Clone(ctx, srv.URL+"/crlf.git", dir, git.CloneOptions{Depth: 1}); err != nil {
		t.Fatal(err)
	}
	if got := requests(); len(got) != 2 {
		t.Errorf("requests = %q, want one in-process fetch", got)
	}
	for name, want := range map[string]string{"a.txt": "one\r\ntwo\r\n", "b.bin": "one\ntwo\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	if out := gittest.Run(t, dir, "status", "--porcelain"); out != "" {
		t.Errorf("git status: %s", out)
	}

	dir = filepath.Join(t.TempDir(), "evil")
	err := g.Clone(ctx, srv.URL+"/evil.git", dir, git.CloneOptions{Depth: 1})
	if err == nil {
		t.Fatal("a clone of a tree with .GIT succeeded")
	}
	if !strings.Contains(err.Error(), ".GIT") {
		t.Errorf("error = %v, want git's, naming .GIT", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".GIT")); err == nil {
		t.Error(".GIT was checked out")
	}
	// The in-process fetch, then git clone's own.
	if got := requests(); len(got) < 4 {
		t.Errorf("requests = %q, want git clone after the in-process attempt", got)
	}
}

func mktree(t *testing.T, bare string, entries ...string) string {
	t.Helper()
	cmd := exec.Command("git", "--git-dir="+bare, "mktree")
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(strings.Join(entries, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git mktree: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// hashObject stores content as a blob in bare and returns its id.
func hashObject(t *testing.T, bare, content string) string {
	t.Helper()
	cmd := exec.Command("git", "--git-dir="+bare, "hash-object", "-w", "--stdin")
	cmd.Env = gittest.Env()
	cmd.Stdin = strings.NewReader(content)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git hash-object: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// A repository whose pack is over what the in-process clone holds is
// cloned by git clone, after the attempt: the clone is whole either way.
func TestHTTPCloneOfALargeRepositoryIsGits(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	big := make([]byte, 33<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	gittest.NewRemote(t, root, "big", map[string]string{"blob.bin": string(big), "README.md": "big\n"})
	srv, requests := countingGit(t, root, false)
	dir := filepath.Join(t.TempDir(), "big")
	if err := tokenGit(srv.URL).Clone(ctx, srv.URL+"/big.git", dir, git.CloneOptions{Depth: 1}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "blob.bin")); err != nil || !bytes.Equal(got, big) {
		t.Errorf("blob.bin: %d bytes, %v; want the %d bytes pushed", len(got), err, len(big))
	}
	if out := gittest.Run(t, dir, "status", "--porcelain"); out != "" {
		t.Errorf("git status: %s", out)
	}
	// The in-process attempt's two requests, then git clone's.
	if got := requests(); len(got) < 4 || got[1] != "POST /big.git/git-upload-pack token=yes" {
		t.Errorf("requests = %q, want the in-process attempt, then git clone", got)
	}
}
