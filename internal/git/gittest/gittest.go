package gittest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// LinkPrefix marks a file whose content, after the prefix, is the target of
// a symbolic link.
const LinkPrefix = "symlink:"

// Env is the environment fixtures run git with: no user or system
// configuration, a fixed identity.
func Env() []string {
	return append(os.Environ(),
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
		"GIT_TERMINAL_PROMPT=0",
	)
}

// Run runs git in dir for a fixture and returns its trimmed output.
func Run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always"}, args...)...)
	cmd.Dir = dir
	cmd.Env = Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// WriteFiles writes files (path -> content, or LinkPrefix+target for a
// symbolic link) under dir.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Remove(p)
		if target, ok := strings.CutPrefix(content, LinkPrefix); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// NewRemote creates a bare repository <parent>/<name>.git whose main
// branch has one commit holding files, and returns its path. parent is a
// new temporary directory when empty.
func NewRemote(t testing.TB, parent, name string, files map[string]string) string {
	t.Helper()
	if parent == "" {
		parent = t.TempDir()
	}
	bare := filepath.Join(parent, name+".git")
	Run(t, parent, "init", "--quiet", "--bare", bare)
	work := t.TempDir()
	Run(t, work, "init", "--quiet")
	WriteFiles(t, work, files)
	Run(t, work, "add", "-A")
	Run(t, work, "commit", "--quiet", "--allow-empty", "-m", "initial")
	Run(t, work, "push", "--quiet", bare, "HEAD:refs/heads/main")
	return bare
}

// Show reads files on the branches of the bare repository bare (owned
// by anyone: safe.directory is waived): show(branch, path) is the file,
// "" when the branch or the file is missing.
func Show(bare string) func(branch, path string) string {
	return func(branch, path string) string {
		out, err := exec.Command("git", "-c", "safe.directory=*", "--git-dir", bare, "show", branch+":"+path).Output()
		if err != nil {
			return ""
		}
		return string(out)
	}
}

// Commit adds a commit with files to branch of the bare repository and
// returns the commit id.
func Commit(t testing.TB, bare, branch string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	Run(t, work, "clone", "--quiet", "--branch", branch, bare, ".")
	WriteFiles(t, work, files)
	Run(t, work, "add", "-A")
	Run(t, work, "commit", "--quiet", "-m", "change")
	Run(t, work, "push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	return Run(t, work, "rev-parse", "HEAD")
}

// AddSubmodule records sub (a repository path or URL) as a submodule at
// path in the main branch of the bare repository.
func AddSubmodule(t testing.TB, bare, sub, path string) {
	t.Helper()
	work := t.TempDir()
	Run(t, work, "clone", "--quiet", bare, ".")
	Run(t, work, "submodule", "--quiet", "add", sub, path)
	Run(t, work, "commit", "--quiet", "-m", "add submodule")
	Run(t, work, "push", "--quiet", "origin", "HEAD:refs/heads/main")
}

// ServeHTTP serves the bare repositories under root over git's smart
// HTTP protocol (git-http-backend) on loopback, asking for basic
// authentication with the given password.
func ServeHTTP(t testing.TB, root, password string) *httptest.Server {
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
