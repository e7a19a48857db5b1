package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// FS returns the tree of the commit rev names, rooted at subPath ("" or
// "." for the whole tree), as a read-only file system. rev is resolved in
// the repository or its cache without asking the remote: pass what Resolve
// returned.
//
// The file system implements fs.ReadDirFS, fs.StatFS and fs.ReadLinkFS:
// symbolic links in the tree are visible as links (fs.ModeSymlink) through
// Lstat, ReadLink and ReadDir. Open, Stat and ReadDir follow a link only
// while it stays inside the root (subPath); one that leaves it is an
// error. Submodules appear as empty directories. Every file has the
// commit's time as its modification time.
func (r *Repo) FS(ctx context.Context, rev, subPath string) (fs.FS, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRev(rev); err != nil {
		return nil, fmt.Errorf("read %s: %w", r.display, err)
	}
	sub := strings.Trim(path.Clean("/"+strings.TrimSpace(subPath)), "/")
	if sub == "" {
		sub = "."
	}
	if !fs.ValidPath(sub) || slices.Contains(strings.Split(subPath, "/"), "..") {
		return nil, fmt.Errorf("read %s at %s: path %q must be relative to the repository root, without '..'", r.display, rev, subPath)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reindex()
	h, err := r.resolveLocal(rev)
	if err != nil {
		if !r.local {
			return nil, fmt.Errorf("read %s at %s: %w (Resolve fetches new commits)", r.display, rev, err)
		}
		return nil, fmt.Errorf("read %s at %s: %w", r.display, rev, err)
	}
	c, err := object.GetCommit(r.repo.Storer, h)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: commit %s: %w", r.display, rev, h, err)
	}
	t := &treeFS{r: r, root: c.TreeHash, mtime: c.Committer.When}
	if sub != "." {
		n, err := t.lookup(sub, true)
		if err == nil && !n.isDir() {
			err = errNotDir
		}
		if err != nil {
			return nil, fmt.Errorf("read %s at %s: path %s: %w", r.display, short(h), sub, err)
		}
		t.root = n.hash
		if n.mode == filemode.Submodule {
			t.root = plumbing.ZeroHash
		}
	}
	return t, nil
}

var (
	errEscapes = errors.New("symbolic link leaves the root")
	errNotDir  = errors.New("not a directory")
	errIsDir   = errors.New("is a directory")
	errNotLink = errors.New("not a symbolic link")
	errLoop    = errors.New("too many levels of symbolic links")
)

// maxLinkBytes bounds the target of a symbolic link, as PATH_MAX does.
const maxLinkBytes = 4096

// treeFS is a git tree as an fs.FS. Every method takes r.mu around its
// use of go-git.
type treeFS struct {
	r     *Repo
	root  plumbing.Hash // a tree; zero for an empty one (a submodule)
	mtime time.Time
}

var (
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.StatFS     = (*treeFS)(nil)
	_ fs.ReadLinkFS = (*treeFS)(nil)
)

// node is a tree entry, or the root.
type node struct {
	name string
	mode filemode.FileMode
	hash plumbing.Hash
}

func (n node) isDir() bool { return n.mode == filemode.Dir || n.mode == filemode.Submodule }

func (f *treeFS) Open(name string) (fs.File, error) {
	n, err := f.locked("open", name, true)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		f.r.mu.Lock()
		entries, err := f.entries(n)
		f.r.mu.Unlock()
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return &dir{info: f.info(n, 0), entries: entries}, nil
	}
	info, err := f.sizedInfo(n)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &file{f: f, name: name, info: info, hash: n.hash}, nil
}

func (f *treeFS) Stat(name string) (fs.FileInfo, error) {
	return f.stat("stat", name, true)
}

func (f *treeFS) Lstat(name string) (fs.FileInfo, error) {
	return f.stat("lstat", name, false)
}

func (f *treeFS) stat(op, name string, follow bool) (fs.FileInfo, error) {
	n, err := f.locked(op, name, follow)
	if err != nil {
		return nil, err
	}
	info, err := f.sizedInfo(n)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return info, nil
}

