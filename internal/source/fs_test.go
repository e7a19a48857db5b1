package source_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// tree is a repository with directories, an executable, and symbolic
// links that stay inside the campaigns directory, leave it for elsewhere
// in the repository, or leave the repository.
var tree = map[string]string{
	"README.md":                 "readme\n",
	"secret.yaml":               "outside the sub-path\n",
	"tools/run.sh":              "#!/bin/sh\n",
	"campaigns/a.yaml":          "a: 1\n",
	"campaigns/team/b.yaml":     "b: 1\n",
	"campaigns/link.yaml":       gittest.LinkPrefix + "a.yaml",
	"campaigns/teamlink":        gittest.LinkPrefix + "team",
	"campaigns/viadir.yaml":     gittest.LinkPrefix + "teamlink/b.yaml",
	"campaigns/team/up.yaml":    gittest.LinkPrefix + "../a.yaml",
	"campaigns/parent.yaml":     gittest.LinkPrefix + "../secret.yaml",
	"campaigns/abs.yaml":        gittest.LinkPrefix + "/etc/passwd",
	"campaigns/loop.yaml":       gittest.LinkPrefix + "loop.yaml",
	"campaigns/dangling.yaml":   gittest.LinkPrefix + "missing.yaml",
	"campaigns/team/deep/c.yml": "c: 1\n",
}

func treeRepo(t *testing.T) (*source.Repo, string) {
	t.Helper()
	bare := gittest.NewRemote(t, "", "campaigns", tree)
	r := open(t, bare)
	return r, resolve(t, r, "main")
}

// TestSymlinks: links are visible as links, and are followed only while
// they stay inside the root.
func TestSymlinks(t *testing.T) {
	r, sha := treeRepo(t)
	ctx := context.Background()
	sub, err := r.FS(ctx, sha, "campaigns")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := r.FS(ctx, sha, "")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		fsys     fs.FS
		file     string
		link     string // ReadLink's answer; "" for not a link
		content  string // "" when Open must fail
		errMatch string
	}{
		{"regular file", sub, "a.yaml", "", "a: 1\n", ""},
		{"link to a sibling", sub, "link.yaml", "a.yaml", "a: 1\n", ""},
		{"through a linked directory", sub, "teamlink/b.yaml", "", "b: 1\n", ""},
		{"link through a linked directory", sub, "viadir.yaml", "teamlink/b.yaml", "b: 1\n", ""},
		{"link up, staying inside", sub, "team/up.yaml", "../a.yaml", "a: 1\n", ""},
		{"link leaving the sub-path", sub, "parent.yaml", "../secret.yaml", "", "leaves the root"},
		{"same link, whole tree", whole, "campaigns/parent.yaml", "../secret.yaml", "outside the sub-path\n", ""},
		{"absolute link", sub, "abs.yaml", "/etc/passwd", "", "leaves the root"},
		{"link to itself", sub, "loop.yaml", "loop.yaml", "", "too many levels"},
		{"dangling link", sub, "dangling.yaml", "missing.yaml", "", "does not exist"},
		{"missing file", sub, "nope.yaml", "", "", "does not exist"},
		{"file as a directory", sub, "a.yaml/x", "", "", "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fi, lerr := fs.Lstat(tt.fsys, tt.file)
			if tt.link != "" {
				if lerr != nil || fi.Mode()&fs.ModeSymlink == 0 {
					t.Errorf("Lstat = %v, %v; want a symbolic link", fi, lerr)
				}
				if got, err := fs.ReadLink(tt.fsys, tt.file); err != nil || got != tt.link {
					t.Errorf("ReadLink = %q, %v; want %q", got, err, tt.link)
				}
			} else if lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
				t.Errorf("Lstat says a symbolic link")
			}
			b, err := fs.ReadFile(tt.fsys, tt.file)
			if tt.content == "" {
				if err == nil || !strings.Contains(err.Error(), tt.errMatch) {
					t.Fatalf("ReadFile = %q, %v; want an error containing %q", b, err, tt.errMatch)
				}
				if _, serr := fs.Stat(tt.fsys, tt.file); serr == nil {
					t.Errorf("Stat succeeded where Open fails")
				}
				return
			}
			if err != nil || string(b) != tt.content {
				t.Fatalf("ReadFile = %q, %v; want %q", b, err, tt.content)
			}
		})
	}
}

