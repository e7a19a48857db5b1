package git

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// CloneOptions say what to clone.
type CloneOptions struct {
	// Branch is checked out; empty means the remote's default branch.
	Branch string
	// Depth makes a shallow clone of that many commits; 0 means all.
	Depth int
	// Submodules clones submodules too; without it .gitmodules is never
	// followed.
	Submodules bool
}

// Clone clones one branch of url (o.Branch, else the remote's default)
// into dest, which must not exist or be empty, as `git clone
// --single-branch --no-tags` does: a unit's clone holds what the
// gateway's copy of its repository holds, whichever way it comes. Local
// paths are cloned through the transport (--no-local), so the clone never
// shares files or objects with its source, and no hooks are installed.
//
// Over http(s), without submodules, the objects are read in this process
// (cloneHTTP) and git checks the tree out (read-tree -u): an agent's
// clone from its gateway was six processes (git, git remote-http and
// git-remote-http, which loads libcurl, fetch-pack, unpack-objects,
// rev-list) and is one; `bench-peer`'s 50 repositories took fleetlift
// 3.27 s of CPU before, 2.76 s after. git alone writes the work tree, so
// the paths it refuses and the links it never writes through are the
// same either way.
func (g *Git) Clone(ctx context.Context, url, dest string, o CloneOptions) error {
	if err := CheckURL(url); err != nil {
		return err
	}
	args, err := cloneArgs([]string{"clone", "--quiet", "--no-local", "--template=", "--origin", "origin", "--single-branch", "--no-tags"}, o.Branch, o.Depth)
	if err != nil {
		return err
	}
	if isHTTP(url) && !o.Submodules {
		if err := g.cloneHTTPWork(ctx, url, dest, o); err != nil {
			return fmt.Errorf("clone %s: %w", Redact(url), err)
		}
		return nil
	}
	if o.Submodules {
		args = append(args, "--recurse-submodules")
		if o.Depth > 0 {
			args = append(args, "--shallow-submodules")
		}
	} else {
		args = append(args, "--no-recurse-submodules")
	}
	args = append(args, "--", url, dest)
	if _, err := g.run(ctx, invocation{dir: filepath.Dir(dest), args: args, remote: url}); err != nil {
		return fmt.Errorf("clone %s: %w", Redact(url), err)
	}
	return nil
}

// cloneHTTPWork is Clone of an http(s) url without submodules: the
// repository git clone makes (its configuration, the branch, its
// remote-tracking branch and origin/HEAD when the remote's HEAD names
// it), with the objects cloneHTTP reads, checked out by git. A clone
// that fails leaves dest as it found it (absent, or empty).
func (g *Git) cloneHTTPWork(ctx context.Context, url, dest string, o CloneOptions) (err error) {
	entries, statErr := os.ReadDir(dest)
	switch {
	case statErr == nil && len(entries) > 0:
		return fmt.Errorf("destination path %s already exists and is not an empty directory", dest)
	case statErr != nil && !errors.Is(statErr, fs.ErrNotExist):
		return statErr
	}
	made := statErr != nil
	if err := os.MkdirAll(dest, 0o777); err != nil {
		return err
	}
	defer func() {
		if err == nil {
			return
		}
		if made {
			os.RemoveAll(dest)
			return
		}
		left, _ := os.ReadDir(dest)
		for _, e := range left {
			os.RemoveAll(filepath.Join(dest, e.Name()))
		}
	}()
	gitDir := filepath.Join(dest, ".git")
	for _, d := range []string{"objects/info", "refs/heads", "refs/tags"} {
		if err := os.MkdirAll(filepath.Join(gitDir, d), 0o777); err != nil {
			return err
		}
	}
	b, err := g.cloneHTTP(ctx, url, o.Branch, o.Depth, gitDir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(gitDir, "config"), []byte(cloneConfig(url, b.name)), 0o666); err != nil {
		return err
	}
	tracking := "refs/remotes/origin/" + b.name
	if err := writeRef(gitDir, tracking, b.tip.String()); err != nil {
		return err
	}
	if b.remoteDefault {
		if err := writeRef(gitDir, "refs/remotes/origin/HEAD", "ref: "+tracking); err != nil {
			return err
		}
	}
	if _, err := g.run(ctx, invocation{dir: dest, args: []string{"read-tree", "--reset", "-u", "HEAD"}}); err != nil {
		return fmt.Errorf("check out %s: %w", b.name, err)
	}
	return nil
}

