package git

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A plain clone is what Clone makes: a .git directory with its own objects
// and a SHA-1 object format. fleetlift reads and writes some of its files
// in Go instead of starting git (a process costs milliseconds, and an
// agent's task does this for every repository); anything that is not a
// plain clone, or that a plain clone's configuration could change, is
// left to git.

// plainGitDir returns dir's .git directory when dir is a plain clone:
// .git is a directory (not a file or a link), shares nothing with another
// work tree, has its own objects directory and a configuration that names
// no other object format and includes no other file. ok is false for
// anything else.
func plainGitDir(dir string) (gd string, cfg []byte, ok bool) {
	gd = filepath.Join(dir, ".git")
	if fi, err := os.Lstat(gd); err != nil || !fi.IsDir() {
		return "", nil, false
	}
	if _, err := os.Lstat(filepath.Join(gd, "commondir")); !errors.Is(err, fs.ErrNotExist) {
		return "", nil, false
	}
	if fi, err := os.Lstat(filepath.Join(gd, "objects")); err != nil || !fi.IsDir() {
		return "", nil, false
	}
	cfg, ok = readSmallRegular(filepath.Join(gd, "config"), 1<<20)
	if !ok {
		return "", nil, false
	}
	// Case-insensitive, like git's section and key names, and a
	// superset of what matters: an include could bring in anything, and
	// another object format or per-worktree configuration changes where
	// and how objects and settings are kept.
	lower := bytes.ToLower(cfg)
	for _, word := range []string{"include", "objectformat", "worktreeconfig"} {
		if bytes.Contains(lower, []byte(word)) {
			return "", nil, false
		}
	}
	return gd, cfg, true
}

// readSmallRegular reads a regular file of at most max bytes; ok is false
// for a missing, irregular (a link, a directory) or larger file.
func readSmallRegular(path string, max int64) ([]byte, bool) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, false
	}
	b, err := os.ReadFile(path)
	return b, err == nil
}

// writeLooseObject stores an object in the objects directory as git does
// (zlib-compressed, read-only, renamed into place) and returns its SHA-1
// id. An object already stored is left as it is.
func writeLooseObject(objects, typ string, data []byte) (string, error) {
	header := fmt.Sprintf("%s %d\x00", typ, len(data))
	h := sha1.New()
	h.Write([]byte(header))
	h.Write(data)
	id := hex.EncodeToString(h.Sum(nil))
	dir := filepath.Join(objects, id[:2])
	path := filepath.Join(dir, id[2:])
	if _, err := os.Stat(path); err == nil {
		return id, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	// Git's own loose objects are at zlib's best speed too
	// (core.looseCompression); it reads any level.
	zw, _ := zlib.NewWriterLevel(f, zlib.BestSpeed) // a valid level: no error
	_, err = zw.Write([]byte(header))
	if err == nil {
		_, err = zw.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Chmod(0o444)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", err
	}
	return id, nil
}

// commitObject is the content of a commit of tree with parents, authored
// and committed by who at when (in when's time zone), as git commit-tree
// writes it.
func commitObject(tree string, parents []string, who Identity, message string, when time.Time) ([]byte, error) {
	who, err := who.resolved()
	if err != nil {
		return nil, err
	}
	var c bytes.Buffer
	fmt.Fprintf(&c, "tree %s\n", tree)
	for _, p := range parents {
		fmt.Fprintf(&c, "parent %s\n", p)
	}
	sig := fmt.Sprintf("%s <%s> %d %s", who.Name, who.Email, when.Unix(), when.Format("-0700"))
	fmt.Fprintf(&c, "author %s\ncommitter %s\n\n%s", sig, sig, message)
	return c.Bytes(), nil
}
