package git

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Scratch is a temporary bare repository whose configuration fleetlift
// wrote. Every command that carries credentials runs in one, so nothing in
// a clone's .git/config (credential helpers, url rewrites, proxies, ssh
// commands) takes part. A scratch may borrow the objects of a clone
// (read-only, through objects/info/alternates) to push its commits.
type Scratch struct {
	g   *Git
	dir string
}

// NewScratch creates a scratch repository; borrow, when not empty, is a
// clone whose objects it can read. Close removes it.
func (g *Git) NewScratch(ctx context.Context, borrow string) (*Scratch, error) {
	dir, err := g.scratchDir("fleetlift-git-")
	if err != nil {
		return nil, err
	}
	s := &Scratch{g: g, dir: dir}
	if err := initBare(dir); err != nil {
		s.Close()
		return nil, fmt.Errorf("create scratch repository: %w", err)
	}
	if borrow != "" {
		if err := s.Borrow(ctx, borrow); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// scratchDir makes a new directory for a scratch repository in
// ScratchDir, itself made when missing.
func (g *Git) scratchDir(prefix string) (string, error) {
	if g.ScratchDir != "" {
		if err := os.MkdirAll(g.ScratchDir, 0o700); err != nil {
			return "", fmt.Errorf("create scratch repository: %w", err)
		}
	}
	dir, err := os.MkdirTemp(g.ScratchDir, prefix)
	if err != nil {
		return "", fmt.Errorf("create scratch repository: %w", err)
	}
	return dir, nil
}

// initBare lays out an empty bare SHA-1 repository, the least of what
// `git init --bare --template=` makes that git takes for one (HEAD,
// config, objects, refs; git adds the rest when it needs it), without
// running git: a scratch is made for every push.
func initBare(dir string) error {
	for _, d := range []string{"objects/info", "refs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
}

// Borrow makes the clone's objects (and its list of shallow commits) the
// ones the scratch reads besides its own, in place of any it borrowed
// before: a scratch can serve one clone after another.
func (s *Scratch) Borrow(ctx context.Context, clone string) error {
	clone, err := filepath.Abs(clone)
	if err != nil {
		return fmt.Errorf("borrow objects: %w", err)
	}
	objects, shallow, err := s.g.gitPaths(ctx, clone)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "objects", "info", "alternates"), []byte(objects+"\n"), 0o644); err != nil {
		return fmt.Errorf("borrow objects: %w", err)
	}
	data, err := os.ReadFile(shallow)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Remove(filepath.Join(s.dir, "shallow")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("forget shallow commits: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read shallow commits of %s: %w", clone, err)
	default:
		if err := os.WriteFile(filepath.Join(s.dir, "shallow"), data, 0o644); err != nil {
			return fmt.Errorf("copy shallow commits: %w", err)
		}
	}
	return nil
}

// gitPaths returns where the clone at dir (an absolute path) keeps its
// objects and its list of shallow commits.
func (g *Git) gitPaths(ctx context.Context, dir string) (objects, shallow string, _ error) {
	if isBare(dir) {
		// What git answers for it, without starting git: a copy or a
		// scratch is pushed from once per change.
		return filepath.Join(dir, "objects"), filepath.Join(dir, "shallow"), nil
	}
	if gd := filepath.Join(dir, ".git"); isBare(gd) {
		// A clone's own .git directory (not a link, not a worktree's),
		// as git finds it: an agent's clone, bundled once per change.
		if fi, err := os.Lstat(gd); err == nil && fi.IsDir() {
			return filepath.Join(gd, "objects"), filepath.Join(gd, "shallow"), nil
		}
	}
	// --path-format=absolute needs git 2.31; relative answers are
	// relative to the clone.
	paths, err := g.Run(ctx, dir, "rev-parse", "--git-path", "objects", "--git-path", "shallow")
	if err != nil {
		return "", "", fmt.Errorf("find objects of %s: %w", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(paths), "\n")
	if len(lines) != 2 {
		return "", "", fmt.Errorf("find objects of %s: unexpected %q", dir, paths)
	}
	for i, p := range lines {
		if !filepath.IsAbs(p) {
			lines[i] = filepath.Join(dir, p)
		}
	}
	return lines[0], lines[1], nil
}

// isBare reports whether dir is a bare repository as git itself finds
// one when started in it (no .git in it; HEAD a file naming a reference,
// objects and refs directories) and shares nothing with another
// (commondir): its objects and shallow list are then dir's own.
func isBare(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if _, err := os.Lstat(filepath.Join(dir, "commondir")); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	for _, d := range []string{"objects", "refs"} {
		if fi, err := os.Lstat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			return false
		}
	}
	head, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	return err == nil && bytes.HasPrefix(head, []byte("ref: refs/"))
}

// Dir is the scratch repository's directory.
func (s *Scratch) Dir() string { return s.dir }

// Close removes the scratch repository.
func (s *Scratch) Close() error { return os.RemoveAll(s.dir) }

// Run runs a local git command in the scratch repository.
func (s *Scratch) Run(ctx context.Context, args ...string) (string, error) {
	return s.g.run(ctx, invocation{dir: s.dir, gitDir: s.dir, args: args})
}

// RunInput is Run with stdin.
func (s *Scratch) RunInput(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	return s.g.run(ctx, invocation{dir: s.dir, gitDir: s.dir, args: args, stdin: stdin})
}

// Fetch fetches refspecs from url into the scratch repository.
func (s *Scratch) Fetch(ctx context.Context, url string, refspecs ...string) error {
	return s.fetch(ctx, url, nil, refspecs)
}

// fetch fetches refspecs from url into the scratch repository with the
// options opts.
func (s *Scratch) fetch(ctx context.Context, url string, opts, refspecs []string) error {
	if err := CheckURL(url); err != nil {
		return err
	}
	args := append([]string{"fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head"}, opts...)
	args = append(append(args, "--", url), refspecs...)
	if _, err := s.g.run(ctx, invocation{dir: s.dir, gitDir: s.dir, args: args, remote: url}); err != nil {
		return fmt.Errorf("fetch from %s: %w", Redact(url), err)
	}
	return nil
}

// LsRemote returns the object ids of refs (full names) in url; refs that
// do not exist are missing from the map. With no refs it lists all.
func (s *Scratch) LsRemote(ctx context.Context, url string, refs ...string) (map[string]string, error) {
	if err := CheckURL(url); err != nil {
		return nil, err
	}
	args := append([]string{"ls-remote", "--", url}, refs...)
	out, err := s.g.run(ctx, invocation{dir: s.dir, gitDir: s.dir, args: args, remote: url})
	if err != nil {
		return nil, fmt.Errorf("list refs of %s: %w", Redact(url), err)
	}
	want := map[string]bool{}
	for _, r := range refs {
		want[r] = true
	}
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		id, ref, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok || (len(refs) > 0 && !want[ref]) {
			continue
		}
		got[ref] = id
	}
	return got, nil
}