// TestSubPath: the tree rooted at a sub-path, like Argo CD's path.
func TestSubPath(t *testing.T) {
	r, sha := treeRepo(t)
	ctx := context.Background()

	tests := []struct {
		name    string
		sub     string
		file    string
		want    string
		wantErr string // error from FS itself
	}{
		{"whole tree", "", "campaigns/a.yaml", "a: 1\n", ""},
		{"dot is the whole tree", ".", "README.md", "readme\n", ""},
		{"sub-path", "campaigns", "a.yaml", "a: 1\n", ""},
		{"nested, trailing slash", "campaigns/team/", "b.yaml", "b: 1\n", ""},
		{"through a link", "campaigns/teamlink", "deep/c.yml", "c: 1\n", ""},
		{"outside the sub-path is invisible", "campaigns", "README.md", "<error>", ""},
		{"missing sub-path", "nope", "", "", "does not exist"},
		{"sub-path is a file", "README.md", "", "", "not a directory"},
		{"dot-dot", "../x", "", "", "without '..'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, err := r.FS(ctx, sha, tt.sub)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FS(%q) = %v, want an error containing %q", tt.sub, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FS(%q): %v", tt.sub, err)
			}
			b, err := fs.ReadFile(fsys, tt.file)
			got := string(b)
			if err != nil {
				got = "<error>"
			}
			if got != tt.want {
				t.Errorf("%s = %q, want %q", tt.file, got, tt.want)
			}
		})
	}
}

// TestFSConforms runs the standard library's file system checks, and
// checks listings and modes.
func TestFSConforms(t *testing.T) {
	bare := gittest.NewRemote(t, "", "campaigns", map[string]string{
		"a.yaml":        "a: 1\n",
		"z/b.yaml":      "b: 1\n",
		"z/link.yaml":   gittest.LinkPrefix + "b.yaml",
		"z.txt":         "sorts after the directory z in git, before it by name\n",
		"tools/run.sh":  "#!/bin/sh\n",
		"tools/dirlink": gittest.LinkPrefix + "../z",
	})
	work := t.TempDir()
	gittest.Run(t, work, "clone", "--quiet", bare, ".")
	if err := os.Chmod(filepath.Join(work, "tools/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, work, "commit", "--quiet", "-am", "executable")
	gittest.Run(t, work, "push", "--quiet", "origin", "HEAD:main")

	r := open(t, bare)
	fsys, err := r.FS(context.Background(), resolve(t, r, "main"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(fsys, "a.yaml", "z/b.yaml", "z/link.yaml", "z.txt", "tools/run.sh", "tools/dirlink"); err != nil {
		t.Fatal(err)
	}

	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"a.yaml", "tools", "z", "z.txt"}; !slices.Equal(names, want) {
		t.Errorf("ReadDir(.) = %v, want %v", names, want)
	}
	modes := []struct {
		name string
		want fs.FileMode
	}{
		{"a.yaml", 0o644},
		{"tools/run.sh", 0o755},
		{"z", fs.ModeDir | 0o755},
		{"tools/dirlink", fs.ModeSymlink | 0o777},
	}
	for _, m := range modes {
		fi, err := fs.Lstat(fsys, m.name)
		if err != nil || fi.Mode() != m.want {
			t.Errorf("Lstat(%s) mode = %v, %v; want %v", m.name, fi.Mode(), err, m.want)
		}
	}
}

// TestSpecLoader: the spec loader reads the campaigns template from the
// tree, and refuses symbolic links that leave the root.
func TestSpecLoader(t *testing.T) {
	files := map[string]string{}
	root := filepath.Join("..", "..", "campaigns-template")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files["campaigns/escape.yaml"] = gittest.LinkPrefix + "../../outside.yaml"
	files["campaigns/absolute.yaml"] = gittest.LinkPrefix + "/etc/hostname"
	bare := gittest.NewRemote(t, "", "campaigns", files)
	r := open(t, "file://"+bare)
	ctx := context.Background()
	fsys, err := r.FS(ctx, resolve(t, r, "main"), "")
	if err != nil {
		t.Fatal(err)
	}

	res, err := (&spec.Loader{}).Load(ctx, fsys, "campaigns")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range res.Definitions {
		ids = append(ids, d.ID)
	}
	if want := []string{"example-audit", "example-slog"}; !slices.Equal(ids, want) {
		t.Errorf("definitions %v, want %v (errors: %v)", ids, want, res.Errors)
	}
	refused := map[string]bool{}
	for _, e := range res.Errors {
		if strings.Contains(e.Msg, "leaves the definitions root") {
			refused[e.File] = true
		} else {
			t.Errorf("unexpected error: %v", e)
		}
	}
	for _, f := range []string{"campaigns/escape.yaml", "campaigns/absolute.yaml"} {
		if !refused[f] {
			t.Errorf("%s was not refused (errors: %v)", f, res.Errors)
		}
	}
}
