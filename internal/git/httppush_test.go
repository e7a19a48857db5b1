package git_test

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// countingGit is serveGit that records each request's method, path and
// whether it carried the token; over TLS when tlsServer is set.
func countingGit(t *testing.T, root string, tlsServer bool) (*httptest.Server, func() []string) {
	t.Helper()
	inner := serveGit(t, root, token)
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, p, _ := r.BasicAuth()
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" token="+boolWord(p == token))
		mu.Unlock()
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	conns := new(atomic.Int32)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	connections.Store(srv, conns)
	if tlsServer {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// connections are the connections each server of countingGit accepted.
var connections sync.Map // *httptest.Server -> *atomic.Int32

// connectionsTo is how many connections srv, a countingGit server, has
// accepted.
func connectionsTo(srv *httptest.Server) int {
	n, _ := connections.Load(srv)
	return int(n.(*atomic.Int32).Load())
}

func boolWord(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// A commit made in a clone goes up over HTTP in two requests of this
// process (no 401 challenge, no git processes); a lease that does not
// hold refuses it; a branch already there is left alone.
// Over https it trusts the certificate authority git is given
// (GIT_SSL_CAINFO).
func TestHTTPPushInProcess(t *testing.T) {
	for _, tlsServer := range []bool{false, true} {
		t.Run("tls="+boolWord(tlsServer), func(t *testing.T) { testHTTPPushInProcess(t, tlsServer) })
	}
}

func testHTTPPushInProcess(t *testing.T, tlsServer bool) {
	ctx := context.Background()
	root := t.TempDir()
	remote := gittest.NewRemote(t, root, "api", map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n"})
	gittest.Run(t, remote, "config", "http.receivepack", "true")
	srv, requests := countingGit(t, root, tlsServer)
	url := srv.URL + "/api.git"
	env := []string{git.DefaultTokenEnv + "=" + token}
	if tlsServer {
		ca := filepath.Join(t.TempDir(), "ca.pem")
		cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		if err := os.WriteFile(ca, cert, 0o644); err != nil {
			t.Fatal(err)
		}
		env = append(env, "GIT_SSL_CAINFO="+ca)
	}
	g := newGit(env...)
	g.TokenOrigins = []string{srv.URL}
	dir := clone(t, g, url, git.CloneOptions{Depth: 1})
	gittest.WriteFiles(t, dir, map[string]string{"dir/b.txt": "changed\n", "dir/sub/c.txt": "new\n"})
	head, err := g.Commit(ctx, dir, git.CommitOptions{Branch: "topic", Message: "change"})
	if err != nil {
		t.Fatal(err)
	}
	requests()

	made, err := g.PushCreated(ctx, dir, url, git.RefUpdate{Src: head, Dst: "refs/heads/topic", Lease: true})
	if err != nil || len(made) != 1 || made[0] != "refs/heads/topic" {
		t.Fatalf("push = %q, %v; want topic made", made, err)
	}
	want := []string{"GET /api.git/info/refs token=yes", "POST /api.git/git-receive-pack token=yes"}
	if got := requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := gittest.Run(t, remote, "rev-parse", "refs/heads/topic"); got != head {
		t.Fatalf("remote topic at %s, want %s", got, head)
	}
	// The remote has every object of the commit, and they are sound.
	gittest.Run(t, remote, "fsck", "--no-dangling", "--connectivity-only", "refs/heads/topic")
	if got := gittest.Run(t, remote, "show", "refs/heads/topic:dir/sub/c.txt"); got != "new" {
		t.Errorf("dir/sub/c.txt on the remote = %q", got)
	}

	// Up to date: nothing made, nothing sent but the listing.
	made, err = g.PushCreated(ctx, dir, url, git.RefUpdate{Src: head, Dst: "refs/heads/topic", Lease: true})
	if err != nil || len(made) != 0 {
		t.Errorf("push again = %q, %v; want nothing made", made, err)
	}
	if got := requests(); len(got) != 1 {
		t.Errorf("an up-to-date branch took %q", got)
	}

	// A lease that does not hold: refused, the branch stays.
	base := gittest.Run(t, dir, "rev-parse", "HEAD~0^{commit}")
	if _, err := g.PushCreated(ctx, dir, url, git.RefUpdate{Src: head, Dst: "refs/heads/other", Lease: true, Expect: base}); err == nil || !strings.Contains(err.Error(), "stale info") {
		t.Errorf("a push on a lease that does not hold: %v", err)
	}
	if got := gittest.Run(t, remote, "for-each-ref", "--format=%(refname)", "refs/heads/other"); got != "" {
		t.Errorf("the refused push made %s", got)
	}
}

// What the in-process push does not take goes to git push: a commit whose
// objects were packed in the clone (the server refuses the objects sent),
// and a redirect, which it does not follow with the token.
func TestHTTPPushLeavesTheRestToGit(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	remote := gittest.NewRemote(t, root, "api", map[string]string{"a.txt": "a\n"})
	gittest.Run(t, remote, "config", "http.receivepack", "true")
	srv, requests := countingGit(t, root, false)
	url := srv.URL + "/api.git"
	g := newGit(git.DefaultTokenEnv + "=" + token)
	g.TokenOrigins = []string{srv.URL}
	dir := clone(t, g, url, git.CloneOptions{})
	gittest.WriteFiles(t, dir, map[string]string{"a.txt": "packed\n"})
	head, err := g.Commit(ctx, dir, git.CommitOptions{Branch: "topic", Message: "packed"})
	if err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, dir, "repack", "-a", "-d", "-q")
	gittest.Run(t, dir, "prune-packed")
	requests()
	made, err := g.PushCreated(ctx, dir, url, git.RefUpdate{Src: head, Dst: "refs/heads/topic", Lease: true})
	if err != nil || len(made) != 1 {
		t.Fatalf("push of packed objects = %q, %v", made, err)
	}
	if got := gittest.Run(t, remote, "rev-parse", "refs/heads/topic"); got != head {
		t.Errorf("remote topic at %s, want %s", got, head)
	}
	if got := requests(); len(got) <= 2 {
		t.Errorf("git push did not take over: %q", got)
	}

	var mu sync.Mutex
	var stolen []string
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		stolen = append(stolen, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer thief.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thief.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	defer redirector.Close()
	g.TokenOrigins = []string{redirector.URL}
	if _, err := g.PushCreated(ctx, dir, redirector.URL+"/api.git", git.RefUpdate{Src: head, Dst: "refs/heads/moved", Lease: true}); err == nil {
		t.Error("a push to a redirecting server succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range stolen {
		if a != "" {
			t.Errorf("the token followed the redirect: %q", a)
		}
	}
}
