package spec_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/spec"
)

var update = flag.Bool("update", false, "rewrite golden files")

// invalidRoot holds one directory per bad input; each is loaded as a root
// and its errors compared with its want.txt.
const invalidRoot = "../../testdata/invalid"

// invalidSetup builds the parts of a case that do not belong in Git.
var invalidSetup = map[string]func(t *testing.T, dir string){
	"file-50mb": func(t *testing.T, dir string) {
		f, err := os.Create(filepath.Join(dir, "huge.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		line := []byte("# padding padding padding padding padding padding padding padding\n")
		for n := 0; n < 50<<20; n += len(line) {
			if _, err := f.Write(line); err != nil {
				t.Fatal(err)
			}
		}
	},
	"symlink-escape": func(t *testing.T, dir string) {
		outside := filepath.Join(filepath.Dir(dir), "outside.yaml")
		if err := os.WriteFile(outside, []byte("version: 1\nid: outside\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../outside.yaml", filepath.Join(dir, "escape.yaml")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc/passwd", filepath.Join(dir, "absolute.yaml")); err != nil {
			t.Fatal(err)
		}
	},
}

func TestInvalidInputs(t *testing.T) {
	cases, err := os.ReadDir(invalidRoot)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 30 {
		t.Fatalf("want at least 30 invalid cases, have %d", len(cases))
	}
	pool := newPool(t)
	loader := &spec.Loader{Eval: pool, Limits: spec.Limits{EvalTimeout: 5 * time.Second}}
	// What stops a memory bomb must be the memory limit, however busy the
	// machine: it gets more time than the cases that test the time limit.
	slow := &spec.Loader{Eval: pool, Limits: spec.Limits{EvalTimeout: 2 * time.Minute}}
	stoppedByMemory := map[string]bool{"cue-exponential-string": true}
	for _, c := range cases {
		if !c.IsDir() {
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			src := filepath.Join(invalidRoot, c.Name())
			dir := filepath.Join(t.TempDir(), c.Name())
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			if setup := invalidSetup[c.Name()]; setup != nil {
				setup(t, dir)
			}
			l := loader
			if stoppedByMemory[c.Name()] {
				l = slow
			}
			res, err := l.Load(context.Background(), os.DirFS(dir), ".")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Errors) == 0 {
				t.Fatalf("no error for an invalid input; loaded %d definitions", len(res.Definitions))
			}
			checkGoldenErrors(t, res.Errors, filepath.Join(src, "want.txt"))
		})
	}
}

// checkGoldenErrors compares errs, one per line, with the golden file
// (rewritten with -update): every error must name its file and line.
func checkGoldenErrors(t *testing.T, errs spec.Errors, golden string) {
	t.Helper()
	var got bytes.Buffer
	for _, e := range errs {
		if e.File == "" || e.Line == 0 {
			t.Errorf("error does not name its file and line: %q", e)
		}
		got.WriteString(e.Error() + "\n")
	}
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("errors differ from %s\n--- got\n%s--- want\n%s", golden, got.String(), want)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		if !strings.Contains(line, ":") {
			t.Errorf("golden line without a position: %q", line)
		}
	}
}