// RefUpdate is one ref to push.
type RefUpdate struct {
	// Src is what to push: an object id, or for Git.Push a revision in
	// the clone.
	Src string
	// Dst is the full ref name in the remote (refs/heads/x).
	Dst string
	// Lease, when set, pushes only if Dst in the remote is Expect (the
	// empty string: Dst must not exist), and then may rewrite history
	// (--force-with-lease).
	Lease  bool
	Expect string
}

// Push pushes updates to url, atomically when there are several.
func (s *Scratch) Push(ctx context.Context, url string, updates ...RefUpdate) error {
	_, err := s.push(ctx, url, updates)
	return err
}

// push pushes updates to url and returns the refs it created there (git
// push --porcelain's "*" lines), in the order given.
func (s *Scratch) push(ctx context.Context, url string, updates []RefUpdate) ([]string, error) {
	return s.g.pushFrom(ctx, s.dir, url, updates)
}

// pushFrom is push from the repository at dir: a scratch repository, or,
// over http(s) only, any repository (the push runs in this process and
// reads only its objects; git push would read its configuration).
func (g *Git) pushFrom(ctx context.Context, dir, url string, updates []RefUpdate) ([]string, error) {
	if err := checkPush(url, updates); err != nil {
		return nil, err
	}
	if len(updates) == 0 {
		return nil, nil
	}
	if isHTTP(url) {
		st, _, err := g.repoStorage(ctx, dir)
		if err != nil {
			return nil, err
		}
		return g.pushHTTP(ctx, st, url, updates)
	}
	args := []string{"push", "--porcelain", "--no-verify", "--no-recurse-submodules"}
	if len(updates) > 1 {
		args = append(args, "--atomic")
	}
	var specs []string
	for _, u := range updates {
		if u.Lease {
			args = append(args, "--force-with-lease="+u.Dst+":"+u.Expect)
		}
		specs = append(specs, u.Src+":"+u.Dst)
	}
	args = append(args, "--", url)
	args = append(args, specs...)
	var out bytes.Buffer
	_, err := g.run(ctx, invocation{dir: dir, gitDir: dir, args: args, remote: url, stdout: &out})
	// "<flag>\t<src>:<dst>\t<summary>" per ref; "*" is a ref made, "!"
	// one refused, with the reason (a lease that does not hold: "[rejected]
	// (stale info)"), which git says only here.
	var created, refused []string
	for _, line := range strings.Split(g.redact(out.String()), "\n") {
		flag, rest, _ := strings.Cut(line, "\t")
		spec, summary, _ := strings.Cut(rest, "\t")
		_, dst, ok := strings.Cut(spec, ":")
		switch {
		case ok && flag == "*":
			created = append(created, dst)
		case ok && flag == "!":
			refused = append(refused, dst+" "+summary)
		}
	}
	if err != nil {
		if len(refused) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.Join(refused, ", "))
		}
		return nil, fmt.Errorf("push to %s: %w", Redact(url), err)
	}
	return created, nil
}

