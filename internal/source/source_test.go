package source_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/source"
)

// TestResolve resolves every kind of ref, on a repository read in place
// and on one mirrored from a file:// remote.
func TestResolve(t *testing.T) {
	bare := gittest.NewRemote(t, "", "campaigns", map[string]string{"campaigns/a.yaml": "a: 1\n"})
	mainSHA := gittest.Run(t, bare, "rev-parse", "main")
	featureSHA := push(t, bare, "feature", "main", map[string]string{"campaigns/a.yaml": "a: 2\n"})
	gittest.Run(t, bare, "tag", "-a", "-m", "release", "v1", "main")
	gittest.Run(t, bare, "tag", "light", "feature")

	tests := []struct {
		name    string
		ref     string
		want    string
		wantErr error // nil: no error; errAny: some error
	}{
		{"HEAD", "HEAD", mainSHA, nil},
		{"empty means HEAD", "", mainSHA, nil},
		{"branch", "main", mainSHA, nil},
		{"second branch", "feature", featureSHA, nil},
		{"full ref name", "refs/heads/feature", featureSHA, nil},
		{"annotated tag peeled to its commit", "v1", mainSHA, nil},
		{"lightweight tag", "light", featureSHA, nil},
		{"full SHA", featureSHA, featureSHA, nil},
		{"short SHA", featureSHA[:7], featureSHA, nil},
		{"upper-case short SHA", strings.ToUpper(mainSHA[:10]), mainSHA, nil},
		{"unknown branch", "nope", "", source.ErrNotFound},
		{"unknown SHA", "0123456789abcdef0123456789abcdef01234567", "", source.ErrNotFound},
		{"revision expression", "main~1", "", errAny},
		{"option-like", "--upload-pack=x", "", errAny},
	}
	for _, kind := range []struct{ name, url string }{
		{"local path", bare},
		{"file URL", "file://" + bare},
	} {
		t.Run(kind.name, func(t *testing.T) {
			r := open(t, kind.url)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					got, err := r.Resolve(context.Background(), tt.ref)
					switch {
					case tt.wantErr == nil && err != nil:
						t.Fatalf("Resolve(%q): %v", tt.ref, err)
					case tt.wantErr != nil && err == nil:
						t.Fatalf("Resolve(%q) = %s, want an error", tt.ref, got)
					case tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
						t.Fatalf("Resolve(%q) error %v, want %v", tt.ref, err, tt.wantErr)
					case got != tt.want:
						t.Fatalf("Resolve(%q) = %s, want %s", tt.ref, got, tt.want)
					}
				})
			}
		})
	}
}

var errAny = errors.New("any error")

// TestBranches: a file changed on a branch shows on that branch's tree
// only.
func TestBranches(t *testing.T) {
	bare := gittest.NewRemote(t, "", "campaigns", map[string]string{
		"campaigns/a.yaml": "a: main\n",
		"campaigns/b.yaml": "b: main\n",
	})
	push(t, bare, "feature", "main", map[string]string{
		"campaigns/a.yaml": "a: feature\n",
		"campaigns/c.yaml": "c: feature\n",
	})
	r := open(t, "file://"+bare)
	mainSHA, featureSHA := resolve(t, r, "main"), resolve(t, r, "feature")

	tests := []struct {
		name, file  string
		main, other string
	}{
		{"changed on feature", "campaigns/a.yaml", "a: main\n", "a: feature\n"},
		{"no change", "campaigns/b.yaml", "b: main\n", "b: main\n"},
		{"added on feature", "campaigns/c.yaml", "<error>", "c: feature\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := read(t, r, mainSHA, "", tt.file); got != tt.main {
				t.Errorf("main: %s = %q, want %q", tt.file, got, tt.main)
			}
			if got := read(t, r, featureSHA, "", tt.file); got != tt.other {
				t.Errorf("feature: %s = %q, want %q", tt.file, got, tt.other)
			}
		})
	}
}

