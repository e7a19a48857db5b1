package git_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

func newGit(extraEnv ...string) *git.Git {
	return &git.Git{Env: append(gittest.Env(), extraEnv...)}
}

func clone(t *testing.T, g *git.Git, url string, o git.CloneOptions) string {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "clone")
	if err := g.Clone(context.Background(), url, dest, o); err != nil {
		t.Fatal(err)
	}
	return dest
}

func TestCloneHonoursBranchAndDepth(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	remote := gittest.NewRemote(t, "", "api", map[string]string{"README.md": "one\n"})
	gittest.Commit(t, remote, "main", map[string]string{"README.md": "two\n"})
	gittest.Run(t, filepath.Dir(remote), "--git-dir="+remote, "branch", "release", "main")
	gittest.Commit(t, remote, "release", map[string]string{"README.md": "three\n"})

	dir := clone(t, g, remote, git.CloneOptions{Branch: "release", Depth: 1})
	if b, _ := g.CurrentBranch(ctx, dir); b != "release" {
		t.Errorf("checked out %q, want release", b)
	}
	if n, _ := g.Run(ctx, dir, "rev-list", "--count", "HEAD"); strings.TrimSpace(n) != "1" {
		t.Errorf("clone has %s commits, want 1 (depth 1)", strings.TrimSpace(n))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "README.md")); string(got) != "three\n" {
		t.Errorf("README.md = %q, want the release branch's", got)
	}

	full := clone(t, g, "file://"+remote, git.CloneOptions{})
	if n, _ := g.Run(ctx, full, "rev-list", "--count", "HEAD"); strings.TrimSpace(n) != "2" {
		t.Errorf("full clone of main has %s commits, want 2", strings.TrimSpace(n))
	}
}

func TestCloneOfLocalPathSharesNothing(t *testing.T) {
	g := newGit()
	remote := gittest.NewRemote(t, "", "api", map[string]string{"a.txt": "a\n"})
	dir := clone(t, g, remote, git.CloneOptions{})
	if _, err := os.Stat(filepath.Join(dir, ".git", "objects", "info", "alternates")); err == nil {
		t.Fatal("clone borrows objects from its source through alternates")
	}
	err := filepath.WalkDir(filepath.Join(dir, ".git", "objects"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			t.Errorf("%s is hard-linked (%d links) with the source", p, st.Nlink)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, ".git", "hooks")); len(entries) > 0 {
		t.Errorf("clone installed hooks: %v", entries)
	}
}

func TestCloneFollowsSubmodulesOnlyWhenAsked(t *testing.T) {
	parent := t.TempDir()
	elsewhere := gittest.NewRemote(t, parent, "elsewhere", map[string]string{"secret.txt": "from elsewhere\n"})
	remote := gittest.NewRemote(t, parent, "api", map[string]string{"main.go": "package main\n"})
	gittest.AddSubmodule(t, remote, elsewhere, "vendor/dep")
	g := newGit()

	tests := []struct {
		name       string
		submodules bool
		wantSecret bool
	}{
		{"submodules off", false, false},
		{"submodules on", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := clone(t, g, remote, git.CloneOptions{Submodules: tt.submodules})
			_, err := os.Stat(filepath.Join(dir, "vendor", "dep", "secret.txt"))
			if got := err == nil; got != tt.wantSecret {
				t.Fatalf("submodule content present = %v, want %v", got, tt.wantSecret)
			}
		})
	}
}