// checkPush refuses a push to url that is not allowed, or of updates
// git would read as something else (an option, a second refspec).
func checkPush(url string, updates []RefUpdate) error {
	if err := CheckURL(url); err != nil {
		return err
	}
	for _, u := range updates {
		if !strings.HasPrefix(u.Dst, "refs/") || strings.HasPrefix(u.Src, "-") || strings.ContainsAny(u.Src+u.Dst, ": \n") ||
			u.Lease && u.Expect != "" && !IsObjectID(u.Expect) {
			return fmt.Errorf("push %s: invalid ref update %q -> %q", Redact(url), u.Src, u.Dst)
		}
	}
	return nil
}

// Push pushes revisions of the clone at dir to url so that the clone's
// own configuration and hooks take no part: over http(s) from its objects
// in this process, otherwise through a scratch repository that borrows
// them.
func (g *Git) Push(ctx context.Context, dir, url string, updates ...RefUpdate) error {
	_, err := g.PushCreated(ctx, dir, url, updates...)
	return err
}

// PushCreated is Push, and returns the refs (of updates' Dst) that the
// push made in url, which did not exist there before; a ref that was
// there, moved or up to date, is not among them.
func (g *Git) PushCreated(ctx context.Context, dir, url string, updates ...RefUpdate) ([]string, error) {
	resolved := make([]RefUpdate, len(updates))
	for i, u := range updates {
		if !IsObjectID(u.Src) {
			id, err := g.RevParse(ctx, dir, u.Src)
			if err != nil {
				return nil, fmt.Errorf("push %s: %w", u.Src, err)
			}
			u.Src = id
		}
		resolved[i] = u
	}
	if isHTTP(url) {
		// No scratch repository to make and remove (one a pushed change):
		// the push reads the clone's objects in this process.
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("push to %s: %w", Redact(url), err)
		}
		return g.pushFrom(ctx, abs, url, resolved)
	}
	s, err := g.NewScratch(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.push(ctx, url, resolved)
}

