package source_test

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/source"
)

// open opens url with a cache of its own.
func open(t *testing.T, url string) *source.Repo {
	t.Helper()
	r, err := source.Open(context.Background(), source.Options{URL: url, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	return r
}

// push commits files onto branch of the bare repository, creating the
// branch from base when it is new, and returns the commit id.
func push(t *testing.T, bare, branch, base string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	gittest.Run(t, work, "clone", "--quiet", bare, ".")
	gittest.Run(t, work, "checkout", "--quiet", "-B", branch, "origin/"+base)
	gittest.WriteFiles(t, work, files)
	gittest.Run(t, work, "add", "-A")
	gittest.Run(t, work, "commit", "--quiet", "-m", "change "+branch)
	gittest.Run(t, work, "push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	return gittest.Run(t, work, "rev-parse", "HEAD")
}

// rewrite force-pushes branch of the bare repository to a new root commit
// holding only files, as a history rewrite does, and returns its id.
func rewrite(t *testing.T, bare, branch string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	gittest.Run(t, work, "init", "--quiet")
	gittest.WriteFiles(t, work, files)
	gittest.Run(t, work, "add", "-A")
	gittest.Run(t, work, "commit", "--quiet", "-m", "rewritten")
	gittest.Run(t, work, "push", "--quiet", "--force", bare, "HEAD:refs/heads/"+branch)
	return gittest.Run(t, work, "rev-parse", "HEAD")
}

// resolve resolves ref or fails the test.
func resolve(t *testing.T, r *source.Repo, ref string) string {
	t.Helper()
	sha, err := r.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatalf("Resolve(%s): %v", ref, err)
	}
	return sha
}

// read returns the content of name in the tree of rev under sub, or
// "<error>" when it cannot be read.
func read(t *testing.T, r *source.Repo, rev, sub, name string) string {
	t.Helper()
	fsys, err := r.FS(context.Background(), rev, sub)
	if err != nil {
		t.Fatalf("FS(%s, %q): %v", rev, sub, err)
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "<error>"
	}
	return string(b)
}

// gitServer serves the bare repositories under a directory over smart
// HTTP on 127.0.0.1 with git http-backend, and logs the requests.
type gitServer struct {
	*httptest.Server
	mu  sync.Mutex
	log []string
}

// serveGit serves root; with a password, requests need basic auth with it.
func serveGit(t *testing.T, root, password string) *gitServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{
		Path:   filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:    []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
		Stderr: io.Discard,
	}
	s := &gitServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.log = append(s.log, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		if password != "" {
			if _, p, ok := r.BasicAuth(); !ok || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// requests returns the logged requests and clears the log.
func (s *gitServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.log
	s.log = nil
	return out
}

// count counts requests whose text ends with suffix.
func count(reqs []string, suffix string) int {
	n := 0
	for _, r := range reqs {
		if strings.HasSuffix(r, suffix) {
			n++
		}
	}
	return n
}
