package git

import (
	"context"
	"crypto/sha1"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// stagedClone clones a remote holding files, lets change alter the clone
// and stages the whole work tree, as Changes does.
func stagedClone(t *testing.T, files map[string]string, change func(dir string)) string {
	t.Helper()
	remote := gittest.NewRemote(t, "", "svc", files)
	dir := filepath.Join(t.TempDir(), "clone")
	g := &Git{Env: gittest.Env()}
	if err := g.Clone(context.Background(), remote, dir, CloneOptions{}); err != nil {
		t.Fatal(err)
	}
	change(dir)
	if err := g.Stage(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkIndexTree checks that indexTree reads the clone's index and makes
// the tree git write-tree makes, with objects git accepts.
func checkIndexTree(t *testing.T, dir string) {
	t.Helper()
	gd, _, ok := plainGitDir(dir)
	if !ok {
		t.Fatal("a fresh clone is not a plain clone")
	}
	got, ok, err := indexTree(gd)
	if err != nil || !ok {
		t.Fatalf("indexTree = %q, %v, %v; want the tree", got, ok, err)
	}
	if want := gittest.Run(t, dir, "write-tree"); got != want {
		t.Fatalf("indexTree = %s, git write-tree = %s\n%s", got, want, gittest.Run(t, dir, "ls-files", "-s"))
	}
	gittest.Run(t, dir, "fsck", "--strict", "--no-dangling", "--connectivity-only")
	gittest.Run(t, dir, "fsck", "--strict", "--no-dangling")
}

func TestIndexTreeIsGitsWriteTree(t *testing.T) {
	base := map[string]string{
		"README.md": "hi\n", "a": "a\n", "a.b": "x\n", "a-b/c": "y\n", "b/c/d/e.txt": "deep\n",
		"b/c/f": "f\n", "b0": "zero\n", "z/z": "z\n",
	}
	write := func(files map[string]string) func(string) {
		return func(dir string) { gittest.WriteFiles(t, dir, files) }
	}
	tests := map[string]func(dir string){
		"nothing changed": func(string) {},
		"a file changed":  write(map[string]string{"b/c/d/e.txt": "changed\n"}),
		"files added where a directory sorts against a file": write(map[string]string{
			"a.c/x": "1\n", "a0": "2\n", "b/c.d": "3\n", "b/c/d.e": "4\n", "new/dir/x": "5\n",
		}),
		"files removed, a directory emptied": func(dir string) {
			os.Remove(filepath.Join(dir, "a.b"))
			os.RemoveAll(filepath.Join(dir, "z"))
		},
		"an executable and a symbolic link": func(dir string) {
			os.Chmod(filepath.Join(dir, "a"), 0o755)
			gittest.WriteFiles(t, dir, map[string]string{"b/link": gittest.LinkPrefix + "../a"})
		},
		"a file becomes a directory": func(dir string) {
			os.Remove(filepath.Join(dir, "b0"))
			gittest.WriteFiles(t, dir, map[string]string{"b0/inside": "x\n"})
		},
		"a submodule entry": func(dir string) {
			head := gittest.Run(t, dir, "rev-parse", "HEAD")
			gittest.Run(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+head+",vendor/sub")
		},
		"a tree cache invalidated": func(dir string) {
			gittest.Run(t, dir, "read-tree", "--empty")
			gittest.Run(t, dir, "add", "-A")
		},
		"index version 4": func(dir string) {
			gittest.Run(t, dir, "update-index", "--index-version", "4")
			gittest.WriteFiles(t, dir, map[string]string{"b/c/d/g": "g\n"})
		},
		"index version 3 (skip-worktree)": func(dir string) {
			gittest.Run(t, dir, "update-index", "--skip-worktree", "b/c/f")
			gittest.WriteFiles(t, dir, map[string]string{"a": "changed\n"})
		},
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			checkIndexTree(t, stagedClone(t, base, change))
		})
	}
}

func TestIndexTreeOfRandomChanges(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "a.b", "a-b", "a0", "b", "B", "c.d", "_", "z~"}
	path := func() string {
		var parts []string
		for range 1 + r.IntN(4) {
			parts = append(parts, names[r.IntN(len(names))])
		}
		return strings.Join(parts, "/")
	}
	for i := range 12 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			files := map[string]string{}
			for range 5 + r.IntN(20) {
				files[path()] = fmt.Sprintf("%d\n", r.IntN(1000))
			}
			dropConflicts(files)
			changes := map[string]string{}
			for range 1 + r.IntN(10) {
				changes[path()] = fmt.Sprintf("%d\n", r.IntN(1000))
			}
			dir := stagedClone(t, files, func(dir string) {
				for p := range changes {
					// A path whose parent is a file, or that is a
					// directory, cannot be written: skip it.
					if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
						continue
					}
					os.WriteFile(filepath.Join(dir, p), []byte(changes[p]), 0o644)
				}
				for p := range files {
					if r.IntN(4) == 0 {
						os.Remove(filepath.Join(dir, p))
					}
				}
			})
			checkIndexTree(t, dir)
		})
	}
}

