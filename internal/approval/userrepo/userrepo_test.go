package userrepo_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/approval/userrepo"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestClone: the clone is opened at its top level from a subdirectory,
// its user's identity and login are theirs, and a commit takes the named
// files only, once.
func TestClone(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	ctx := context.Background()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "config", "user.name", "robin")
	git(t, dir, "config", "user.email", "robin@example.com")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "Start")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}

	if _, err := userrepo.Open(ctx, t.TempDir()); err == nil {
		t.Errorf("Open of a directory in no work tree succeeded")
	}
	c, err := userrepo.Open(ctx, filepath.Join(dir, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	if top, _ := filepath.EvalSymlinks(dir); c.Dir() != top {
		t.Errorf("Dir %s, want the top level %s", c.Dir(), top)
	}
	if login, from := c.Login(ctx); login != "robin" || from != "git config user.name" {
		t.Errorf("Login = %q from %q", login, from)
	}
	git(t, dir, "config", "fleetlift.login", "robin-gh")
	if login, from := c.Login(ctx); login != "robin-gh" || from != "git config fleetlift.login" {
		t.Errorf("Login = %q from %q", login, from)
	}
	id, err := c.Identity(ctx)
	if want := (approval.Identity{Name: "robin", Email: "robin@example.com"}); err != nil || id.Author != want || id.Committer != want {
		t.Errorf("Identity = %+v, %v", id, err)
	}
	if b, err := c.CurrentBranch(ctx); b != "main" || err != nil {
		t.Errorf("CurrentBranch = %q, %v", b, err)
	}

	// Something else is staged: it stays staged, out of the commit.
	if err := c.WriteFile("other.txt", []byte("other\n")); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "other.txt")
	if err := c.WriteFile("approvals/a.yaml", []byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if !c.Has("approvals/a.yaml") || c.Has("approvals/b.yaml") {
		t.Errorf("Has does not see what was written")
	}
	sha, err := c.Commit(ctx, "Approve a", []string{"approvals/a.yaml"})
	if err != nil || sha != git(t, dir, "rev-parse", "HEAD") {
		t.Fatalf("Commit = %q, %v", sha, err)
	}
	if files := git(t, dir, "show", "--name-only", "--format=", "HEAD"); files != "approvals/a.yaml" {
		t.Errorf("the commit has %q, want approvals/a.yaml alone", files)
	}
	if st := git(t, dir, "status", "--porcelain"); st != "A  other.txt" {
		t.Errorf("status after the commit: %q", st)
	}
	if sha, err := c.Commit(ctx, "Approve a", []string{"approvals/a.yaml"}); sha != "" || err != nil {
		t.Errorf("Commit of what HEAD has = %q, %v; want nothing", sha, err)
	}
	if b, err := c.ReadFile("approvals/a.yaml"); string(b) != "a\n" || err != nil {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
}