// cloneConfig is the configuration git clone writes for a clone of
// branch of url from remote origin, on its own branch of that name.
func cloneConfig(url, branch string) string {
	return "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n" +
		"[remote \"origin\"]\n\turl = " + configValue(url) + "\n\ttagopt = --no-tags\n\tfetch = " + configValue("+refs/heads/"+branch+":refs/remotes/origin/"+branch) + "\n" +
		"[branch " + configValue(branch) + "]\n\tremote = origin\n\tmerge = " + configValue("refs/heads/"+branch) + "\n"
}

// configValue is s quoted as git's configuration file quotes a value or
// a subsection's name. (The URLs CheckURL accepts and the branches
// CheckBranch accepts have no line break.)
func configValue(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// writeRef writes a loose reference of gitDir: an object id, or "ref: "
// and the reference it names.
func writeRef(gitDir, name, value string) error {
	p := filepath.Join(gitDir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(value+"\n"), 0o666)
}

// cloneArgs is args with what a clone of branch (the remote's default
// when empty), depth commits deep (all when 0), adds to them.
func cloneArgs(args []string, branch string, depth int) ([]string, error) {
	if branch != "" {
		if err := CheckBranch(branch); err != nil {
			return nil, err
		}
		args = append(args, "--branch", branch)
	}
	if depth > 0 {
		args = append(args, "--depth", strconv.Itoa(depth))
	}
	return args, nil
}

// CheckBranch refuses branch names git would not accept or could read as
// an option.
func CheckBranch(name string) error {
	if name == "" || strings.HasPrefix(name, "-") || strings.ContainsAny(name, " ~^:?*[\\\x7f") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//") ||
		strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") ||
		strings.HasPrefix(name, "/") || strings.Contains(name, "/.") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("invalid branch name %q", name)
	}
	for _, r := range name {
		if r < 0x20 {
			return fmt.Errorf("invalid branch name %q", name)
		}
	}
	return nil
}

// RevParse resolves rev to a commit id in the repository at dir.
func (g *Git) RevParse(ctx context.Context, dir, rev string) (string, error) {
	if rev == "" || strings.HasPrefix(rev, "-") {
		return "", fmt.Errorf("invalid revision %q", rev)
	}
	out, err := g.Run(ctx, dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", rev, err)
	}
	return strings.TrimSpace(out), nil
}

// Head returns the commit checked out at dir and its branch ("" when
// HEAD is detached), read in this process (an agent asks once a clone).
func (g *Git) Head(ctx context.Context, dir string) (commit, branch string, _ error) {
	st, _, err := g.repoStorage(ctx, dir)
	if err != nil {
		return "", "", fmt.Errorf("resolve HEAD: %w", err)
	}
	head, err := st.Reference(plumbing.HEAD)
	if err != nil {
		return "", "", fmt.Errorf("resolve HEAD: %w", err)
	}
	ref := head
	if head.Type() == plumbing.SymbolicReference {
		if !head.Target().IsBranch() {
			return "", "", fmt.Errorf("resolve HEAD: it names %s, not a branch", head.Target())
		}
		branch = head.Target().Short()
		if ref, err = storer.ResolveReference(st, head.Target()); err != nil {
			return "", "", fmt.Errorf("resolve HEAD: %s: %w", head.Target(), err)
		}
	}
	c, err := object.GetCommit(st, ref.Hash())
	if err != nil {
		return "", "", fmt.Errorf("resolve HEAD: %s is not a commit: %w", ref.Hash(), err)
	}
	return c.Hash.String(), branch, nil
}

// Proposed is the commit to propose: id when set (it must be a full
// object id), otherwise rev resolved in the clone at dir.
func (g *Git) Proposed(ctx context.Context, dir, id, rev string) (string, error) {
	if id == "" {
		return g.RevParse(ctx, dir, rev)
	}
	if !IsObjectID(id) {
		return "", fmt.Errorf("commit %q is not an object id", id)
	}
	return id, nil
}