// dropConflicts removes paths that are also another path's directory.
func dropConflicts(files map[string]string) {
	for p := range files {
		for q := range files {
			if strings.HasPrefix(q, p+"/") {
				delete(files, p)
				break
			}
		}
	}
}

func TestIndexTreeLeavesOddIndexesToGit(t *testing.T) {
	tests := map[string]func(t *testing.T, dir string){
		"an entry only intended to be added": func(t *testing.T, dir string) {
			gittest.WriteFiles(t, dir, map[string]string{"later.txt": "x\n"})
			gittest.Run(t, dir, "add", "--intent-to-add", "later.txt")
		},
		"a split index": func(t *testing.T, dir string) {
			gittest.Run(t, dir, "update-index", "--split-index")
		},
		"an unmerged path": func(t *testing.T, dir string) {
			blob := gittest.Run(t, dir, "rev-parse", "HEAD:a.txt")
			cmdInput(t, dir, "100644 "+blob+" 1\ta.txt\n100644 "+blob+" 2\ta.txt\n", "update-index", "--index-info")
		},
		"no tree cache": func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, ".git", "index"))
			gittest.Run(t, dir, "update-index", "--add", "a.txt")
		},
		"a corrupt checksum": func(t *testing.T, dir string) {
			p := filepath.Join(dir, ".git", "index")
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 1
			os.WriteFile(p, b, 0o644)
		},
	}
	for name, odd := range tests {
		t.Run(name, func(t *testing.T) {
			dir := stagedClone(t, map[string]string{"a.txt": "a\n"}, func(string) {})
			odd(t, dir)
			gd, _, _ := plainGitDir(dir)
			if id, ok, err := indexTree(gd); ok || err != nil {
				t.Fatalf("indexTree = %q, %v, %v; want it left to git", id, ok, err)
			}
		})
	}
}

// cmdInput runs git in dir with input on its standard input.
func cmdInput(t *testing.T, dir, input string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, gittest.Env(), strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func FuzzParseIndex(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "repo")
	gittest.Run(f, f.TempDir(), "init", "--quiet", dir)
	gittest.WriteFiles(f, dir, map[string]string{"a": "1", "b/c": "2", "b/d/e": "3"})
	gittest.Run(f, dir, "add", "-A")
	gittest.Run(f, dir, "write-tree")
	seed, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		// Whatever an agent leaves in the index, reading it never panics.
		// (With a checksum that matches, or nothing past it is read.)
		if len(data) > sha1.Size {
			sum := sha1.Sum(data[:len(data)-sha1.Size])
			data = append(data[:len(data)-sha1.Size:len(data)-sha1.Size], sum[:]...)
		}
		parseIndex(data)
		// An index the in-process stage reads, it writes back as it was,
		// and its tree cache stays one git reads with every tree invalid.
		ix, ok := parseIndexV2(data)
		if !ok {
			return
		}
		again, ok := parseIndexV2(ix.encode())
		if !ok || len(again.entries) != len(ix.entries) || string(again.tree) != string(ix.tree) {
			t.Fatalf("an index read is not written back as it was")
		}
		tree, ok := invalidateTreeCache(ix.tree, map[string]bool{"": true})
		if !ok {
			t.Fatal("a tree cache read cannot be invalidated")
		}
		if _, ok := parseTreeCache(tree); !ok {
			t.Fatal("an invalidated tree cache does not read")
		}
	})
}
