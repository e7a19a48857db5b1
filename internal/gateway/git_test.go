package gateway_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

const forgeToken = "forge-token-canary-0123456789"

// A sandbox's agent clones the repositories its task names through the
// gateway with its own key: the forge gets the worker's token, never the
// key; nothing else is served: pushes, other repositories, other keys.
func TestGitReadsCarryTheWorkersToken(t *testing.T) {
	root := t.TempDir()
	gittest.NewRemote(t, root, "svc", map[string]string{"README.md": "# svc\n"})
	gittest.NewRemote(t, root, "other", map[string]string{"README.md": "# other\n"})
	forge := gittest.ServeHTTP(t, root, forgeToken)
	// What the forge was sent.
	var mu sync.Mutex
	var seen []string
	rec := http.DefaultTransport.(*http.Transport).Clone()
	gw := &gateway.Gateway{Git: &gateway.GitReads{
		Credential: func(url string) string {
			if strings.HasPrefix(url, forge.URL+"/") {
				return "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+forgeToken))
			}
			return ""
		},
		Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			seen = append(seen, r.Header.Get("Authorization")+" "+r.URL.String())
			mu.Unlock()
			return rec.RoundTrip(r)
		}),
	}}
	key, err := gw.Open(gateway.Sandbox{ID: "sb", Repositories: func() map[string]string {
		return map[string]string{"svc": forge.URL + "/svc.git", "elsewhere": "https://example.invalid/x.git", "local": "file:///srv/x.git"}
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	base := strings.Replace(srv.URL, "http://", "http://agent:"+key+"@", 1)

	dir := filepath.Join(t.TempDir(), "svc")
	if out, err := gitCmd("clone", "--quiet", base+gateway.GitPrefix+"svc", dir); err != nil {
		t.Fatalf("clone through the gateway: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "README.md")); err != nil || string(data) != "# svc\n" {
		t.Fatalf("README.md %q, %v", data, err)
	}
	mu.Lock()
	for _, s := range seen {
		if strings.Contains(s, key) || !strings.Contains(s, "Basic ") {
			t.Errorf("the forge was sent %q", s)
		}
	}
	mu.Unlock()

	for _, tc := range []struct {
		name, url string
		args      []string
		want      string
	}{
		{"a push", base + gateway.GitPrefix + "svc", []string{"push", "--quiet", "URL", "HEAD:refs/heads/x"}, "403"},
		{"a repository the task does not name", base + gateway.GitPrefix + "other", []string{"ls-remote", "URL"}, "the task names no repository other"},
		{"a repository not served over HTTP", base + gateway.GitPrefix + "local", []string{"ls-remote", "URL"}, "the task names no repository local served over HTTP"},
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
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func gitCmd(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Env = append(gittest.Env(), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