// LsRemote returns the object ids of refs (full names) in url.
func (g *Git) LsRemote(ctx context.Context, url string, refs ...string) (map[string]string, error) {
	s, err := g.NewScratch(ctx, "")
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.LsRemote(ctx, url, refs...)
}

// WriteTree stores files (path -> content, paths without '/') as blobs and
// a tree in the scratch repository and returns the tree id.
func (s *Scratch) WriteTree(ctx context.Context, files map[string][]byte) (string, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\t\n\x00") {
			return "", fmt.Errorf("write tree: invalid file name %q", name)
		}
		names = append(names, name)
	}
	// Entries of a tree of files only are in byte order of their names.
	slices.Sort(names)
	var tree bytes.Buffer
	for _, name := range names {
		id, err := s.writeObject("blob", files[name])
		if err != nil {
			return "", fmt.Errorf("write %s: %w", name, err)
		}
		raw, _ := hex.DecodeString(id)
		fmt.Fprintf(&tree, "100644 %s\x00", name)
		tree.Write(raw)
	}
	id, err := s.writeObject("tree", tree.Bytes())
	if err != nil {
		return "", fmt.Errorf("write tree: %w", err)
	}
	return id, nil
}

// CommitTree makes a commit of tree with parents, authored and committed
// now by author, and returns its id.
func (s *Scratch) CommitTree(ctx context.Context, tree, message string, author Identity, parents ...string) (string, error) {
	for _, id := range append([]string{tree}, parents...) {
		if len(id) != 40 || !IsObjectID(id) {
			return "", fmt.Errorf("commit tree: %q is not a SHA-1 object id", id)
		}
	}
	data, err := commitObject(tree, parents, author, message, time.Now())
	if err != nil {
		return "", err
	}
	id, err := s.writeObject("commit", data)
	if err != nil {
		return "", fmt.Errorf("commit tree: %w", err)
	}
	return id, nil
}

// writeObject stores a loose object in the scratch repository and returns
// its id, as `git hash-object -w` does, without running git.
func (s *Scratch) writeObject(typ string, data []byte) (string, error) {
	return writeLooseObject(filepath.Join(s.dir, "objects"), typ, data)
}

// ReadFile returns the content of path at rev in the scratch repository.
func (s *Scratch) ReadFile(ctx context.Context, rev, path string) ([]byte, error) {
	if strings.HasPrefix(rev, "-") {
		return nil, fmt.Errorf("invalid revision %q", rev)
	}
	out, err := s.Run(ctx, "cat-file", "blob", rev+":"+path)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: %w", path, rev, err)
	}
	return []byte(out), nil
}

// FetchShallow fetches refspecs from url into the scratch repository,
// depth commits of history each.
func (s *Scratch) FetchShallow(ctx context.Context, url string, depth int, refspecs ...string) error {
	return s.fetch(ctx, url, []string{"--depth", strconv.Itoa(depth)}, refspecs)
}

// DefaultBranch is the branch url's HEAD names.
func (s *Scratch) DefaultBranch(ctx context.Context, url string) (string, error) {
	if err := CheckURL(url); err != nil {
		return "", err
	}
	out, err := s.g.run(ctx, invocation{dir: s.dir, gitDir: s.dir, args: []string{"ls-remote", "--symref", "--", url, "HEAD"}, remote: url})
	if err != nil {
		return "", fmt.Errorf("list refs of %s: %w", Redact(url), err)
	}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "ref: refs/heads/"); ok {
			if branch, head, ok := strings.Cut(rest, "\t"); ok && strings.TrimSpace(head) == "HEAD" {
				return branch, nil
			}
		}
	}
	return "", fmt.Errorf("%s names no default branch", Redact(url))
}

