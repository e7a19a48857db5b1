package git_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// stageClone is an in-process clone of a repository with nested
// directories, an executable and a link, served over HTTP, and the
// server's origin.
func stageClone(t *testing.T) (dir, origin string) {
	t.Helper()
	root := t.TempDir()
	remote := gittest.NewRemote(t, root, "svc", map[string]string{
		"go.mod":        "module svc\n\ngo 1.21\n",
		"a/b/c.txt":     "c\n",
		"a/d.txt":       "d\n",
		"a.txt":         "sorts before a/\n",
		"link":          gittest.LinkPrefix + "a/d.txt",
		"tools/run.sh":  "#!/bin/sh\necho run\n",
		"docs/notes.md": "notes\n",
	})
	gittest.Run(t, remote, "config", "http.receivepack", "true")
	srv, _ := countingGit(t, root, false)
	dir = filepath.Join(t.TempDir(), "clone")
	if err := tokenGit(srv.URL).Clone(context.Background(), srv.URL+"/svc.git", dir, git.CloneOptions{Depth: 1}); err != nil {
		t.Fatal(err)
	}
	return dir, srv.URL
}

// twin copies a work tree, .git and all, times kept.
func twin(t *testing.T, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "twin")
	if out, err := exec.Command("cp", "-a", dir, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return to
}

// A clone's changes to the files it tracks are staged without git, as
// git add --all stages them: the same index entries, the same tree, and
// an index whose stat data git takes as matching the work tree.
func TestStageInProcessIsGitAdd(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(t *testing.T, dir string){
		"nothing changed": func(t *testing.T, dir string) {},
		"a file changed": func(t *testing.T, dir string) {
			gittest.WriteFiles(t, dir, map[string]string{"go.mod": "module svc\n\ngo 1.26\n"})
		},
		"files gone, a directory with them": func(t *testing.T, dir string) {
			mustRemove(t, filepath.Join(dir, "docs", "notes.md"))
			mustRemove(t, filepath.Join(dir, "a", "b", "c.txt"))
		},
		"made executable": func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "a.txt"), 0o755); err != nil {
				t.Fatal(err)
			}
		},
		"a link retargeted and a file made a link": func(t *testing.T, dir string) {
			mustRemove(t, filepath.Join(dir, "link"))
			mustRemove(t, filepath.Join(dir, "a", "d.txt"))
			gittest.WriteFiles(t, dir, map[string]string{"link": gittest.LinkPrefix + "go.mod", "a/d.txt": gittest.LinkPrefix + "../go.mod"})
		},
		"changed in place, same size and time": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "a", "d.txt")
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("e\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			dir, origin := stageClone(t)
			change(t, dir)
			ref := twin(t, dir)
			// No git process can start: the staging and the tree are made
			// here.
			tree, err := noGit(t, origin).Snapshot(ctx, dir)
			if err != nil {
				t.Fatalf("in-process stage: %v", err)
			}
			gittest.Run(t, ref, "add", "--all", "--", ".")
			if want := gittest.Run(t, ref, "write-tree"); tree != want {
				t.Errorf("tree %s, git add and write-tree give %s", tree, want)
			}
			if got, want := gittest.Run(t, dir, "ls-files", "--stage"), gittest.Run(t, ref, "ls-files", "--stage"); got != want {
				t.Errorf("index:\n%s\ngit add's:\n%s", got, want)
			}
			if got, want := gittest.Run(t, dir, "status", "--porcelain"), gittest.Run(t, ref, "status", "--porcelain"); got != want {
				t.Errorf("status:\n%s\nafter git add:\n%s", got, want)
			}
			// The stat data recorded are the files': git needs to look at
			// no file's content to find the work tree as staged.
			if out := gittest.Run(t, dir, "diff-files", "--name-only"); out != "" {
				t.Errorf("git sees unstaged changes after the stage: %q", out)
			}
			gittest.Run(t, dir, "fsck", "--no-progress")
		})
	}
}

// What git add decides itself is left to it: an untracked path (its
// ignore rules say whether it is added), attributes, a configuration
// beyond a clone's. Without git those stages fail; with it they are git
// add's.
func TestStageLeavesTheRestToGit(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(t *testing.T, dir string){
		"an untracked file": func(t *testing.T, dir string) {
			gittest.WriteFiles(t, dir, map[string]string{"new/file.txt": "new\n", ".gitignore": "*.log\n", "x.log": "ignored\n"})
		},
		"attributes": func(t *testing.T, dir string) {
			gittest.WriteFiles(t, dir, map[string]string{".gitattributes": "*.txt text eol=crlf\n", "a.txt": "changed\n"})
		},
		"configuration": func(t *testing.T, dir string) {
			gittest.Run(t, dir, "config", "core.autocrlf", "input")
			gittest.WriteFiles(t, dir, map[string]string{"a.txt": "changed\r\n"})
		},
		"an embedded repository": func(t *testing.T, dir string) {
			gittest.Run(t, dir, "init", "--quiet", "a/b/inner")
			gittest.Run(t, filepath.Join(dir, "a", "b", "inner"), "commit", "--quiet", "--allow-empty", "-m", "inner")
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			dir, origin := stageClone(t)
			change(t, dir)
			ref := twin(t, dir)
			if _, err := noGit(t, origin).Snapshot(ctx, dir); err == nil {
				t.Fatal("staged without git")
			}
			tree, err := tokenGit(origin).Snapshot(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			gittest.Run(t, ref, "add", "--all", "--", ".")
			if want := gittest.Run(t, ref, "write-tree"); tree != want {
				t.Errorf("tree %s, git add and write-tree give %s", tree, want)
			}
		})
	}
}

func mustRemove(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}
