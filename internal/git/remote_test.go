package git_test

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

const token = "tok_0123456789abcdef"

// serveGit serves the bare repositories under root over smart HTTP on
// loopback, asking for basic auth with the given password.
func serveGit(t *testing.T, root, password string) *httptest.Server {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, p, ok := r.BasicAuth(); !ok || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTokenComesFromTheEnvironment(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	remote := gittest.NewRemote(t, root, "api", map[string]string{"a.txt": "a\n"})
	gittest.Run(t, remote, "config", "http.receivepack", "true")
	srv := serveGit(t, root, token)
	url := srv.URL + "/api.git"

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
	root := t.TempDir()
	remote := gittest.NewRemote(t, root, "api", map[string]string{"a.txt": "a\n"})
	gittest.Run(t, remote, "config", "http.receivepack", "true")
	srv := serveGit(t, root, token)
	url := srv.URL + "/api.git"

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
	root := t.TempDir()
	remote := gittest.NewRemote(t, root, "api", map[string]string{"a.txt": "a\n"})
	gittest.Run(t, remote, "config", "http.receivepack", "true")
	srv := serveGit(t, root, token)
	url := srv.URL + "/api.git"

	g := &git.Git{Binary: wrapper, Env: append(gittest.Env(), git.DefaultTokenEnv+"="+token)}
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
