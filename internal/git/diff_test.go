package git_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

func TestDiff(t *testing.T) {
	ctx := context.Background()
	g := newGit()
	long := strings.Repeat("line\n", 1500)
	remote := gittest.NewRemote(t, "", "api", map[string]string{
		"keep.txt":   "same\n",
		"edit.txt":   "one\ntwo\n",
		"remove.txt": "bye\n",
		"move.txt":   "a fairly long line so that rename detection has something to match\n",
		"image.bin":  "\x00\x01\x02",
		"edges.txt":  "-- a line that starts like a header\n++ another\nno newline at the end",
	})

	tests := []struct {
		name   string
		change func(dir string)
		want   []git.FileDiff // Patch is checked with contains/excludes below
		// contains maps a path to text its patch must contain.
		contains map[string]string
		// excludes is text no patch may contain.
		excludes string
	}{
		{name: "no change", change: func(string) {}},
		{
			name:     "modified",
			change:   func(dir string) { gittest.WriteFiles(t, dir, map[string]string{"edit.txt": "one\nTWO\n"}) },
			want:     []git.FileDiff{{Path: "edit.txt", Status: "modified", Additions: 1, Deletions: 1}},
			contains: map[string]string{"edit.txt": "+TWO"},
		},
		{
			name:   "added",
			change: func(dir string) { gittest.WriteFiles(t, dir, map[string]string{"new/file.go": "package x\n"}) },
			want:   []git.FileDiff{{Path: "new/file.go", Status: "added", Additions: 1}},
		},
		{
			name:   "removed",
			change: func(dir string) { os.Remove(filepath.Join(dir, "remove.txt")) },
			want:   []git.FileDiff{{Path: "remove.txt", Status: "deleted", Deletions: 1}},
		},
		{
			name:   "renamed",
			change: func(dir string) { os.Rename(filepath.Join(dir, "move.txt"), filepath.Join(dir, "moved.txt")) },
			want:   []git.FileDiff{{Path: "moved.txt", OldPath: "move.txt", Status: "renamed"}},
		},
		{
			name:   "binary",
			change: func(dir string) { gittest.WriteFiles(t, dir, map[string]string{"image.bin": "\x00\x09\x08"}) },
			want:   []git.FileDiff{{Path: "image.bin", Status: "modified", Binary: true}},
		},
		{
			name: "lines like headers, no final newline",
			change: func(dir string) {
				gittest.WriteFiles(t, dir, map[string]string{"edges.txt": "+++ b/edges.txt\n--- a/x\n@@ -1 +1 @@\nno newline at the end\n"})
			},
			want: []git.FileDiff{{Path: "edges.txt", Status: "modified", Additions: 4, Deletions: 3}},
		},
		{
			name:     "truncated at the line limit",
			change:   func(dir string) { gittest.WriteFiles(t, dir, map[string]string{"big.txt": long}) },
			want:     []git.FileDiff{{Path: "big.txt", Status: "added", Additions: 1500, Truncated: true}},
			contains: map[string]string{"big.txt": "+line"},
		},
		{
			name: "symlinks to /etc are links, never read",
			change: func(dir string) {
				gittest.WriteFiles(t, dir, map[string]string{
					"etc":      gittest.LinkPrefix + "/etc",
					"passwd":   gittest.LinkPrefix + "/etc/passwd",
					"edit.txt": gittest.LinkPrefix + "/etc/hostname",
				})
			},
			want: []git.FileDiff{
				{Path: "edit.txt", Status: "modified", Additions: 1, Deletions: 2},
				{Path: "etc", Status: "added", Additions: 1},
				{Path: "passwd", Status: "added", Additions: 1},
			},
			contains: map[string]string{"etc": "new file mode 120000", "passwd": "+/etc/passwd"},
			excludes: "root:",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := clone(t, g, remote, git.CloneOptions{})
			tt.change(dir)
			got, err := g.Diff(ctx, dir, git.DiffOptions{MaxLines: 1000})
			if err != nil {
				t.Fatal(err)
			}
			// The counts read from the patch are what git's own
			// --numstat says.
			numstat := gittest.Run(t, dir, "diff", "--cached", "--numstat", "--find-renames", "HEAD")
			for i, line := range strings.Split(strings.TrimSpace(numstat), "\n") {
				if line == "" {
					continue
				}
				if i >= len(got) {
					t.Fatalf("git --numstat lists more files than Diff: %q", numstat)
				}
				want := fmt.Sprintf("%d\t%d\t", got[i].Additions, got[i].Deletions)
				if got[i].Binary {
					want = "-\t-\t"
				}
				if !strings.HasPrefix(line, want) {
					t.Errorf("%s: git --numstat says %q, Diff +%d -%d (binary %v)", got[i].Path, line, got[i].Additions, got[i].Deletions, got[i].Binary)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d files %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				f := got[i]
				if f.Path != w.Path || f.OldPath != w.OldPath || f.Status != w.Status || f.Binary != w.Binary || f.Truncated != w.Truncated {
					t.Errorf("file %d = %+v, want %+v", i, f, w)
				}
				if w.Status != "renamed" && (f.Additions != w.Additions || f.Deletions != w.Deletions) {
					t.Errorf("%s: +%d -%d, want +%d -%d", f.Path, f.Additions, f.Deletions, w.Additions, w.Deletions)
				}
				if !strings.HasPrefix(f.Patch, "diff --git ") {
					t.Errorf("%s: patch does not start with its header: %.80q", f.Path, f.Patch)
				}
				if w.Truncated {
					if n := strings.Count(f.Patch, "\n"); n != 1000 {
						t.Errorf("%s: truncated patch has %d lines, want 1000", f.Path, n)
					}
				}
				if want, ok := tt.contains[f.Path]; ok && !strings.Contains(f.Patch, want) {
					t.Errorf("%s: patch lacks %q:\n%s", f.Path, want, f.Patch)
				}
				if tt.excludes != "" && strings.Contains(f.Patch, tt.excludes) {
					t.Errorf("%s: patch contains %q: a link target was read", f.Path, tt.excludes)
				}
			}
		})
	}
}