// CurrentBranch is the branch checked out at dir, or "" when HEAD is
// detached.
func (g *Git) CurrentBranch(ctx context.Context, dir string) (string, error) {
	out, err := g.Run(ctx, dir, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil {
		if exitCode(err) == 1 {
			return "", nil
		}
		return "", fmt.Errorf("current branch: %w", err)
	}
	return strings.TrimSpace(out), nil
}

// neutralFilters switches off every filter driver the repository's
// configuration defines, so staging or checking out never runs a command
// that an agent wrote into .git/config.
func (g *Git) neutralFilters(ctx context.Context, dir string) ([]string, error) {
	if definesNoFilter(dir) {
		return nil, nil
	}
	out, err := g.Run(ctx, dir, "config", "--null", "--name-only", "--get-regexp", `^filter\.`)
	if err != nil {
		if exitCode(err) == 1 {
			return nil, nil
		}
		return nil, fmt.Errorf("read filter configuration: %w", err)
	}
	seen := map[string]bool{}
	var cfg []string
	for _, key := range strings.Split(out, "\x00") {
		key = strings.TrimSpace(key)
		i := strings.LastIndexByte(key, '.')
		if i <= len("filter.") {
			continue
		}
		name := key[len("filter."):i]
		if seen[name] {
			continue
		}
		seen[name] = true
		if strings.ContainsAny(name, "=\n") {
			return nil, fmt.Errorf("refusing filter driver with name %q", name)
		}
		for _, k := range []string{"clean", "smudge", "process"} {
			cfg = append(cfg, "filter."+name+"."+k+"=")
		}
		cfg = append(cfg, "filter."+name+".required=false")
	}
	return cfg, nil
}

// definesNoFilter reports whether the configuration git reads in the
// clone at dir plainly defines no filter driver, without starting git
// (a process a unit, of about a dozen). Git reads no system or global
// configuration here (environ), so what the clone's .git/config says is
// all there is, unless it names another file (include, includeIf, or a
// worktree's configuration with extensions.worktreeConfig). A driver is
// a section named filter, and git's section names have no escapes, so a
// file that spells none of "filter", "include" and "worktreeconfig", in
// any case, defines none and names no file that could. Anything else (a
// .git that is a file or a link, a configuration that is not a plain
// file) is left to git.
func definesNoFilter(dir string) bool {
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
		return false
	}
	config := filepath.Join(gitDir, "config")
	if fi, err := os.Lstat(config); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	data, err := os.ReadFile(config)
	if err != nil {
		return false
	}
	data = bytes.ToLower(data)
	for _, word := range []string{"filter", "include", "worktreeconfig"} {
		if bytes.Contains(data, []byte(word)) {
			return false
		}
	}
	return true
}

// worktree runs local commands in a clone with the filter drivers of its
// configuration switched off, so staging, diffing or committing never runs
// a command that an agent wrote into .git/config.
type worktree struct {
	g   *Git
	dir string
	cfg []string
}

