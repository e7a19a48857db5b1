package git_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

const token = "tok_0123456789abcdef"

// serveGit serves the bare repositories under root over smart HTTP on
// loopback, asking for basic auth with the given password.
func serveGit(t *testing.T, root, password string) *httptest.Server {
	return gittest.ServeHTTP(t, root, password)
}

// pushableAPI serves a bare repository api.git, with one commit on main,
// over smart HTTP on loopback, pushes allowed and asking for token: its
// path, its server and its URL.
func pushableAPI(t *testing.T) (remote string, srv *httptest.Server, url string) {
	t.Helper()
	root := t.TempDir()
	remote = gittest.NewRemote(t, root, "api", map[string]string{"a.txt": "a\n"})
	gittest.Run(t, remote, "config", "http.receivepack", "true")
	srv = serveGit(t, root, token)
	return remote, srv, srv.URL + "/api.git"
}

func TestTokenComesFromTheEnvironment(t *testing.T) {
	ctx := context.Background()
	_, srv, url := pushableAPI(t)

	tests := []struct {
		name    string
		env     []string
		wantErr bool
	}{
		{"token in FLEETLIFT_GIT_TOKEN", []string{git.DefaultTokenEnv + "=" + token}, false},
		{"no token", nil, true},
		{"wrong token", []string{git.DefaultTokenEnv + "=wrong_0123456789"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGit(tt.env...)
			g.TokenOrigins = []string{srv.URL}
			dest := filepath.Join(t.TempDir(), "api")
			err := g.Clone(ctx, url, dest, git.CloneOptions{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("clone = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				t.Logf("clone error: %v", err)
				for _, secret := range []string{token, "wrong_0123456789"} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("error leaks a token: %v", err)
					}
				}
				return
			}
			config, _ := os.ReadFile(filepath.Join(dest, ".git", "config"))
			if strings.Contains(string(config), token) {
				t.Fatalf("token written into .git/config:\n%s", config)
			}
			gittest.WriteFiles(t, dest, map[string]string{"b.txt": "b\n"})
			if _, err := g.Commit(ctx, dest, git.CommitOptions{Branch: "topic", Message: "b"}); err != nil {
				t.Fatal(err)
			}
			if err := g.Push(ctx, dest, url, git.RefUpdate{Src: "topic", Dst: "refs/heads/topic"}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A clone's configuration is writable by the agent. Pushing must neither
// hand the token to a credential helper configured there nor follow a URL
// rewrite to another host.
func TestPushIgnoresTheClonesCredentialConfiguration(t *testing.T) {
	ctx := context.Background()
	_, srv, url := pushableAPI(t)

	var mu sync.Mutex
	var stolen []string
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		stolen = append(stolen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer thief.Close()

	g := newGit(git.DefaultTokenEnv + "=" + token)
	g.TokenOrigins = []string{srv.URL}
	dest := filepath.Join(t.TempDir(), "api")
	if err := g.Clone(ctx, url, dest, git.CloneOptions{}); err != nil {
		t.Fatal(err)
	}
	steal := filepath.Join(t.TempDir(), "stolen")
	gittest.Run(t, dest, "config", "credential.helper", "!f() { cat >> "+steal+"; }; f")
	gittest.Run(t, dest, "config", "url."+thief.URL+"/.insteadOf", srv.URL+"/")
	gittest.WriteFiles(t, dest, map[string]string{"b.txt": "b\n"})
	if _, err := g.Commit(ctx, dest, git.CommitOptions{Branch: "topic", Message: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Push(ctx, dest, url, git.RefUpdate{Src: "topic", Dst: "refs/heads/topic"}); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(steal); err == nil {
		t.Fatalf("the clone's credential helper was called: %q", data)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stolen) > 0 {
		t.Fatalf("push followed the clone's url rewrite to another host: %q", stolen)
	}
}

// Only commands that talk to a remote see the token.
func TestTokenOnlyInRemoteCommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	log := filepath.Join(dir, "env.log")
	wrapper := filepath.Join(dir, "git-wrapper")
	script := "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in -c|*=*) ;; *) sub=$a; break;; esac; done\n" +
		"if env | grep -q '^" + git.DefaultTokenEnv + "='; then echo \"$sub token\" >> " + log + "; else echo \"$sub none\" >> " + log + "; fi\n" +
		"exec git \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, srv, url := pushableAPI(t)

	g := &git.Git{Binary: wrapper, Env: append(gittest.Env(), git.DefaultTokenEnv+"="+token), TokenOrigins: []string{srv.URL}}
	dest := filepath.Join(t.TempDir(), "api")
	if err := g.Clone(ctx, url, dest, git.CloneOptions{}); err != nil {
		t.Fatal(err)
	}
	gittest.WriteFiles(t, dest, map[string]string{"b.txt": "b\n"})
	if _, err := g.Diff(ctx, dest, git.DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Commit(ctx, dest, git.CommitOptions{Branch: "topic", Message: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Push(ctx, dest, url, git.RefUpdate{Src: "topic", Dst: "refs/heads/topic"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("git invocations:\n%s", data)
	remoteCommands := map[string]bool{"clone": true, "push": true, "fetch": true, "ls-remote": true}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		sub, seen, _ := strings.Cut(line, " ")
		if remoteCommands[sub] != (seen == "token") {
			t.Errorf("git %s ran with token=%v", sub, seen == "token")
		}
	}
}

// A definition names the repositories to clone, so it could name any
// host: the token goes only to the origins the operator gave (the
// forge's), never to another host, another port of the same host, or
// plain http of the forge's https.
func TestTokenNeverLeavesForgeHost(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	gittest.NewRemote(t, root, "api", map[string]string{"a.txt": "a\n"})
	forge := serveGit(t, root, token)

	var mu sync.Mutex
	var seen []string
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer attacker.Close()

	g := newGit(git.DefaultTokenEnv + "=" + token)
	g.TokenOrigins = []string{forge.URL}
	if err := g.Clone(ctx, attacker.URL+"/x.git", filepath.Join(t.TempDir(), "x"), git.CloneOptions{}); err == nil {
		t.Fatal("clone from the attacker's server succeeded without credentials")
	} else if strings.Contains(err.Error(), token) {
		t.Fatalf("the error shows the token: %v", err)
	}
	if _, err := g.LsRemote(ctx, attacker.URL+"/x.git", "HEAD"); err == nil {
		t.Fatal("ls-remote at the attacker's server succeeded without credentials")
	}
	mu.Lock()
	for _, auth := range seen {
		if auth != "" {
			t.Errorf("the attacker's server received credentials: %q", auth)
		}
	}
	mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("git never asked the attacker's server: the test proves nothing")
	}
	// The forge itself still gets the token.
	if err := g.Clone(ctx, forge.URL+"/api.git", filepath.Join(t.TempDir(), "api"), git.CloneOptions{}); err != nil {
		t.Fatalf("clone from the forge: %v", err)
	}
	// With no origin given, the token goes nowhere, not even to the forge.
	none := newGit(git.DefaultTokenEnv + "=" + token)
	if err := none.Clone(ctx, forge.URL+"/api.git", filepath.Join(t.TempDir(), "api2"), git.CloneOptions{}); err == nil {
		t.Fatal("the token was sent with no origin allowed")
	}
}

func TestOrigin(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://Git.Example.com/acme/x.git", "https://git.example.com"},
		{"https://git.example.com:443/x", "https://git.example.com"},
		{"https://git.example.com:8443/x", "https://git.example.com:8443"},
		{"http://127.0.0.1:3000/", "http://127.0.0.1:3000"},
		{"http://[::1]:80/x", "http://[::1]"},
		{"HTTPS://github.com", "https://github.com"},
	}
	for _, tt := range tests {
		if got, err := git.Origin(tt.in); err != nil || got != tt.want {
			t.Errorf("Origin(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"ssh://git@host/x", "file:///srv/x", "/srv/x", "https:///nohost"} {
		if got, err := git.Origin(bad); err == nil {
			t.Errorf("Origin(%q) = %q; want an error", bad, got)
		}
	}
}

// A home directory's ssh configuration (in a sandbox, a home the work may
// write) never runs: git's ssh reads no configuration file, so a
// ProxyCommand there does not run with the agent's environment. ssh reads
// ~/.ssh from the passwd entry's home, not $HOME: the test runs again in
// user and mount namespaces (as root there) with a directory of its own
// bound over /root.
func TestSSHReadsNoConfiguration(t *testing.T) {
	const envMarker = "FLEETLIFT_TEST_SSH_MARKER"
	if marker := os.Getenv(envMarker); marker != "" {
		if err := os.MkdirAll("/root/.ssh", 0o700); err != nil {
			t.Fatal(err)
		}
		config := "Host *\n  ProxyCommand sh -c 'touch " + marker + "; exit 1'\n"
		if err := os.WriteFile("/root/.ssh/config", []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		g := &git.Git{Env: []string{"HOME=/root", "PATH=" + os.Getenv("PATH")}}
		// Port 1 of this host's loopback: nothing listens, nothing leaves.
		if err := g.Clone(context.Background(), "ssh://git@127.0.0.1:1/svc.git", filepath.Join(t.TempDir(), "svc"), git.CloneOptions{}); err == nil {
			t.Fatal("clone from a port where nothing listens succeeded")
		}
		return
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare(1) runs this test in namespaces of its own: apt-get install util-linux (%v)", err)
	}
	home, marker := t.TempDir(), filepath.Join(t.TempDir(), "proxy-ran")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--mount", "sh", "-c",
		`mount --bind "$1" /root && exec "$2" -test.run '^TestSSHReadsNoConfiguration$' -test.count=1`, "sh", home, exe)
	cmd.Env = append(os.Environ(), envMarker+"="+marker)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("in namespaces with a home of its own: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the ProxyCommand of ~/.ssh/config ran")
	}
}

// Git's children (ssh here, remote helpers alike) get no secret from the
// environment git starts from: a process of the same user can read their
// environments. The token goes only with a command for its own remote.
func TestGitChildrenGetNoSecrets(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "ssh-env")
	ssh := filepath.Join(dir, "ssh")
	if err := os.WriteFile(ssh, []byte("#!/bin/sh\nenv > "+dump+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const canary = "canary-secret-0123456789"
	g := &git.Git{Env: []string{
		"PATH=" + os.Getenv("PATH"), "GIT_SSH_COMMAND=" + ssh,
		"FLEETLIFT_FORGE_TOKEN=" + canary, "FLEETLIFT_GIT_TOKEN=" + canary,
		"ANTHROPIC_API_KEY=" + canary, "DB_PASSWORD=" + canary, "GITHUB_TOKEN=" + canary,
		"LANG=C.UTF-8",
	}}
	_ = g.Clone(context.Background(), "ssh://git@127.0.0.1:1/svc.git", filepath.Join(dir, "svc"), git.CloneOptions{})
	data, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("git's ssh did not run: %v", err)
	}
	if strings.Contains(string(data), canary) {
		t.Errorf("git's ssh got a secret in its environment:\n%s", data)
	}
	if !strings.Contains(string(data), "LANG=C.UTF-8") {
		t.Errorf("git's ssh lost the ordinary environment:\n%s", data)
	}
}

// A local repository's own hooks never run when fleetlift's git fetches
// from it or pushes to it (they would run as the worker's user), and a
// local repository of another user is read and pushed to all the same
// (the caller allowed it: --allow-file-root), where plain git refuses it
// as of dubious ownership.
func TestLocalRepositoriesRunNoHooksWhoeverOwnsThem(t *testing.T) {
	ctx := context.Background()
	bare := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	marker := filepath.Join(t.TempDir(), "ran")
	for _, h := range []string{"pre-receive", "update", "post-receive", "post-update", "reference-transaction", "pre-upload-pack"} {
		if err := os.WriteFile(filepath.Join(bare, "hooks", h), []byte("#!/bin/sh\necho "+h+" >> "+marker+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	foreign := os.Geteuid() == 0
	if foreign {
		// As root, the repository becomes another user's, as a
		// worker's repositories are to a container's user.
		if out, err := exec.Command("chown", "-R", "1000:1000", bare).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
		if out, err := exec.Command("git", "ls-remote", "file://"+bare).CombinedOutput(); err == nil || !strings.Contains(string(out), "dubious ownership") {
			t.Fatalf("plain git read another user's repository: %v %s", err, out)
		}
	} else {
		t.Log("not root: the repository stays this user's; hooks are still checked")
	}
	g := &git.Git{Env: gittest.Env()}
	s, err := g.NewScratch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.FetchShallow(ctx, "file://"+bare, 1, "+refs/heads/main:refs/heads/main"); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if err := s.Push(ctx, "file://"+bare, git.RefUpdate{Src: "refs/heads/main", Dst: "refs/heads/copy"}); err != nil {
		t.Fatalf("push: %v", err)
	}
	if refs, err := s.LsRemote(ctx, bare, "refs/heads/copy"); err != nil || refs["refs/heads/copy"] == "" {
		t.Fatalf("ls-remote: %v %v", refs, err)
	}
	if data, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the repository's hooks ran:\n%s", data)
	}
}

// A commit made in a clone goes up over http and https (trusting the
// certificate authority git is given, GIT_SSL_CAINFO): a branch the push
// makes is reported, an up-to-date one is not, and a lease that does not
// hold refuses the push.
func TestPushOverHTTP(t *testing.T) {
	for _, tlsServer := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tlsServer), func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			remote := gittest.NewRemote(t, root, "api", map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n"})
			gittest.Run(t, remote, "config", "http.receivepack", "true")
			srv := serveGit(t, root, token)
			env := []string{git.DefaultTokenEnv + "=" + token}
			if tlsServer {
				srv = httptest.NewTLSServer(srv.Config.Handler)
				t.Cleanup(srv.Close)
				ca := filepath.Join(t.TempDir(), "ca.pem")
				cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
				if err := os.WriteFile(ca, cert, 0o644); err != nil {
					t.Fatal(err)
				}
				env = append(env, "GIT_SSL_CAINFO="+ca)
			}
			url := srv.URL + "/api.git"
			g := newGit(env...)
			g.TokenOrigins = []string{srv.URL}
			dir := clone(t, g, url, git.CloneOptions{Depth: 1})
			gittest.WriteFiles(t, dir, map[string]string{"dir/b.txt": "changed\n", "dir/sub/c.txt": "new\n"})
			head, err := g.Commit(ctx, dir, git.CommitOptions{Branch: "topic", Message: "change"})
			if err != nil {
				t.Fatal(err)
			}
			made, err := g.PushCreated(ctx, dir, url, git.RefUpdate{Src: head, Dst: "refs/heads/topic", Lease: true})
			if err != nil || !slices.Equal(made, []string{"refs/heads/topic"}) {
				t.Fatalf("push = %q, %v; want topic made", made, err)
			}
			if got := gittest.Run(t, remote, "rev-parse", "refs/heads/topic"); got != head {
				t.Fatalf("remote topic at %s, want %s", got, head)
			}
			gittest.Run(t, remote, "fsck", "--no-dangling", "refs/heads/topic")
			if got := gittest.Run(t, remote, "show", "refs/heads/topic:dir/sub/c.txt"); got != "new" {
				t.Errorf("dir/sub/c.txt on the remote = %q", got)
			}
			if made, err := g.PushCreated(ctx, dir, url, git.RefUpdate{Src: head, Dst: "refs/heads/topic", Lease: true}); err != nil || len(made) != 0 {
				t.Errorf("push again = %q, %v; want nothing made", made, err)
			}
			base := gittest.Run(t, dir, "rev-parse", "HEAD~1")
			if _, err := g.PushCreated(ctx, dir, url, git.RefUpdate{Src: head, Dst: "refs/heads/other", Lease: true, Expect: base}); err == nil || !strings.Contains(err.Error(), "stale info") {
				t.Errorf("a push on a lease that does not hold: %v", err)
			}
			if got := gittest.Run(t, remote, "for-each-ref", "--format=%(refname)", "refs/heads/other"); got != "" {
				t.Errorf("the refused push made %s", got)
			}
		})
	}
}

// A remote that redirects elsewhere never gets the token sent there,
// even when the other server asks for credentials: it is only for the
// origins allowed.
func TestTokenDoesNotFollowARedirect(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	remote := gittest.NewRemote(t, root, "api", map[string]string{"a.txt": "a\n"})
	gittest.Run(t, remote, "config", "http.receivepack", "true")
	srv := serveGit(t, root, token)
	g := newGit(git.DefaultTokenEnv + "=" + token)
	g.TokenOrigins = []string{srv.URL}
	dir := clone(t, g, srv.URL+"/api.git", git.CloneOptions{})

	var mu sync.Mutex
	var seen []string
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer thief.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thief.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	defer redirector.Close()
	g.TokenOrigins = append(g.TokenOrigins, redirector.URL)
	if err := g.Clone(ctx, redirector.URL+"/api.git", filepath.Join(t.TempDir(), "moved"), git.CloneOptions{}); err == nil {
		t.Error("a clone from a redirecting server succeeded")
	}
	if _, err := g.PushCreated(ctx, dir, redirector.URL+"/api.git", git.RefUpdate{Src: "HEAD", Dst: "refs/heads/moved", Lease: true}); err == nil {
		t.Error("a push to a redirecting server succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("git never followed the redirect: the test proves nothing")
	}
	for _, a := range seen {
		if a != "" {
			t.Errorf("the token followed the redirect: %q", a)
		}
	}
}

// countingSlots is a bound of n transfers at once that records the most
// that ran together and how many asked.
type countingSlots struct {
	mu           sync.Mutex
	n, now, most int
	asked        int
	free         chan struct{}
}

func newCountingSlots(n int) *countingSlots {
	return &countingSlots{n: n, free: make(chan struct{}, n)}
}

func (s *countingSlots) Acquire(ctx context.Context) (func(), error) {
	s.mu.Lock()
	s.asked++
	s.mu.Unlock()
	select {
	case s.free <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	s.now++
	s.most = max(s.most, s.now)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
		<-s.free
	}, nil
}

// With Slots, clones and pushes over the network wait for a slot and
// no more of them run at once than it allows; a clone of a local path
// takes none; a transfer that cannot get its slot before its context
// ends fails saying so, and starts no git.
func TestSlotsBoundTransfers(t *testing.T) {
	ctx := context.Background()
	remote, srv, url := pushableAPI(t)
	slots := newCountingSlots(2)
	g := newGit(git.DefaultTokenEnv + "=" + token)
	g.TokenOrigins = []string{srv.URL}
	g.Slots = slots

	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Go(func() {
			dest := filepath.Join(t.TempDir(), "api")
			if err := g.Clone(ctx, url, dest, git.CloneOptions{}); err != nil {
				errs <- err
				return
			}
			gittest.WriteFiles(t, dest, map[string]string{"b.txt": fmt.Sprint(i)})
			if _, err := g.Commit(ctx, dest, git.CommitOptions{Branch: fmt.Sprint("topic-", i), Message: "b"}); err != nil {
				errs <- err
				return
			}
			errs <- g.Push(ctx, dest, url, git.RefUpdate{Src: "HEAD", Dst: fmt.Sprint("refs/heads/topic-", i)})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slots.mu.Lock()
	asked, most := slots.asked, slots.most
	slots.mu.Unlock()
	if asked != 12 || most > 2 || most < 1 {
		t.Errorf("%d transfers asked for a slot, at most %d at once; want 12 (6 clones, 6 pushes), at most 2", asked, most)
	}

	if err := g.Clone(ctx, remote, filepath.Join(t.TempDir(), "local"), git.CloneOptions{}); err != nil {
		t.Fatal(err)
	}
	if slots.asked != asked {
		t.Errorf("a clone of a local path asked for a slot")
	}

	// Both slots held: a clone whose context ends first never starts.
	for range 2 {
		slots.free <- struct{}{}
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	dest := filepath.Join(t.TempDir(), "late")
	err := g.Clone(short, url, dest, git.CloneOptions{})
	if err == nil || !strings.Contains(err.Error(), "wait for a transfer slot") {
		t.Errorf("a clone without a slot: %v; want it to say it waited for a transfer slot", err)
	}
	if _, statErr := os.Stat(dest); statErr == nil {
		t.Errorf("the clone without a slot made %s", dest)
	}
}

// The worker's copy of a repository (a shallow bare clone) names its
// branch, and a change committed in it is pushed from it: its objects and
// its shallow commits are the ones the push reads, found without asking
// git, as git finds them.
func TestPushFromAShallowCopy(t *testing.T) {
	ctx := context.Background()
	remote, srv, url := pushableAPI(t)
	gittest.Commit(t, remote, "main", map[string]string{"b.txt": "b\n"})
	g := newGit(git.DefaultTokenEnv + "=" + token)
	g.TokenOrigins = []string{srv.URL}
	g.ScratchDir = t.TempDir()
	copied, err := g.CloneBare(ctx, url, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	if branch, err := copied.Head(ctx); err != nil || branch != "main" {
		t.Fatalf("the copy's branch = %q, %v; want main", branch, err)
	}
	if _, err := os.Stat(filepath.Join(copied.Dir(), "shallow")); err != nil {
		t.Fatalf("a copy of depth 1 has no shallow list: %v", err)
	}
	base := strings.TrimSpace(gittest.Run(t, remote, "rev-parse", "main"))
	// The branch moves on at the forge: the push then finds none of the
	// remote's commits in the copy, and walks back to its shallow end.
	gittest.Commit(t, remote, "main", map[string]string{"d.txt": "d\n"})
	tree, err := copied.WriteTree(ctx, map[string][]byte{"c.txt": []byte("c\n")})
	if err != nil {
		t.Fatal(err)
	}
	commit, err := copied.CommitTree(ctx, tree, "change", git.Identity{Name: "f", Email: "f@example.com"}, base)
	if err != nil {
		t.Fatal(err)
	}
	made, err := g.PushCreated(ctx, copied.Dir(), url, git.RefUpdate{Src: commit, Dst: "refs/heads/topic", Lease: true})
	if err != nil || !slices.Equal(made, []string{"refs/heads/topic"}) {
		t.Fatalf("push from the copy = %q, %v; want topic made", made, err)
	}
	gittest.Run(t, remote, "fsck", "--no-dangling", "refs/heads/topic")
	if got := gittest.Run(t, remote, "show", "topic:c.txt"); got != "c" {
		t.Errorf("c.txt on the remote = %q", got)
	}

	// A copy whose HEAD names no branch says so.
	if err := os.WriteFile(filepath.Join(copied.Dir(), "HEAD"), []byte(base+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if branch, err := copied.Head(ctx); err == nil || !strings.Contains(err.Error(), "names no branch") {
		t.Errorf("a detached copy's branch = %q, %v; want an error", branch, err)
	}
}

// The worker's copy of a local repository (one under its file roots,
// served to pods) is as deep as asked: a local clone would ignore the
// depth, and the sandbox's clone of the copy would hold all of its
// history.
func TestCopyOfALocalRepositoryKeepsItsDepth(t *testing.T) {
	remote := gittest.NewRemote(t, t.TempDir(), "svc", map[string]string{"a.txt": "a\n"})
	gittest.Commit(t, remote, "main", map[string]string{"b.txt": "b\n"})
	gittest.Commit(t, remote, "main", map[string]string{"c.txt": "c\n"})
	g := newGit()
	g.ScratchDir = t.TempDir()
	for _, url := range []string{remote, "file://" + remote} {
		copied, err := g.CloneBare(t.Context(), url, "", 2)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if n := gittest.Run(t, copied.Dir(), "rev-list", "--count", "HEAD"); n != "2" {
			t.Errorf("%s: the copy holds %s commits; want 2", url, n)
		}
		copied.Close()
	}
}

// IsAncestor says yes for the tip itself and the commits before it, no
// for a commit off the branch or one the repository lacks, and fails for
// what is neither an object id nor a reference.
func TestIsAncestor(t *testing.T) {
	ctx := context.Background()
	remote := gittest.NewRemote(t, "", "api", map[string]string{"a.txt": "a\n"})
	first := strings.TrimSpace(gittest.Run(t, remote, "rev-parse", "main"))
	gittest.Commit(t, remote, "main", map[string]string{"b.txt": "b\n"})
	tip := strings.TrimSpace(gittest.Run(t, remote, "rev-parse", "main"))
	gittest.Run(t, remote, "branch", "side", first)
	side := gittest.Commit(t, remote, "side", map[string]string{"c.txt": "c\n"})
	g := newGit()
	g.ScratchDir = t.TempDir()
	s, err := g.CloneBare(ctx, remote, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Fetch(ctx, remote, "+refs/heads/side:refs/heads/side"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		commit        string
		want, wantErr bool
	}{
		{tip, true, false}, {first, true, false}, {side, false, false},
		{strings.Repeat("ab", 20), false, false}, {"refs/heads/gone", false, false},
		{"refs/heads/side", false, false}, {"refs/heads/main", true, false}, {"--all", false, true},
	} {
		if got, err := s.IsAncestor(ctx, c.commit, "refs/heads/main"); got != c.want || (err != nil) != c.wantErr {
			t.Errorf("IsAncestor(%s, main) = %v, %v; want %v (an error: %v)", c.commit, got, err, c.want, c.wantErr)
		}
	}
}
