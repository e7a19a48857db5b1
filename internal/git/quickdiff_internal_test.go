package git

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// quickRepoUnderTest is a shallow clone of a bare repository with files,
// made by git, whose pack this process holds as an in-process clone's.
type quickRepoUnderTest struct {
	t    *testing.T
	dir  string
	base string
}

// gitOut is git's standard output as it is (gittest.Run trims it and
// adds standard error), for comparing diffs byte for byte.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gittest.Env()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

func newQuickRepo(t *testing.T, files map[string]string, executable ...string) *quickRepoUnderTest {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(root, "src")
	gitOut(t, root, "init", "-q", "-b", "main", src)
	gittest.WriteFiles(t, src, files)
	gitOut(t, src, "add", "-A")
	for _, x := range executable {
		gitOut(t, src, "update-index", "--chmod=+x", x)
	}
	gitOut(t, src, "commit", "-qm", "init")
	bare := filepath.Join(root, "bare.git")
	gitOut(t, root, "clone", "-q", "--bare", src, bare)
	dir := filepath.Join(root, "clone")
	gitOut(t, root, "clone", "-q", "--depth", "1", "file://"+bare, dir)
	packs, err := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.pack"))
	if err != nil || len(packs) != 1 {
		t.Fatalf("packs of the clone: %v %v", packs, err)
	}
	data, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	objs, err := readPack(data)
	if err != nil {
		t.Fatal(err)
	}
	rememberClone(filepath.Base(packs[0]), objs)
	return &quickRepoUnderTest{t: t, dir: dir, base: strings.TrimSpace(gitOut(t, dir, "rev-parse", "HEAD"))}
}

// diff stages the work tree and returns quickDiff's answer and git's for
// the base commit and the staged tree.
func (r *quickRepoUnderTest) diff() (quick []byte, ok bool, gits []byte) {
	r.t.Helper()
	ctx := context.Background()
	w, err := (&Git{Env: os.Environ()}).worktree(ctx, r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := w.stage(ctx); err != nil {
		r.t.Fatal(err)
	}
	tree, err := w.writeTree(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	quick, ok = quickDiff(r.dir, r.base, tree)
	gits = []byte(gitOut(r.t, r.dir, "diff", "--no-ext-diff", "--no-textconv", "--no-color", "--find-renames",
		"--ignore-submodules=none", "--raw", "--patch", "-z", r.base, tree, "--"))
	return quick, ok, gits
}

func (r *quickRepoUnderTest) reset() {
	r.t.Helper()
	gitOut(r.t, r.dir, "reset", "-q", "--hard", r.base)
	gitOut(r.t, r.dir, "clean", "-qfdx")
}

// Files of an in-process clone, each changed in one place, are diffed in
// this process exactly as git diffs them, byte for byte; everything else
// is left to git.
func TestQuickDiffIsGitsOrDeclines(t *testing.T) {
	goFile := "package main\n\nimport \"fmt\"\n\n// Version is the version.\nconst Version = \"1.0\"\n\nfunc main() {\n\tfmt.Println(Version)\n\tfmt.Println(\"a\")\n\tfmt.Println(\"b\")\n\tfmt.Println(\"c\")\n}\n"
	longFunc := "func aFunctionWhoseSignatureIsLongerThanEightyCharacters(first, second, third string) error {\n\tx := 1\n\ty := 2\n\tz := 3\n\treturn nil\n}\n"
	r := newQuickRepo(t, map[string]string{
		"go.mod":              "module example.com/svc\n\ngo 1.21\n",
		"main.go":             goFile,
		"long.go":             longFunc,
		"deep/a/b/conf.txt":   "one\ntwo\nthree\nfour\nfive\nsix\nseven\n",
		"noeol.txt":           "first\nlast without newline",
		"empty.txt":           "",
		"run.sh":              "#!/bin/sh\necho run\n",
		"dup.txt":             "x\ny\ny\nz\n",
		"twice.txt":           "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n",
		"bin.dat":             "a\nb\n",
		"with space.txt":      "a\n",
		"attr/x.txt":          "a\n",
		"trail.txt":           "Section one \t\n  a\n  b\n  c\n  d\n  e\n",
		"attr/.gitattributes": "*.txt diff=other\n",
	}, "run.sh")
	cases := []struct {
		name    string
		change  func(dir string)
		quick   bool
		changes int
	}{
		{"nothing", func(string) {}, true, 0},
		{"go.mod bump", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"go.mod": "module example.com/svc\n\ngo 1.22\n"})
		}, true, 1},
		{"function line in the header", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"main.go": strings.Replace(goFile, "\"b\"", "\"B\"", 1)})
		}, true, 1},
		{"function line cut at 80 bytes", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"long.go": strings.Replace(longFunc, "z := 3", "z := 4", 1)})
		}, true, 1},
		{"function line with trailing blanks", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"trail.txt": "Section one \t\n  a\n  b\n  c\n  d\n  E\n"})
		}, true, 1},
		{"first line", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"main.go": "package app" + goFile[len("package main"):]})
		}, true, 1},
		{"lines inserted", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"deep/a/b/conf.txt": "one\ntwo\nthree\n3.1\n3.2\nfour\nfive\nsix\nseven\n"})
		}, true, 1},
		{"lines deleted", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"deep/a/b/conf.txt": "one\ntwo\nfive\nsix\nseven\n"})
		}, true, 1},
		{"last line without a newline", func(d string) { gittest.WriteFiles(t, d, map[string]string{"noeol.txt": "first\nLAST"}) }, true, 1},
		{"newline added at the end", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"noeol.txt": "first\nlast without newline\n"})
		}, true, 1},
		{"empty file filled", func(d string) { gittest.WriteFiles(t, d, map[string]string{"empty.txt": "now\nsomething\n"}) }, true, 1},
		{"executable", func(d string) {
			os.WriteFile(filepath.Join(d, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755)
		}, true, 1},
		{"several files", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"go.mod": "module example.com/svc\n\ngo 1.22\n", "deep/a/b/conf.txt": "one\ntwo\nthree\nfour\nfive\nsix\nSEVEN\n", "noeol.txt": "First\nlast without newline"})
		}, true, 3},
		{"two places in one file", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"twice.txt": "A\nb\nc\nd\ne\nf\ng\nh\ni\nj\nK\n"})
		}, false, 1},
		{"a line that could slide", func(d string) { gittest.WriteFiles(t, d, map[string]string{"dup.txt": "x\ny\nz\n"}) }, false, 1},
		{"added", func(d string) { gittest.WriteFiles(t, d, map[string]string{"new.txt": "new\n"}) }, false, 1},
		{"deleted", func(d string) { os.Remove(filepath.Join(d, "go.mod")) }, false, 1},
		{"renamed", func(d string) { os.Rename(filepath.Join(d, "main.go"), filepath.Join(d, "app.go")) }, false, 1},
		{"mode", func(d string) { os.Chmod(filepath.Join(d, "go.mod"), 0o755) }, false, 1},
		{"binary", func(d string) { gittest.WriteFiles(t, d, map[string]string{"bin.dat": "a\x00\nb\n"}) }, false, 1},
		{"a name with a space", func(d string) { gittest.WriteFiles(t, d, map[string]string{"with space.txt": "b\n"}) }, false, 1},
		{"attributes in the work tree", func(d string) { gittest.WriteFiles(t, d, map[string]string{"attr/x.txt": "b\n"}) }, false, 1},
		{"attributes in the git directory", func(d string) {
			gittest.WriteFiles(t, d, map[string]string{"go.mod": "module example.com/svc\n\ngo 1.22\n"})
			os.WriteFile(filepath.Join(d, ".git", "info", "attributes"), []byte("go.mod diff=other\n"), 0o644)
		}, false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r.reset()
			defer os.Remove(filepath.Join(r.dir, ".git", "info", "attributes"))
			c.change(r.dir)
			quick, ok, gits := r.diff()
			if ok != c.quick {
				t.Fatalf("diffed in process: %v, want %v", ok, c.quick)
			}
			if got := bytes.Count(gits, []byte("\x00:")) + bytes.Count(gits[:min(1, len(gits))], []byte(":")); got != c.changes {
				t.Fatalf("git lists %d changes, want %d:\n%q", got, c.changes, gits)
			}
			if ok && !bytes.Equal(quick, gits) {
				t.Fatalf("in process:\n%q\ngit:\n%q", quick, gits)
			}
		})
	}
}