// CloneBare reads branch of url (its default branch when empty), depth
// commits of it (all when 0), into a new scratch repository whose HEAD
// names that branch: a copy of one repository the worker reads once and
// serves and proposes from (gateway.GitReads). A local repository is read
// through the transport too, as Clone reads one: its depth holds (a local
// clone ignores it), and the copy shares no file with it. Close removes
// it.
func (g *Git) CloneBare(ctx context.Context, url, branch string, depth int) (*Scratch, error) {
	if err := CheckURL(url); err != nil {
		return nil, err
	}
	args, err := cloneArgs([]string{"clone", "--quiet", "--bare", "--no-local", "--no-tags", "--single-branch", "--template="}, branch, depth)
	if err != nil {
		return nil, err
	}
	dir, err := g.scratchDir("fleetlift-copy-")
	if err != nil {
		return nil, err
	}
	s := &Scratch{g: g, dir: dir}
	if isHTTP(url) {
		if err := initBare(dir); err != nil {
			s.Close()
			return nil, fmt.Errorf("clone %s: %w", Redact(url), err)
		}
		if _, err := g.cloneHTTP(ctx, url, branch, depth, dir); err != nil {
			s.Close()
			return nil, fmt.Errorf("clone %s: %w", Redact(url), err)
		}
		return s, nil
	}
	if _, err := g.run(ctx, invocation{dir: dir, args: append(args, "--", url, dir), remote: url}); err != nil {
		s.Close()
		return nil, fmt.Errorf("clone %s: %w", Redact(url), err)
	}
	return s, nil
}

// IsAncestor reports whether a is b or an ancestor of b in the scratch
// repository, each a full object id or a full reference name; a commit
// the repository does not have is no ancestor. A unit's change nearly
// always builds on the very commit its sandbox cloned: when a and b name
// one commit, that is read here, without starting git merge-base (a
// process a repository, of about a dozen).
func (s *Scratch) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	st := storage(s.dir)
	var ids [2]plumbing.Hash
	for i, rev := range []string{a, b} {
		switch {
		case IsObjectID(rev):
			ids[i] = plumbing.NewHash(rev)
		case strings.HasPrefix(rev, "refs/"):
			r, err := storer.ResolveReference(st, plumbing.ReferenceName(rev))
			if err != nil && i == 0 {
				return false, nil
			}
			if err == nil {
				ids[i] = r.Hash()
			}
		default:
			return false, fmt.Errorf("%q is neither an object id nor a full reference name", rev)
		}
	}
	if _, err := object.GetCommit(st, ids[0]); err != nil {
		return false, nil
	}
	if ids[0] == ids[1] {
		return true, nil
	}
	_, err := s.Run(ctx, "merge-base", "--is-ancestor", a, b)
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	}
	return false, err
}

// Head is the branch the scratch repository's HEAD names. A scratch's
// HEAD is the file git clone or initBare wrote (references are files in
// the repositories this package makes), read without starting git.
func (s *Scratch) Head(context.Context) (string, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, "HEAD"))
	ref, isRef := strings.CutPrefix(strings.TrimSpace(string(data)), "ref: ")
	branch, ok := strings.CutPrefix(ref, "refs/heads/")
	if err != nil || !isRef || !ok || CheckBranch(branch) != nil {
		return "", fmt.Errorf("the copy of the repository names no branch (HEAD %q, %v)", data, err)
	}
	return branch, nil
}

// Committer is who committed the commit at the tip of ref (a full ref
// name) in url, as its committer line says: the one thing a pushing
// forge asks before it moves a branch that is not where it left it.
func (g *Git) Committer(ctx context.Context, url, ref string) (Identity, error) {
	s, err := g.NewScratch(ctx, "")
	if err != nil {
		return Identity{}, err
	}
	defer s.Close()
	const tip = "refs/fleetlift/tip"
	if err := s.FetchShallow(ctx, url, 1, "+"+ref+":"+tip); err != nil {
		return Identity{}, err
	}
	out, err := s.Run(ctx, "log", "-1", "--no-show-signature", "--format=%cn%x00%ce", tip)
	if err != nil {
		return Identity{}, fmt.Errorf("read the commit at %s in %s: %w", ref, Redact(url), err)
	}
	name, email, _ := strings.Cut(strings.TrimRight(out, "\n"), "\x00")
	return Identity{Name: name, Email: email}, nil
}
