package gateway_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

const forgeToken = "forge-token-canary-0123456789"

// A sandbox's agent clones the repositories its task names through the
// gateway with its own key: the worker reads each one from the forge once,
// with its token, and serves the agent from its copy, from which it then
// proposes; the forge never sees the key; nothing else is served:
// pushes, other repositories, other keys.
func TestGitReadsCarryTheWorkersToken(t *testing.T) {
	root := t.TempDir()
	gittest.NewRemote(t, root, "svc", map[string]string{"README.md": "# svc\n"})
	gittest.NewRemote(t, root, "other", map[string]string{"README.md": "# other\n"})
	forge := gittest.ServeHTTP(t, root, forgeToken)
	// What the forge was sent.
	var mu sync.Mutex
	var seen []string
	backend := forge.Config.Handler
	forge.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+" "+r.URL.String())
		mu.Unlock()
		backend.ServeHTTP(w, r)
	})
	worker := &git.Git{Env: append(gittest.Env(), git.DefaultTokenEnv+"="+forgeToken), TokenOrigins: []string{forge.URL}, ScratchDir: t.TempDir()}
	gw := &gateway.Gateway{Git: &gateway.GitReads{Git: worker}}
	key, err := gw.Open(gateway.Sandbox{ID: "sb", Repositories: func() map[string]gateway.Repository {
		return map[string]gateway.Repository{
			"svc": {URL: forge.URL + "/svc.git", Depth: 1}, "elsewhere": {URL: "https://example.invalid/x.git"}, "local": {URL: "file:///srv/x.git"},
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	// What the gateway was asked, with the key (git's first request of
	// each clone carries none).
	var served []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pass, ok := r.BasicAuth(); ok && pass == key {
			mu.Lock()
			served = append(served, r.Method+" "+r.URL.Path)
			mu.Unlock()
		}
		gw.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	base := strings.Replace(srv.URL, "http://", "http://agent:"+key+"@", 1)

	dir := filepath.Join(t.TempDir(), "svc")
	for i, d := range []string{dir, filepath.Join(t.TempDir(), "again")} {
		mu.Lock()
		served = nil
		mu.Unlock()
		if out, err := gitCmd("clone", "--quiet", base+gateway.GitPrefix+"svc", d); err != nil {
			t.Fatalf("clone %d through the gateway: %v\n%s", i+1, err, out)
		}
		// Protocol v0: the references, then the pack; v2 (git's
		// default) asks for the references in a request of its own,
		// and each request is an upload-pack on the worker.
		mu.Lock()
		if want := []string{"GET /git/svc/info/refs", "POST /git/svc/git-upload-pack"}; !slices.Equal(served, want) {
			t.Errorf("clone %d asked the gateway %q; want %q", i+1, served, want)
		}
		mu.Unlock()
		if data, err := os.ReadFile(filepath.Join(d, "README.md")); err != nil || string(data) != "# svc\n" {
			t.Fatalf("README.md %q, %v", data, err)
		}
	}
	mu.Lock()
	authorized := 0
	for _, s := range seen {
		if strings.Contains(s, key) {
			t.Errorf("the forge was sent the sandbox's key: %q", s)
		}
		if strings.HasPrefix(s, "Basic ") {
			authorized++
		}
	}
	if authorized == 0 {
		t.Errorf("the forge was never sent the worker's token: %q", seen)
	}
	if n := len(seen); n == 0 || n > 2 {
		t.Errorf("the forge served %d requests for two clones; want the worker's one read (2 requests)", n)
	}
	mu.Unlock()
	copied, ok := gw.Copy("sb", "svc")
	if !ok {
		t.Fatal("no copy of svc for the sandbox")
	}
	if branch, err := copied.Head(t.Context()); err != nil || branch != "main" {
		t.Errorf("the copy's branch = %q, %v; want the default branch, main", branch, err)
	}

	for _, tc := range []struct {
		name, url string
		args      []string
		want      string
	}{
		{"a push", base + gateway.GitPrefix + "svc", []string{"push", "--quiet", "URL", "HEAD:refs/heads/x"}, "403"},
		{"a repository the task does not name", base + gateway.GitPrefix + "other", []string{"ls-remote", "URL"}, "the task names no repository other"},
		{"a repository not served over HTTP", base + gateway.GitPrefix + "local", []string{"ls-remote", "URL"}, "the task names no repository local this gateway serves"},
		{"another key", strings.Replace(base, key, key[:len(key)-1]+"x", 1) + gateway.GitPrefix + "svc", []string{"ls-remote", "URL"}, "not a key of a sandbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string(nil), tc.args...)
			for i, a := range args {
				if a == "URL" {
					args[i] = tc.url
				}
			}
			out, err := gitCmd(append([]string{"-C", dir}, args...)...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("git %s: %v, want an error %s:\n%s", tc.args[0], err, tc.want, out)
			}
		})
	}
	if refs, _ := gitCmd("--git-dir", filepath.Join(root, "svc.git"), "for-each-ref", "refs/heads/x"); refs != "" {
		t.Errorf("a push went through: %s", refs)
	}
	gw.Close(key)
	if out, err := gitCmd("ls-remote", base+gateway.GitPrefix+"svc"); err == nil || !strings.Contains(out, "not a key of a sandbox") {
		t.Errorf("a closed sandbox's key still reads: %v\n%s", err, out)
	}
	if _, err := os.Stat(copied.Dir()); !os.IsNotExist(err) {
		t.Errorf("the closed sandbox's copy is still there: %v", err)
	}
}

// With the worker's file roots, the gateway serves the local repositories
// under them, to sandboxes that cannot see the worker's files (pods), and
// no other local path: not one outside the roots, nor one a symbolic link
// under a root leads out of them to.
func TestGitReadsServeLocalRepositoriesUnderTheFileRoots(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	gittest.NewRemote(t, root, "svc", map[string]string{"README.md": "# svc\n"})
	gittest.NewRemote(t, outside, "secret", map[string]string{"README.md": "# secret\n"})
	if err := os.Symlink(filepath.Join(outside, "secret.git"), filepath.Join(root, "link.git")); err != nil {
		t.Fatal(err)
	}
	repos := map[string]gateway.Repository{
		"svc":     {URL: "file://" + filepath.Join(root, "svc.git")},
		"path":    {URL: filepath.Join(root, "svc.git")},
		"outside": {URL: "file://" + filepath.Join(outside, "secret.git")},
		"link":    {URL: "file://" + filepath.Join(root, "link.git")},
	}
	serve := func(roots []string) string {
		gw := &gateway.Gateway{Git: &gateway.GitReads{Git: &git.Git{Env: gittest.Env(), ScratchDir: t.TempDir()}, FileRoots: roots}}
		key, err := gw.Open(gateway.Sandbox{ID: "sb", Repositories: func() map[string]gateway.Repository { return repos }})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		return strings.Replace(srv.URL, "http://", "http://agent:"+key+"@", 1) + gateway.GitPrefix
	}
	base := serve([]string{root})
	for _, name := range []string{"svc", "path"} {
		d := filepath.Join(t.TempDir(), name)
		if out, err := gitCmd("clone", "--quiet", base+name, d); err != nil {
			t.Fatalf("clone %s through the gateway: %v\n%s", name, err, out)
		}
		if data, err := os.ReadFile(filepath.Join(d, "README.md")); err != nil || string(data) != "# svc\n" {
			t.Errorf("%s: README.md %q, %v", name, data, err)
		}
	}
	for _, name := range []string{"outside", "link"} {
		if out, err := gitCmd("ls-remote", base+name); err == nil || !strings.Contains(out, "the task names no repository "+name+" this gateway serves") {
			t.Errorf("ls-remote %s: %v, want it refused:\n%s", name, err, out)
		}
	}
	// Without roots, no local repository is served.
	if out, err := gitCmd("ls-remote", serve(nil)+"svc"); err == nil || !strings.Contains(out, "the task names no repository svc this gateway serves") {
		t.Errorf("ls-remote svc without file roots: %v, want it refused:\n%s", err, out)
	}
}

func gitCmd(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Env = append(gittest.Env(), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A pack request whose body git compressed (as it does when its wants
// and haves are large) is read as git http-backend reads it: the pack
// comes back; a body that says gzip and is not is refused.
func TestGitReadsTakeACompressedRequest(t *testing.T) {
	root := t.TempDir()
	remote := gittest.NewRemote(t, root, "svc", map[string]string{"README.md": "# svc\n"})
	tip, _ := gitCmd("--git-dir", remote, "rev-parse", "main")
	forge := gittest.ServeHTTP(t, root, forgeToken)
	worker := &git.Git{Env: append(gittest.Env(), git.DefaultTokenEnv+"="+forgeToken), TokenOrigins: []string{forge.URL}, ScratchDir: t.TempDir()}
	gw := &gateway.Gateway{Git: &gateway.GitReads{Git: worker}}
	key, err := gw.Open(gateway.Sandbox{ID: "sb", Repositories: func() map[string]gateway.Repository {
		return map[string]gateway.Repository{"svc": {URL: forge.URL + "/svc.git"}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close(key) })
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	post := func(body []byte, encoding string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+gateway.GitPrefix+"svc/git-upload-pack", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("agent", key)
		req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
		req.Header.Set("Content-Encoding", encoding)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	want := "want " + strings.TrimSpace(tip) + "\n"
	request := fmt.Sprintf("%04x%s0000%04xdone\n", 4+len(want), want, 4+len("done\n"))
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte(request))
	_ = zw.Close()
	if code, out := post(zipped.Bytes(), "gzip"); code != http.StatusOK || !strings.HasPrefix(out, "0008NAK\n") || !strings.Contains(out, "PACK") {
		t.Fatalf("a compressed request: %d %.60q; want NAK and the pack", code, out)
	}
	if code, _ := post([]byte(request), "gzip"); code != http.StatusBadRequest {
		t.Errorf("a request that says gzip and is not: %d, want 400", code)
	}
}