// TestForcePush: a branch rewritten on the remote resolves to its new
// commit, whose tree is what FS shows; a branch deleted there is gone.
func TestForcePush(t *testing.T) {
	bare := gittest.NewRemote(t, "", "campaigns", map[string]string{"campaigns/a.yaml": "a: 1\n"})
	push(t, bare, "feature", "main", map[string]string{"campaigns/f.yaml": "f: 1\n"})
	r := open(t, "file://"+bare)
	ctx := context.Background()

	before := resolve(t, r, "main")
	resolve(t, r, "feature")
	if got := read(t, r, before, "campaigns", "a.yaml"); got != "a: 1\n" {
		t.Fatalf("before the rewrite: a.yaml = %q", got)
	}

	rewritten := rewrite(t, bare, "main", map[string]string{"campaigns/a.yaml": "a: rewritten\n"})
	gittest.Run(t, bare, "branch", "-D", "feature")

	after := resolve(t, r, "main")
	if after != rewritten || after == before {
		t.Fatalf("after the rewrite Resolve(main) = %s, want %s (was %s)", after, rewritten, before)
	}
	if got := read(t, r, after, "campaigns", "a.yaml"); got != "a: rewritten\n" {
		t.Errorf("after the rewrite: a.yaml = %q, want the rewritten content", got)
	}
	// The old commit is still readable by its id: plans of old revisions
	// keep working.
	if got := read(t, r, before, "campaigns", "a.yaml"); got != "a: 1\n" {
		t.Errorf("old commit: a.yaml = %q", got)
	}
	if _, err := r.Resolve(ctx, "feature"); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("Resolve(feature) after its deletion: %v, want ErrNotFound", err)
	}
	if _, err := r.FS(ctx, "feature", ""); err == nil {
		t.Errorf("FS(feature) after its deletion and a fetch: want an error (the cache is pruned)")
	}
}

