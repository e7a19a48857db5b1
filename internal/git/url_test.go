package git_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
)

func TestCheckURL(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		refused string // part of the error, "" when accepted
	}{
		{"https", "https://github.com/acme/api.git", ""},
		{"ssh", "ssh://git@github.com/acme/api.git", ""},
		{"scp-like", "git@github.com:acme/api.git", ""},
		{"file", "file:///srv/git/api.git", ""},
		{"local path", "/srv/git/api.git", ""},
		{"http to loopback", "http://127.0.0.1:8080/api.git", ""},
		{"http elsewhere", "http://example.com/api.git", "loopback"},
		{"token in URL", "https://x:ghp_secret@github.com/acme/api.git", "credentials"},
		{"ssh password", "ssh://git:pw@host/x.git", "password"},
		{"ext transport", "ext::sh -c touch% /tmp/pwned", "remote helper"},
		{"fd transport", "fd::17", "remote helper"},
		{"git protocol", "git://host/x.git", "not allowed"},
		{"option", "--upload-pack=touch /tmp/x", "starts with '-'"},
		{"newline", "https://host/x\nprotocol=https", "control character"},
		{"empty", "", "empty"},
		{"scp-like without user", "github.com:acme/api.git", ""},
		{"relative path", "repos/api.git", "absolute"},
		{"parent directory", "/srv/git/../../etc", "'..'"},
		{"parent directory in file URL", "file:///srv/../etc/x.git", "'..'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := git.CheckURL(tt.url)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("CheckURL(%q) = %v, want accepted", tt.url, err)
			case tt.refused != "" && err == nil:
				t.Fatalf("CheckURL(%q) accepted, want refused (%s)", tt.url, tt.refused)
			case err != nil && !strings.Contains(err.Error(), tt.refused):
				t.Fatalf("CheckURL(%q) = %v, want it to mention %q", tt.url, err, tt.refused)
			}
			if err != nil && strings.Contains(err.Error(), "ghp_secret") {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"api", true},
		{"api-server_2.v1", true},
		{"../etc", false},
		{"a/b", false},
		{"..", false},
		{"a..b", false},
		{".git", false},
		{"-rf", false},
		{"", false},
		{"a b", false},
		{strings.Repeat("a", 100), true},
		{strings.Repeat("a", 101), false},
		{"a" + strings.Repeat(".", 100), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := git.ValidateName(tt.name); (err == nil) != tt.ok {
				t.Fatalf("ValidateName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
			}
		})
	}
}

func TestSafeJoin(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "targets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "targets", "api")); err != nil {
		t.Fatal(err)
	}
	resolved, _ := filepath.EvalSymlinks(root)
	tests := []struct {
		name  string
		elems []string
		want  string // "" means refused
	}{
		{"new directory", []string{"svc"}, filepath.Join(resolved, "svc")},
		{"under an existing directory", []string{"targets", "web"}, filepath.Join(resolved, "targets", "web")},
		{"parent directory", []string{".."}, ""},
		{"dot-dot inside a name", []string{"../etc"}, ""},
		{"symlinked component", []string{"linked", "svc"}, ""},
		{"symlinked leaf", []string{"targets", "api"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := git.SafeJoin(root, tt.elems...)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("SafeJoin(%v) = %s, want refused", tt.elems, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("SafeJoin(%v) = %q, %v; want %q", tt.elems, got, err, tt.want)
			}
		})
	}
}

// A local repository that is not there says so when it would be under an
// allowed directory, and only then: of a path elsewhere (through a
// symbolic link too) nothing is said but that it is not allowed.
func TestCheckLocalMissing(t *testing.T) {
	allowed, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(allowed, "out")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{filepath.Join(allowed, "svc.git"), "does not exist: nothing is at " + filepath.Join(allowed, "svc.git") + " (under --allow-file-root " + allowed + ")"},
		{filepath.Join(allowed, "team", "svc.git"), "does not exist: nothing is at " + filepath.Join(allowed, "team", "svc.git")},
		{filepath.Join(elsewhere, "svc.git"), "is outside the directories this worker may use"},
		{filepath.Join(allowed, "out", "svc.git"), "is outside the directories this worker may use"},
		{filepath.Join(allowed, "..", filepath.Base(elsewhere), "svc.git"), "is outside the directories this worker may use"},
	} {
		err := git.CheckLocal("file://"+tc.path, []string{allowed})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.path, err, tc.want)
		}
	}
}