func TestCommitAndPushRunNoHooksOrFilters(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	remote := gittest.NewRemote(t, "", "api", map[string]string{"a.txt": "a\n"})
	dir := clone(t, g, remote, git.CloneOptions{})
	marker := filepath.Join(t.TempDir(), "pwned")
	hook := "#!/bin/sh\ntouch " + marker + "\n"
	for _, d := range []string{filepath.Join(dir, ".git", "hooks"), filepath.Join(dir, "evil-hooks")} {
		for _, name := range []string{"pre-commit", "commit-msg", "post-commit", "post-checkout", "pre-push", "reference-transaction"} {
			gittest.WriteFiles(t, d, map[string]string{name: hook})
			os.Chmod(filepath.Join(d, name), 0o755)
		}
	}
	// What a hostile agent could write into the clone's configuration.
	gittest.Run(t, dir, "config", "core.hooksPath", "evil-hooks")
	gittest.Run(t, dir, "config", "filter.evil.clean", "touch "+marker+"; cat")
	gittest.Run(t, dir, "config", "filter.evil.smudge", "touch "+marker+"; cat")
	gittest.Run(t, dir, "config", "core.fsmonitor", "touch "+marker)
	gittest.WriteFiles(t, dir, map[string]string{".gitattributes": "* filter=evil\n", "a.txt": "changed\n"})

	if _, err := os.Stat(marker); err == nil {
		t.Fatal("setting up the hostile clone ran its own hooks")
	}
	id, err := g.Commit(ctx, dir, git.CommitOptions{Branch: "fleetlift/t1", Message: "change", Author: git.Identity{Name: "Bot", Email: "bot@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hook, filter or fsmonitor from the clone ran during commit")
	}
	if err := g.Push(ctx, dir, remote, git.RefUpdate{Src: "fleetlift/t1", Dst: "refs/heads/fleetlift/t1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hook from the clone ran during push")
	}
	if got := gittest.Run(t, remote, "rev-parse", "refs/heads/fleetlift/t1"); got != id {
		t.Fatalf("remote branch at %s, want %s", got, id)
	}
	if author := gittest.Run(t, remote, "log", "-1", "--format=%an <%ae>", id); author != "Bot <bot@example.com>" {
		t.Errorf("author %q", author)
	}

	if _, err := g.Commit(ctx, dir, git.CommitOptions{Message: "again"}); !errors.Is(err, git.ErrNoChanges) {
		t.Errorf("commit without changes = %v, want ErrNoChanges", err)
	}
}

func TestFiltersStayOffHoweverTheConfigurationDefinesThem(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	// The clones' configuration names the remote's path: not one under
	// this test's own directory, whose name spells "filter".
	parent, err := os.MkdirTemp("", "fleetlift-remote-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	remote := gittest.NewRemote(t, parent, "api", map[string]string{"a.txt": "a\n"})
	for name, define := range map[string]func(dir, cmd string){
		"in an included file": func(dir, cmd string) {
			gittest.WriteFiles(t, dir, map[string]string{".git/evil.cfg": "[filter \"evil\"]\n\tclean = " + cmd + "\n"})
			gittest.Run(t, dir, "config", "include.path", "evil.cfg")
		},
		"in a worktree's configuration": func(dir, cmd string) {
			gittest.Run(t, dir, "config", "extensions.worktreeConfig", "true")
			gittest.WriteFiles(t, dir, map[string]string{".git/config.worktree": "[filter \"evil\"]\n\tclean = " + cmd + "\n"})
		},
		"with the old dotted section name": func(dir, cmd string) {
			appendConfig(t, dir, "[Filter.evil]\n\tclean = "+cmd+"\n")
		},
		"with an upper-case section name": func(dir, cmd string) {
			appendConfig(t, dir, "[FILTER \"evil\"]\n\tclean = "+cmd+"\n")
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := clone(t, g, remote, git.CloneOptions{})
			marker := filepath.Join(t.TempDir(), "pwned")
			define(dir, "touch "+marker+"; cat")
			if got := gittest.Run(t, dir, "config", "filter.evil.clean"); !strings.Contains(got, marker) {
				t.Fatalf("the filter is not defined: %q", got)
			}
			gittest.WriteFiles(t, dir, map[string]string{".gitattributes": "* filter=evil\n", "a.txt": "changed\n"})
			if _, err := g.Changes(ctx, dir, git.DiffOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the clone's filter ran while its changes were read")
			}
		})
	}
}

// appendConfig adds text to the end of the clone's .git/config.
func appendConfig(t *testing.T, dir, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Reading the changes of a clone whose configuration defines no filter
// driver asks git nothing about its configuration: one process fewer a
// unit. (What a configuration that does define one gets is above.)
func TestChangesOfAPlainCloneReadNoConfiguration(t *testing.T) {
	ctx := context.Background()
	remote := gittest.NewRemote(t, "", "api", map[string]string{"a.txt": "a\n"})
	dir := clone(t, newGit(), remote, git.CloneOptions{})
	log := filepath.Join(t.TempDir(), "git.log")
	wrapper := filepath.Join(t.TempDir(), "git")
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + log + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	g := newGit()
	g.Binary = wrapper
	gittest.WriteFiles(t, dir, map[string]string{"a.txt": "changed\n"})
	c, err := g.Changes(ctx, dir, git.DiffOptions{})
	if err != nil || len(c.Files) != 1 {
		t.Fatalf("Changes = %+v, %v; want a.txt changed", c.Files, err)
	}
	data, _ := os.ReadFile(log)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.Contains(line, " config ") {
			t.Errorf("git ran %q", line)
		}
	}
	if !strings.Contains(string(data), " write-tree") {
		t.Fatalf("the wrapper saw no git command: %q", data)
	}
}

func TestPushWithLease(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	remote := gittest.NewRemote(t, "", "api", map[string]string{"a.txt": "a\n"})
	dir := clone(t, g, remote, git.CloneOptions{})
	base, _ := g.RevParse(ctx, dir, "HEAD")
	gittest.WriteFiles(t, dir, map[string]string{"a.txt": "b\n"})
	first, err := g.Commit(ctx, dir, git.CommitOptions{Branch: "topic", Message: "one"})
	if err != nil {
		t.Fatal(err)
	}

	// PushCreated tells a branch the push made from one that was there
	// (which the forge uses to skip looking for a pull request from it).
	tests := []struct {
		name        string
		update      git.RefUpdate
		wantErr     bool
		wantRef     string
		wantCreated bool
	}{
		{"create when missing", git.RefUpdate{Src: first, Dst: "refs/heads/topic", Lease: true}, false, first, true},
		{"create again is a no-op", git.RefUpdate{Src: first, Dst: "refs/heads/topic", Lease: true}, false, first, false},
		{"stale lease is refused", git.RefUpdate{Src: base, Dst: "refs/heads/topic", Lease: true, Expect: base}, true, first, false},
		{"rewind with the right lease", git.RefUpdate{Src: base, Dst: "refs/heads/topic", Lease: true, Expect: first}, false, base, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			created, err := g.PushCreated(ctx, dir, remote, tt.update)
			if (err != nil) != tt.wantErr {
				t.Fatalf("push = %v, want error %v", err, tt.wantErr)
			}
			if got := slices.Contains(created, "refs/heads/topic"); got != tt.wantCreated {
				t.Errorf("push reports refs created %q, want topic among them %v", created, tt.wantCreated)
			}
			refs, err := g.LsRemote(ctx, remote, "refs/heads/topic")
			if err != nil {
				t.Fatal(err)
			}
			if refs["refs/heads/topic"] != tt.wantRef {
				t.Fatalf("remote topic at %s, want %s", refs["refs/heads/topic"], tt.wantRef)
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	dir := clone(t, g, gittest.NewRemote(t, "", "api", map[string]string{"a.txt": "a\n"}), git.CloneOptions{})
	first, err := g.Snapshot(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := g.Snapshot(ctx, dir); again != first {
		t.Errorf("snapshot of an unchanged tree changed: %s != %s", again, first)
	}
	gittest.WriteFiles(t, dir, map[string]string{"b.txt": "b\n"})
	if changed, _ := g.Snapshot(ctx, dir); changed == first {
		t.Error("snapshot did not change after adding a file")
	}
}

func TestRunRefusesGlobalOptions(t *testing.T) {
	g := newGit()
	dir := clone(t, g, gittest.NewRemote(t, "", "api", map[string]string{"a.txt": "a\n"}), git.CloneOptions{})
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"a command", []string{"status", "--short"}, true},
		{"override the hooks path", []string{"-c", "core.hooksPath=.git/hooks", "commit"}, false},
		{"another git directory", []string{"--git-dir=/etc", "status"}, false},
		{"nothing", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := g.Run(context.Background(), dir, tt.args...); (err == nil) != tt.ok {
				t.Fatalf("Run(%q) = %v, want ok=%v", tt.args, err, tt.ok)
			}
		})
	}
}

func TestCommitTreeRecordsTheChangesShown(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"go.mod": "go 1.21\n"})
	dir := clone(t, g, remote, git.CloneOptions{})
	base, err := g.RevParse(ctx, dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	gittest.WriteFiles(t, dir, map[string]string{"go.mod": "go 1.26\n"})
	c, err := g.Changes(ctx, dir, git.DiffOptions{Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 1 || c.Files[0].Path != "go.mod" || !git.IsObjectID(c.Tree) {
		t.Fatalf("changes = %+v", c)
	}
	// What happens in the work tree after the changes were shown is not
	// committed.
	gittest.WriteFiles(t, dir, map[string]string{"go.mod": "go 9.99\n", "later.txt": "x\n"})
	id, err := g.CommitTree(ctx, dir, git.TreeCommit{Tree: c.Tree, Parent: base, Message: "Bump go", Author: git.Identity{Name: "Bot", Email: "bot@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := gittest.Run(t, dir, "show", id+":go.mod"); got != "go 1.26" {
		t.Errorf("committed go.mod = %q, want the version shown", got)
	}
	if got := gittest.Run(t, dir, "ls-tree", "--name-only", id); got != "go.mod" {
		t.Errorf("committed files = %q", got)
	}
	if got := gittest.Run(t, dir, "log", "-1", "--format=%P|%an <%ae>|%cn|%s", id); got != base+"|Bot <bot@example.com>|Bot|Bump go" {
		t.Errorf("commit = %q", got)
	}
	if head, _ := g.RevParse(ctx, dir, "HEAD"); head != base {
		t.Errorf("HEAD moved to %s", head)
	}
	if _, err := g.CommitTree(ctx, dir, git.TreeCommit{Tree: "HEAD", Parent: base}); err == nil {
		t.Error("CommitTree took a revision that is not an object id")
	}
}

func TestScratchObjectsAreGits(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	s, err := g.NewScratch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	files := map[string][]byte{"pr.json": []byte("{\"title\": \"x\"}\n"), "README.md": []byte("# status\n"), "b": {0, 1, 2}}
	tree, err := s.WriteTree(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	// The same files written by git itself give the same tree id.
	var listing strings.Builder
	for _, name := range []string{"README.md", "b", "pr.json"} {
		blob, err := s.RunInput(ctx, bytes.NewReader(files[name]), "hash-object", "--stdin")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&listing, "100644 blob %s\t%s\n", strings.TrimSpace(blob), name)
	}
	want, err := s.RunInput(ctx, strings.NewReader(listing.String()), "mktree", "--missing")
	if err != nil {
		t.Fatal(err)
	}
	if tree != strings.TrimSpace(want) {
		t.Errorf("tree %s, git makes %s", tree, strings.TrimSpace(want))
	}
	first, err := s.CommitTree(ctx, tree, "first\n", git.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.CommitTree(ctx, tree, "second\n", git.Identity{Name: "Bot", Email: "bot@example.com"}, first)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Run(ctx, "fsck", "--strict", "--no-dangling", second); err != nil {
		t.Fatalf("git fsck: %v\n%s", err, out)
	}
	if got, _ := s.ReadFile(ctx, second, "pr.json"); string(got) != string(files["pr.json"]) {
		t.Errorf("pr.json = %q", got)
	}
	if got, _ := s.Run(ctx, "log", "--format=%an <%ae> %s", second); got != "Bot <bot@example.com> second\nfleetlift <fleetlift@localhost> first\n" {
		t.Errorf("log = %q", got)
	}
	if _, err := s.CommitTree(ctx, tree, "x", git.Identity{Name: "a>b"}); err == nil {
		t.Error("an identity with '>' was accepted")
	}
}

func TestHeadReadsWhatGitSays(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"a.txt": "a\n"})
	for name, setup := range map[string]func(dir string){
		"fresh clone":  func(string) {},
		"detached":     func(dir string) { gittest.Run(t, dir, "checkout", "--quiet", "--detach") },
		"other branch": func(dir string) { gittest.Run(t, dir, "checkout", "--quiet", "-b", "dev") },
		"gitfile":      func(dir string) { moveGitDir(t, dir) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := clone(t, g, remote, git.CloneOptions{})
			setup(dir)
			id, branch, err := g.Head(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			wantID := gittest.Run(t, dir, "rev-parse", "HEAD")
			wantBranch, _ := g.CurrentBranch(ctx, dir)
			if id != wantID || branch != wantBranch {
				t.Errorf("Head = %s %q, git says %s %q", id, branch, wantID, wantBranch)
			}
		})
	}
}

// moveGitDir turns dir/.git into a .git file pointing elsewhere.
func moveGitDir(t *testing.T, dir string) {
	t.Helper()
	elsewhere := filepath.Join(t.TempDir(), "gitdir")
	if err := os.Rename(filepath.Join(dir, ".git"), elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+elsewhere+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// With ScratchDir, a scratch repository is made there, the directory
// made when missing, and works as one made in the system's temporary
// directory: whoever removes the directory removes what a killed
// process never closed.
func TestScratchIsMadeInScratchDir(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	g.ScratchDir = filepath.Join(t.TempDir(), "workspace", ".fleetlift", "git")
	s, err := g.NewScratch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(s.Dir()) != g.ScratchDir {
		t.Fatalf("scratch at %s, want in %s", s.Dir(), g.ScratchDir)
	}
	if _, err := s.WriteTree(ctx, map[string][]byte{"a": []byte("a\n")}); err != nil {
		t.Fatalf("a scratch in ScratchDir does not work: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("closed scratch still there: %v", err)
	}
}

// fleetRemote is a bare repository <root>/api.git with what a clone must
// get right: nested directories, an executable, a link, a submodule's
// place, packed history, a second branch and tags.
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
	gittest.Run(t, root, "--git-dir="+remote, "repack", "-adq")
	return remote
}

// A clone over HTTP, with the token, is the clone of the same repository
// by its path: the same files, modes and link, index, HEAD and branch,
// remote configuration, shallow commits and tags; git finds it clean and
// sound.
func TestCloneOverHTTPIsTheCloneOfThePath(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	remote := fleetRemote(t, root)
	srv := serveGit(t, root, token)
	g := newGit(git.DefaultTokenEnv + "=" + token)
	g.TokenOrigins = []string{srv.URL}
	for _, o := range []git.CloneOptions{{Depth: 1}, {Depth: 2}, {Branch: "release", Depth: 1}, {}} {
		t.Run(fmt.Sprintf("%sdepth%d", o.Branch, o.Depth), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "clone")
			if err := g.Clone(ctx, srv.URL+"/api.git", dir, o); err != nil {
				t.Fatal(err)
			}
			ref := filepath.Join(t.TempDir(), "ref")
			if err := newGit().Clone(ctx, remote, ref, o); err != nil {
				t.Fatal(err)
			}
			sameClone(t, dir, ref)
		})
	}
	// A copy one commit deep, as the gateway serves: a clone of all of
	// it is shallow where the copy is.
	t.Run("shallowserver", func(t *testing.T) {
		gittest.Run(t, root, "clone", "--quiet", "--bare", "--depth", "1", "file://"+remote, filepath.Join(root, "copy.git"))
		dir := filepath.Join(t.TempDir(), "clone")
		if err := g.Clone(ctx, srv.URL+"/copy.git", dir, git.CloneOptions{}); err != nil {
			t.Fatal(err)
		}
		ref := filepath.Join(t.TempDir(), "ref")
		if err := newGit().Clone(ctx, filepath.Join(root, "copy.git"), ref, git.CloneOptions{}); err != nil {
			t.Fatal(err)
		}
		sameClone(t, dir, ref)
		if b, _ := os.ReadFile(filepath.Join(dir, ".git", "shallow")); len(b) == 0 {
			t.Error("the clone of a shallow copy is not shallow")
		}
	})
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
	} {
		got, want := gittest.Run(t, dir, args...), gittest.Run(t, ref, args...)
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

// A tree with a path git refuses (.GIT) fails the clone, with nothing of
// it checked out; a tree with a link and a directory of one name writes
// nothing through the link.
func TestCloneRefusesHostileTrees(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	srv := serveGit(t, root, token)
	g := newGit(git.DefaultTokenEnv + "=" + token)
	g.TokenOrigins = []string{srv.URL}

	evil := gittest.NewRemote(t, root, "evil", map[string]string{"ok.txt": "ok\n"})
	blob := gittest.Run(t, root, "--git-dir="+evil, "rev-parse", "main:ok.txt")
	inner := mktree(t, evil, "100644 blob "+blob+"\tconfig")
	top := mktree(t, evil, "040000 tree "+inner+"\t.GIT", "100644 blob "+blob+"\tok.txt")
	commit := gittest.Run(t, root, "--git-dir="+evil, "commit-tree", "-m", "evil", top)
	gittest.Run(t, root, "--git-dir="+evil, "update-ref", "refs/heads/main", commit)
	dir := filepath.Join(t.TempDir(), "evil")
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

	outside := t.TempDir()
	links := gittest.NewRemote(t, root, "links", map[string]string{"ok.txt": "ok\n"})
	linkBlob := hashObject(t, links, outside)
	sub := mktree(t, links, "100644 blob "+blob+"\tx")
	top = mktree(t, links, "120000 blob "+linkBlob+"\ta", "040000 tree "+sub+"\ta")
	commit = gittest.Run(t, root, "--git-dir="+links, "commit-tree", "-m", "links", top)
	gittest.Run(t, root, "--git-dir="+links, "update-ref", "refs/heads/main", commit)
	_ = g.Clone(ctx, srv.URL+"/links.git", filepath.Join(t.TempDir(), "links"), git.CloneOptions{Depth: 1})
	if _, err := os.Lstat(filepath.Join(outside, "x")); err == nil {
		t.Error("a file was written through a link")
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
