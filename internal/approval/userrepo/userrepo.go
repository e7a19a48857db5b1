package userrepo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fleetlift/fleetlift/internal/approval"
)

// Clone is a work tree of the user's.
type Clone struct {
	dir string
}

// Open opens the work tree dir is in, at its top level; it fails when dir
// is in none.
func Open(ctx context.Context, dir string) (*Clone, error) {
	top, err := (&Clone{dir: dir}).Output(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	return &Clone{dir: strings.TrimSpace(top)}, nil
}

// Dir is the top level of the work tree.
func (c *Clone) Dir() string { return c.dir }

// Output runs git with args in the work tree and returns its standard
// output. A failure says the command and what git wrote to its standard
// error.
func (c *Clone) Output(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", c.dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Run runs git with args in the work tree.
func (c *Clone) Run(ctx context.Context, args ...string) error {
	_, err := c.Output(ctx, args...)
	return err
}

// ConfigValue is a git config value, "" when unset.
func (c *Clone) ConfigValue(ctx context.Context, key string) string {
	v, err := c.Output(ctx, "config", "--get", key)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(v)
}

// Login is who decides when nobody says: git config fleetlift.login, else
// user.name, and which of them it came from.
func (c *Clone) Login(ctx context.Context) (login, from string) {
	if v := c.ConfigValue(ctx, "fleetlift.login"); v != "" {
		return v, "git config fleetlift.login"
	}
	return c.ConfigValue(ctx, "user.name"), "git config user.name"
}

// Identity is who a commit made now would be by.
type Identity struct {
	Author, Committer approval.Identity
}

// Identity is who a commit made now in the work tree would be by.
func (c *Clone) Identity(ctx context.Context) (Identity, error) {
	var id Identity
	for _, v := range []struct {
		name string
		into *approval.Identity
	}{{"GIT_AUTHOR_IDENT", &id.Author}, {"GIT_COMMITTER_IDENT", &id.Committer}} {
		s, err := c.Output(ctx, "var", v.name)
		if err != nil {
			return id, fmt.Errorf("your Git identity: %w", err)
		}
		// "Name <email> 1700000000 +0000"
		name, rest, _ := strings.Cut(s, " <")
		email, _, _ := strings.Cut(rest, ">")
		*v.into = approval.Identity{Name: name, Email: email}
	}
	return id, nil
}

// CurrentBranch is the branch checked out; it fails when HEAD is
// detached.
func (c *Clone) CurrentBranch(ctx context.Context) (string, error) {
	b, err := c.Output(ctx, "symbolic-ref", "--quiet", "--short", "HEAD")
	return strings.TrimSpace(b), err
}

// RemoteURL is the URL of remote.
func (c *Clone) RemoteURL(ctx context.Context, remote string) (string, error) {
	url, err := c.Output(ctx, "remote", "get-url", remote)
	return strings.TrimSpace(url), err
}

// path is the file name (slash-separated, relative to the top level) in
// the work tree.
func (c *Clone) path(name string) string {
	return filepath.Join(c.dir, filepath.FromSlash(name))
}

// Has reports whether the work tree has the file name (slash-separated).
func (c *Clone) Has(name string) bool {
	_, err := os.Stat(c.path(name))
	return err == nil
}

// ReadFile reads the file name (slash-separated) of the work tree.
func (c *Clone) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(c.path(name))
}

// WriteFile writes the file name (slash-separated) of the work tree,
// making its directory when there is none.
func (c *Clone) WriteFile(name string, data []byte) error {
	p := c.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// Commit commits the files names (slash-separated), and only them
// (whatever else is staged stays staged), and returns the new commit, or
// "" when HEAD already has them as they are.
func (c *Clone) Commit(ctx context.Context, message string, names []string) (string, error) {
	paths := append([]string{"--"}, names...)
	if err := c.Run(ctx, append([]string{"add"}, paths...)...); err != nil {
		return "", err
	}
	// Exit 1 means the files differ from HEAD's.
	if err := c.Run(ctx, append([]string{"diff", "--cached", "--quiet", "HEAD"}, paths...)...); err == nil {
		return "", nil
	}
	if err := c.Run(ctx, append([]string{"commit", "--quiet", "--message", message}, paths...)...); err != nil {
		return "", err
	}
	sha, err := c.Output(ctx, "rev-parse", "HEAD")
	return strings.TrimSpace(sha), err
}

// Push pushes HEAD to ref on remote.
func (c *Clone) Push(ctx context.Context, remote, ref string) error {
	return c.Run(ctx, "push", "--quiet", remote, "HEAD:"+ref)
}