// TestCache: a second Repo on the same URL and cache directory (a
// restarted reconciler) finds the mirror and does not fetch again; a
// cached commit id is answered without asking the remote.
func TestCache(t *testing.T) {
	bare := gittest.NewRemote(t, "", "campaigns", map[string]string{"a.yaml": "a: 1\n"})
	url := "file://" + bare
	cache := t.TempDir()
	ctx := context.Background()
	openCached := func() *source.Repo {
		r, err := source.Open(ctx, source.Options{URL: url, CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	first := openCached()
	sha := resolve(t, first, "main")
	if got := first.Stats(); got != (source.Stats{LsRemotes: 1, Fetches: 1}) {
		t.Errorf("first Resolve on an empty cache: %+v, want one ls-remote and one fetch", got)
	}

	tests := []struct {
		name string
		ref  string
		want source.Stats
	}{
		{"branch unchanged: ls-remote, no fetch", "main", source.Stats{LsRemotes: 1}},
		{"cached full SHA: no network", sha, source.Stats{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := openCached()
			if got := resolve(t, r, tt.ref); got != sha {
				t.Fatalf("Resolve(%s) = %s, want %s", tt.ref, got, sha)
			}
			if got := r.Stats(); got != tt.want {
				t.Errorf("stats %+v, want %+v", got, tt.want)
			}
		})
	}

	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var mirrors []string
	for _, e := range entries {
		if e.IsDir() {
			mirrors = append(mirrors, e.Name())
		}
	}
	if len(mirrors) != 1 || !strings.HasSuffix(mirrors[0], ".git") {
		t.Errorf("cache holds %v, want one mirror named by the URL's hash", mirrors)
	}
}

// TestUnreachable: a remote that cannot be read gives an error naming the
// URL, the ref and what to check, quickly.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://127.0.0.1:" + strings.TrimPrefix(l.Addr().String(), "127.0.0.1:") + "/campaigns.git"
	l.Close()

	root := t.TempDir()
	gittest.NewRemote(t, root, "campaigns", map[string]string{"a.yaml": "a: 1\n"})
	gittest.Run(t, root, "init", "--quiet", "--bare", "empty.git")
	srv := serveGit(t, root, "")

	tests := []struct {
		name  string
		url   string
		kind  error
		wants []string
	}{
		{"closed port", closed, source.ErrUnreachable, []string{closed, "resolve main", "check the URL, the network"}},
		{"no such repository over http", srv.URL + "/missing.git", source.ErrUnreachable, []string{srv.URL + "/missing.git", "resolve main", "no such repository; check the URL"}},
		{"no such repository over file://", "file://" + filepath.Join(root, "missing.git"), source.ErrUnreachable, []string{"missing.git", "resolve main", "check the URL"}},
		{"empty repository", srv.URL + "/empty.git", source.ErrNotFound, []string{srv.URL + "/empty.git", "resolve main", "no commits; push a branch first"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := open(t, tt.url)
			start := time.Now()
			_, err := r.Resolve(context.Background(), "main")
			if err == nil {
				t.Fatal("Resolve succeeded")
			}
			t.Logf("error: %v", err)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %v does not wrap %v", err, tt.kind)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestOpenRefuses locations and settings that cannot work.
func TestOpenRefuses(t *testing.T) {
	notRepo := t.TempDir()
	tests := []struct {
		name string
		opts source.Options
		want string
	}{
		{"empty URL", source.Options{}, "empty"},
		{"local path that is not a repository", source.Options{URL: notRepo}, "check that it is a git repository"},
		{"credentials in the URL", source.Options{URL: "https://user:secret@example.com/x.git"}, "credentials"},
		{"transport helper", source.Options{URL: "ext::sh -c id"}, "not allowed"},
		{"plain http to another host", source.Options{URL: "http://example.com/x.git"}, "loopback"},
		{"bad token variable", source.Options{URL: "https://example.com/x.git", TokenEnv: "A-B"}, "token variable"},
		{"missing ssh key", source.Options{URL: "ssh://git@example.com/x.git", SSHKeyFile: filepath.Join(notRepo, "id_none")}, "read ssh key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.CacheDir = t.TempDir()
			_, err := source.Open(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

// TestLocalSeesNewCommits: a repository read in place sees commits made
// after it was opened, packed ones included.
func TestLocalSeesNewCommits(t *testing.T) {
	bare := gittest.NewRemote(t, "", "campaigns", map[string]string{"a.yaml": "a: 1\n"})
	r := open(t, bare)
	resolve(t, r, "main")
	next := push(t, bare, "main", "main", map[string]string{"a.yaml": "a: 2\n"})
	gittest.Run(t, bare, "gc", "--quiet", "--prune=now")
	if got := resolve(t, r, "main"); got != next {
		t.Fatalf("Resolve(main) = %s, want %s", got, next)
	}
	if got := read(t, r, next, "", "a.yaml"); got != "a: 2\n" {
		t.Errorf("a.yaml = %q", got)
	}
}

// TestFSNeedsResolve: FS never talks to the remote, so a commit not yet
// fetched is an error that says so.
func TestFSNeedsResolve(t *testing.T) {
	bare := gittest.NewRemote(t, "", "campaigns", map[string]string{"a.yaml": "a: 1\n"})
	r := open(t, "file://"+bare)
	_, err := r.FS(context.Background(), gittest.Run(t, bare, "rev-parse", "main"), "")
	if !errors.Is(err, source.ErrNotFound) || !strings.Contains(err.Error(), "Resolve") {
		t.Fatalf("FS before Resolve: %v", err)
	}
}

// TestConcurrentUse: trees are read while Resolve fetches new commits.
func TestConcurrentUse(t *testing.T) {
	bare := gittest.NewRemote(t, "", "campaigns", map[string]string{"campaigns/a.yaml": "a: 0\n"})
	r := open(t, "file://"+bare)
	fsys, err := r.FS(context.Background(), resolve(t, r, "main"), "campaigns")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if b, err := fs.ReadFile(fsys, "a.yaml"); err != nil || string(b) != "a: 0\n" {
					errs <- fmt.Errorf("read a.yaml = %q, %v", b, err)
					return
				}
			}
		}()
	}
	for i := 1; i <= 3; i++ {
		want := push(t, bare, "main", "main", map[string]string{"campaigns/a.yaml": fmt.Sprintf("a: %d\n", i)})
		if got := resolve(t, r, "main"); got != want {
			t.Errorf("Resolve(main) = %s, want %s", got, want)
		}
	}
	close(stop)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