func (f *treeFS) ReadLink(name string) (string, error) {
	n, err := f.locked("readlink", name, false)
	if err != nil {
		return "", err
	}
	if n.mode != filemode.Symlink {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: errNotLink}
	}
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	target, err := f.linkTarget(n.hash)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return target, nil
}

func (f *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := f.locked("readdir", name, true)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errNotDir}
	}
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	entries, err := f.entries(n)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	return entries, nil
}

// locked checks name and looks it up under r.mu.
func (f *treeFS) locked(op, name string, follow bool) (node, error) {
	if !fs.ValidPath(name) {
		return node{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	n, err := f.lookup(name, follow)
	if err != nil {
		return node{}, &fs.PathError{Op: op, Path: name, Err: err}
	}
	n.name = path.Base(name)
	return n, nil
}

// lookup walks name from the root, following symbolic links on the way,
// and the last one too when follow is set, as long as they stay inside
// the root. The caller holds r.mu.
func (f *treeFS) lookup(name string, follow bool) (node, error) {
	cur := node{name: ".", mode: filemode.Dir, hash: f.root}
	if name == "." {
		return cur, nil
	}
	// dirs are the directories from the root to cur's parent.
	var dirs []node
	todo := strings.Split(name, "/")
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == "" || c == "." {
			continue
		}
		if !cur.isDir() {
			return node{}, errNotDir
		}
		if c == ".." {
			if len(dirs) == 0 {
				return node{}, errEscapes
			}
			cur, dirs = dirs[len(dirs)-1], dirs[:len(dirs)-1]
			continue
		}
		e, err := f.child(cur, c)
		if err != nil {
			return node{}, err
		}
		if e.mode == filemode.Symlink && (follow || hasComponent(todo)) {
			if links++; links > 40 {
				return node{}, errLoop
			}
			target, err := f.linkTarget(e.hash)
			if err != nil {
				return node{}, err
			}
			if path.IsAbs(target) {
				return node{}, errEscapes
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		dirs = append(dirs, cur)
		cur = e
	}
	return cur, nil
}

// hasComponent reports whether a path remains in todo.
func hasComponent(todo []string) bool {
	for _, c := range todo {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}

// child is the entry name of directory d.
func (f *treeFS) child(d node, name string) (node, error) {
	if d.mode == filemode.Submodule || d.hash.IsZero() {
		return node{}, fs.ErrNotExist
	}
	t, err := object.GetTree(f.r.repo.Storer, d.hash)
	if err != nil {
		return node{}, err
	}
	for _, e := range t.Entries {
		if e.Name == name {
			return node{name: e.Name, mode: e.Mode, hash: e.Hash}, nil
		}
	}
	return node{}, fs.ErrNotExist
}

// entries lists directory d sorted by name. The caller holds r.mu.
func (f *treeFS) entries(d node) ([]fs.DirEntry, error) {
	if d.mode == filemode.Submodule || d.hash.IsZero() {
		return []fs.DirEntry{}, nil
	}
	t, err := object.GetTree(f.r.repo.Storer, d.hash)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, 0, len(t.Entries))
	for _, e := range t.Entries {
		out = append(out, &dirEntry{f: f, n: node{name: e.Name, mode: e.Mode, hash: e.Hash}})
	}
	// Git orders a directory as if its name ended in '/'; fs.FS by name.
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// linkTarget reads a symbolic link's target. The caller holds r.mu.
func (f *treeFS) linkTarget(h plumbing.Hash) (string, error) {
	b, err := object.GetBlob(f.r.repo.Storer, h)
	if err != nil {
		return "", err
	}
	if b.Size > maxLinkBytes {
		return "", fmt.Errorf("symbolic link target is %d bytes long", b.Size)
	}
	rc, err := b.Reader()
	if err != nil {
		return "", err
	}
	defer rc.Close()
	target, err := io.ReadAll(rc)
	if err != nil {
		return "", err
	}
	return string(target), nil
}

// sizedInfo is n's FileInfo with the size of its blob.
func (f *treeFS) sizedInfo(n node) (fileInfo, error) {
	if n.isDir() {
		return f.info(n, 0), nil
	}
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	size, err := f.size(n.hash)
	if err != nil {
		return fileInfo{}, err
	}
	return f.info(n, size), nil
}

// size is the size of blob h. The caller holds r.mu.
func (f *treeFS) size(h plumbing.Hash) (int64, error) {
	if s, ok := f.r.repo.Storer.(interface {
		EncodedObjectSize(plumbing.Hash) (int64, error)
	}); ok {
		return s.EncodedObjectSize(h)
	}
	b, err := object.GetBlob(f.r.repo.Storer, h)
	if err != nil {
		return 0, err
	}
	return b.Size, nil
}

func (f *treeFS) info(n node, size int64) fileInfo {
	return fileInfo{name: n.name, mode: n.mode, size: size, mtime: f.mtime}
}

// fileInfo describes a tree entry.
type fileInfo struct {
	name  string
	mode  filemode.FileMode
	size  int64
	mtime time.Time
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) ModTime() time.Time { return i.mtime }
func (i fileInfo) IsDir() bool        { return i.Mode().IsDir() }
func (i fileInfo) Sys() any           { return nil }

func (i fileInfo) Mode() fs.FileMode {
	switch i.mode {
	case filemode.Dir, filemode.Submodule:
		return fs.ModeDir | 0o755
	case filemode.Symlink:
		return fs.ModeSymlink | 0o777
	case filemode.Executable:
		return 0o755
	}
	return 0o644
}

// dirEntry is an entry of a directory listing; its size is read only
// when Info asks for it.
type dirEntry struct {
	f *treeFS
	n node
}

func (e *dirEntry) Name() string      { return e.n.name }
func (e *dirEntry) IsDir() bool       { return e.n.isDir() }
func (e *dirEntry) Type() fs.FileMode { return fileInfo{mode: e.n.mode}.Mode().Type() }
func (e *dirEntry) String() string    { return fs.FormatDirEntry(e) }

func (e *dirEntry) Info() (fs.FileInfo, error) {
	info, err := e.f.sizedInfo(e.n)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: e.n.name, Err: err}
	}
	return info, nil
}

// file is an open blob, read as a stream.
type file struct {
	f      *treeFS
	name   string
	info   fileInfo
	hash   plumbing.Hash
	rc     io.ReadCloser
	closed bool
}

func (fl *file) Stat() (fs.FileInfo, error) { return fl.info, nil }

func (fl *file) Read(p []byte) (int, error) {
	if fl.closed {
		return 0, &fs.PathError{Op: "read", Path: fl.name, Err: fs.ErrClosed}
	}
	fl.f.r.mu.Lock()
	defer fl.f.r.mu.Unlock()
	if fl.rc == nil {
		b, err := object.GetBlob(fl.f.r.repo.Storer, fl.hash)
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: fl.name, Err: err}
		}
		if fl.rc, err = b.Reader(); err != nil {
			return 0, &fs.PathError{Op: "read", Path: fl.name, Err: err}
		}
	}
	return fl.rc.Read(p)
}

func (fl *file) Close() error {
	if fl.closed {
		return &fs.PathError{Op: "close", Path: fl.name, Err: fs.ErrClosed}
	}
	fl.closed = true
	if fl.rc != nil {
		fl.f.r.mu.Lock()
		defer fl.f.r.mu.Unlock()
		return fl.rc.Close()
	}
	return nil
}

// dir is an open directory.
type dir struct {
	info    fileInfo
	entries []fs.DirEntry
	off     int
}

func (d *dir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dir) Close() error               { return nil }

func (d *dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errIsDir}
}

func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return slices.Clone(rest[:n]), nil
}

func short(h plumbing.Hash) string { return h.String()[:12] }