func (g *Git) worktree(ctx context.Context, dir string) (*worktree, error) {
	cfg, err := g.neutralFilters(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &worktree{g: g, dir: dir, cfg: cfg}, nil
}

func (w *worktree) run(ctx context.Context, inv invocation) (string, error) {
	inv.dir = w.dir
	inv.config = append(append([]string(nil), w.cfg...), inv.config...)
	return w.g.run(ctx, inv)
}

// stage records the whole work tree in the index (git add --all).
func (w *worktree) stage(ctx context.Context) error {
	if _, err := w.run(ctx, invocation{args: []string{"add", "--all", "--", "."}}); err != nil {
		return fmt.Errorf("stage changes: %w", err)
	}
	return nil
}

// writeTree records the index as a tree (git write-tree) and returns its
// id.
func (w *worktree) writeTree(ctx context.Context) (string, error) {
	out, err := w.run(ctx, invocation{args: []string{"write-tree"}})
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// Stage records the whole work tree in the index (git add -A), with
// filter drivers switched off. Symbolic links are staged as links; their
// targets are never read.
func (g *Git) Stage(ctx context.Context, dir string) error {
	w, err := g.worktree(ctx, dir)
	if err != nil {
		return err
	}
	return w.stage(ctx)
}

// Snapshot stages the work tree and returns the id of the tree it amounts
// to: two equal snapshots mean nothing changed in between.
func (g *Git) Snapshot(ctx context.Context, dir string) (string, error) {
	w, err := g.worktree(ctx, dir)
	if err != nil {
		return "", err
	}
	if err := w.stage(ctx); err != nil {
		return "", err
	}
	id, err := w.writeTree(ctx)
	if err != nil {
		return "", fmt.Errorf("snapshot work tree: %w", err)
	}
	return id, nil
}

// Identity is who commits.
type Identity struct {
	Name  string
	Email string
}

// CommitOptions describe a commit.
type CommitOptions struct {
	// Branch, when set, is created or reset at the current HEAD (keeping
	// the work tree) and checked out before committing.
	Branch  string
	Message string
	Author  Identity
}

// ErrNoChanges is returned by Commit when the work tree has no changes.
var ErrNoChanges = errors.New("no changes to commit")

// Commit stages the whole work tree and commits it, on o.Branch when set,
// without running hooks or signing. It returns the new commit id, or
// ErrNoChanges.
func (g *Git) Commit(ctx context.Context, dir string, o CommitOptions) (string, error) {
	env, err := o.Author.env()
	if err != nil {
		return "", err
	}
	w, err := g.worktree(ctx, dir)
	if err != nil {
		return "", err
	}
	if o.Branch != "" {
		if err := CheckBranch(o.Branch); err != nil {
			return "", err
		}
		if _, err := w.run(ctx, invocation{args: []string{"checkout", "--quiet", "-B", o.Branch}}); err != nil {
			return "", fmt.Errorf("check out branch %s: %w", o.Branch, err)
		}
	}
	if err := w.stage(ctx); err != nil {
		return "", err
	}
	if _, err := w.run(ctx, invocation{args: []string{"diff", "--cached", "--quiet", "--no-ext-diff"}}); err == nil {
		return "", ErrNoChanges
	} else if exitCode(err) != 1 {
		return "", fmt.Errorf("check staged changes: %w", err)
	}
	msg := o.Message
	if strings.TrimSpace(msg) == "" {
		msg = "fleetlift changes"
	}
	_, err = w.run(ctx, invocation{
		args:  []string{"commit", "--quiet", "--no-verify", "--no-gpg-sign", "--file=-"},
		stdin: strings.NewReader(msg),
		env:   env,
	})
	if err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	return g.RevParse(ctx, dir, "HEAD")
}

// resolved is id with the zero fields filled (the zero Identity is
// fleetlift), or an error when it cannot sign a commit.
func (id Identity) resolved() (Identity, error) {
	id.Name, id.Email = cmp.Or(id.Name, "fleetlift"), cmp.Or(id.Email, "fleetlift@localhost")
	if strings.ContainsAny(id.Name+id.Email, "<>\n\x00") {
		return Identity{}, fmt.Errorf("invalid commit identity %q <%s>", id.Name, id.Email)
	}
	return id, nil
}

// env is the environment that makes id the author and committer of a
// commit.
func (id Identity) env() ([]string, error) {
	id, err := id.resolved()
	if err != nil {
		return nil, err
	}
	name, email := id.Name, id.Email
	return []string{
		"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email,
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email,
	}, nil
}

// TreeCommit describes a commit of a tree already recorded (see Changes).
type TreeCommit struct {
	Tree    string
	Parent  string
	Message string
	Author  Identity
}

// CommitTree records o.Tree as a commit on o.Parent, authored and
// committed now by o.Author, and returns its id: a loose object written
// in this process, as Scratch.CommitTree writes one, with no hook or
// signing. The work tree, the index and HEAD are left as they are: the
// commit is exactly the tree, whatever the work tree holds now. Push it
// by id, or Bundle it.
func (g *Git) CommitTree(ctx context.Context, dir string, o TreeCommit) (string, error) {
	if len(o.Tree) != 40 || len(o.Parent) != 40 || !IsObjectID(o.Tree) || !IsObjectID(o.Parent) {
		return "", fmt.Errorf("commit tree: tree %q and parent %q must be SHA-1 object ids", o.Tree, o.Parent)
	}
	msg := o.Message
	if strings.TrimSpace(msg) == "" {
		msg = "fleetlift changes"
	}
	st, objects, err := g.repoStorage(ctx, dir)
	if err != nil {
		return "", err
	}
	if _, err := st.EncodedObject(plumbing.TreeObject, plumbing.NewHash(o.Tree)); err != nil {
		return "", fmt.Errorf("commit tree: %s is not a tree of %s: %w", o.Tree, dir, err)
	}
	if _, err := st.EncodedObject(plumbing.CommitObject, plumbing.NewHash(o.Parent)); err != nil {
		return "", fmt.Errorf("commit tree: %s is not a commit of %s: %w", o.Parent, dir, err)
	}
	data, err := commitObject(o.Tree, []string{o.Parent}, o.Author, msg, time.Now())
	if err != nil {
		return "", err
	}
	id, err := writeLooseObject(objects, "commit", data)
	if err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	return id, nil
}

// IsObjectID reports whether s is a full object id (SHA-1 or SHA-256, in
// lower-case hex), which needs no lookup to be used as a revision.
func IsObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