// A clone whose pack this process does not hold (git cloned it) is
// diffed by git.
func TestQuickDiffNeedsTheClonesObjects(t *testing.T) {
	r := newQuickRepo(t, map[string]string{"go.mod": "module m\n\ngo 1.21\n"})
	gittest.WriteFiles(t, r.dir, map[string]string{"go.mod": "module m\n\ngo 1.22\n"})
	if _, ok, _ := r.diff(); !ok {
		t.Fatal("not diffed in process with the clone's objects held")
	}
	cloned.Lock()
	held := cloned.packs
	cloned.packs = nil
	cloned.Unlock()
	defer func() { cloned.Lock(); cloned.packs = held; cloned.Unlock() }()
	if _, ok, _ := r.diff(); ok {
		t.Fatal("diffed in process without the clone's objects")
	}
}

// Random edits of files whose lines repeat: what is diffed in process is
// exactly git's diff, and a fair share of the edits are.
func TestQuickDiffRandomEditsAreGits(t *testing.T) {
	words := []string{"a\n", "b\n", "}\n", "\n", "\tx := 1\n", "func f() {\n", "// note\n", "c"}
	rng := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		var b strings.Builder
		for i := range n {
			w := words[rng.IntN(len(words))]
			if w == "c" && i < n-1 {
				w = "c\n"
			}
			b.WriteString(w)
		}
		return b.String()
	}
	lines := func(s string) []string { return strings.SplitAfter(s, "\n") }
	files := map[string]string{}
	for i := range 4 {
		files[fmt.Sprintf("f%d.txt", i)] = text(5 + rng.IntN(25))
	}
	r := newQuickRepo(t, files)
	quick := 0
	const rounds = 150
	for round := range rounds {
		r.reset()
		edit := map[string]string{}
		for name, content := range files {
			if rng.IntN(3) != 0 {
				continue
			}
			ls := lines(content)
			from := rng.IntN(len(ls) + 1)
			to := min(len(ls), from+rng.IntN(4))
			edit[name] = strings.Join(ls[:from], "") + text(rng.IntN(4)) + strings.Join(ls[to:], "")
		}
		gittest.WriteFiles(t, r.dir, edit)
		q, ok, gits := r.diff()
		if !ok {
			continue
		}
		quick++
		if !bytes.Equal(q, gits) {
			t.Fatalf("round %d, edits %q:\nin process:\n%q\ngit:\n%q", round, edit, q, gits)
		}
	}
	if quick < rounds/5 {
		t.Errorf("%d of %d edits diffed in process, want at least a fifth", quick, rounds)
	}
	t.Logf("%d of %d edits diffed in process", quick, rounds)
}
