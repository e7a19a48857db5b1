package git

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// flagAssumeValid marks an entry git add does not look at.
const flagAssumeValid = 0x8000

// Bounds on what stageInPlace stages itself: a larger work tree or file
// is left to git add, which streams.
const (
	maxStageFiles = 1 << 20
	maxStageBlob  = 32 << 20
)

// stageInPlace is `git add --all -- .` for a plain clone, without running
// git, when the work tree holds only paths the index already tracks: it
// records each changed file's content and mode (and every file's stat
// data) in the index and drops the paths that are gone, writing the new
// blobs as loose objects. The tree cache keeps the trees of directories
// nothing changed in. ok is false, with the index as it was (a blob it
// wrote already is one git add writes too), for anything git add decides
// otherwise or better: an untracked path (git's ignore
// rules say whether it is added), attributes (filters, line endings), a
// configuration beyond what a clone writes, an index this does not read,
// a submodule or an embedded repository, a special file, a large file.
func stageInPlace(dir, gd string, cfg []byte) (ok bool, err error) {
	if !stageSupported || !cloneConfig(cfg) {
		return false, nil
	}
	if infoAttributes(gd) {
		return false, nil
	}
	ixPath := filepath.Join(gd, "index")
	ixInfo, err := os.Lstat(ixPath)
	if err != nil || !ixInfo.Mode().IsRegular() {
		return false, nil
	}
	data, ok := readSmallRegular(ixPath, 1<<30)
	if !ok {
		return false, nil
	}
	ix, ok := parseIndexV2(data)
	if !ok {
		return false, nil
	}
	byPath := make(map[string]int, len(ix.entries))
	for i, e := range ix.entries {
		if e.mode() == 0o160000 || path.Base(e.path) == ".gitattributes" {
			return false, nil
		}
		byPath[e.path] = i
	}
	s := stager{dir: dir, objects: filepath.Join(gd, "objects"), ix: &ix, byPath: byPath,
		seen: make([]bool, len(ix.entries)), racyAfter: ixInfo.ModTime(), invalid: map[string]bool{}}
	if ok, err := s.walk(""); !ok || err != nil {
		return false, err
	}
	kept := ix.entries[:0]
	for i, e := range ix.entries {
		if !s.seen[i] {
			s.invalidate(e.path)
			s.changed = true
			continue
		}
		kept = append(kept, e)
	}
	ix.entries = kept
	if !s.changed {
		return true, nil
	}
	tree, ok := invalidateTreeCache(ix.tree, s.invalid)
	if !ok {
		return false, nil
	}
	ix.tree = tree
	if err := writeIndexFile(ixPath, ix.encode()); err != nil {
		return false, err
	}
	return true, nil
}

// infoAttributes reports whether the git directory gd may hold attributes
// of its own (info/attributes), which git applies to every path.
func infoAttributes(gd string) bool {
	_, err := os.Lstat(filepath.Join(gd, "info", "attributes"))
	return !errors.Is(err, fs.ErrNotExist)
}

// stager walks a work tree against its index.
type stager struct {
	dir, objects string
	ix           *indexV2
	byPath       map[string]int
	seen         []bool
	files        int
	// racyAfter is the index's modification time: a file modified then
	// or later may have changed though its stat data match.
	racyAfter time.Time
	// invalid are the directories whose trees changed ("" is the root).
	invalid map[string]bool
	// changed says the index must be written.
	changed bool
}

// walk stages the files under rel ("" for the work tree's root); ok is
// false for a path to leave to git.
func (s *stager) walk(rel string) (bool, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, filepath.FromSlash(rel)))
	if err != nil {
		return false, err
	}
	for _, de := range entries {
		name := de.Name()
		if rel == "" && name == ".git" {
			continue
		}
		if strings.EqualFold(name, ".git") || name == ".gitattributes" {
			return false, nil
		}
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		switch t := de.Type(); {
		case t.IsDir():
			if ok, err := s.walk(p); !ok || err != nil {
				return ok, err
			}
			continue
		case t.IsRegular(), t&fs.ModeSymlink != 0:
		default:
			return false, nil
		}
		i, tracked := s.byPath[p]
		if !tracked {
			return false, nil
		}
		if s.files++; s.files > maxStageFiles {
			return false, nil
		}
		fi, err := de.Info()
		if err != nil {
			return false, err
		}
		if ok, err := s.stage(i, p, fi); !ok || err != nil {
			return ok, err
		}
	}
	return true, nil
}

// stage records file p, tracked as entry i, with stat fi.
func (s *stager) stage(i int, p string, fi fs.FileInfo) (bool, error) {
	s.seen[i] = true
	e := &s.ix.entries[i]
	mode := uint32(0o100644)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		mode = 0o120000
	case fi.Mode()&0o100 != 0:
		mode = 0o100755
	}
	var st [40]byte
	statData(st[:], fi)
	binary.BigEndian.PutUint32(st[24:28], mode)
	if bytes.Equal(st[:], e.fixed[:40]) && fi.ModTime().Before(s.racyAfter) {
		return true, nil
	}
	if fi.Size() > maxStageBlob {
		return false, nil
	}
	full := filepath.Join(s.dir, filepath.FromSlash(p))
	var content []byte
	var err error
	if mode == 0o120000 {
		var target string
		target, err = os.Readlink(full)
		content = []byte(target)
	} else {
		content, err = readNoFollow(full)
	}
	if err != nil {
		return false, err
	}
	id := objectID(objBlob, content)
	if !bytes.Equal(id[:], e.fixed[40:40+hashLen]) {
		if _, err := writeLooseObject(s.objects, "blob", content); err != nil {
			return false, err
		}
		copy(e.fixed[40:40+hashLen], id[:])
		s.invalidate(p)
	} else if mode != e.mode() {
		s.invalidate(p)
	}
	copy(e.fixed[:40], st[:])
	s.changed = true
	return true, nil
}

// invalidate marks the trees of p's directories as changed.
func (s *stager) invalidate(p string) {
	for p != "" {
		p = parentDir(p)
		s.invalid[p] = true
	}
}

// readNoFollow reads a regular file, never through a link.
func readNoFollow(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(f)
	return b.Bytes(), err
}

// writeIndexFile replaces the index at p as git does: through index.lock,
// made exclusively (a git at work in the clone holds it).
func writeIndexFile(p string, data []byte) error {
	lock := p + ".lock"
	if _, err := createFile(lock, data, 0o666); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			os.Remove(lock)
		}
		return err
	}
	if err := os.Rename(lock, p); err != nil {
		os.Remove(lock)
		return err
	}
	return nil
}

// indexV2 is a version 2 index kept as its entries' bytes, to be written
// back with some changed.
type indexV2 struct {
	entries []rawEntry
	// tree is the TREE extension's content.
	tree []byte
}

// rawEntry is an index entry: its path and its fixed part (stat data,
// mode, id, flags).
type rawEntry struct {
	path  string
	fixed [entryFixedLen]byte
}

func (e *rawEntry) mode() uint32 { return binary.BigEndian.Uint32(e.fixed[24:28]) }

// parseIndexV2 reads an index of version 2 whose only extension is the
// tree cache, with every entry at stage 0.
func parseIndexV2(data []byte) (ix indexV2, ok bool) {
	if len(data) < 12+hashLen || string(data[:4]) != "DIRC" {
		return ix, false
	}
	body, sum := data[:len(data)-hashLen], data[len(data)-hashLen:]
	if got := sha1.Sum(body); !bytes.Equal(got[:], sum) || binary.BigEndian.Uint32(body[4:8]) != 2 {
		return ix, false
	}
	n := binary.BigEndian.Uint32(body[8:12])
	if uint64(n) > uint64(len(body))/entryFixedLen {
		return ix, false
	}
	ix.entries = make([]rawEntry, 0, n)
	off, prev := 12, ""
	for range n {
		if off+entryFixedLen > len(body) {
			return ix, false
		}
		var e rawEntry
		copy(e.fixed[:], body[off:off+entryFixedLen])
		flags := binary.BigEndian.Uint16(e.fixed[60:62])
		if flags&(flagAssumeValid|flagExtended|flagStageMask) != 0 {
			return ix, false
		}
		rest := body[off+entryFixedLen:]
		end := bytes.IndexByte(rest, 0)
		if end < 0 {
			return ix, false
		}
		if l := int(flags & flagNameMask); l != flagNameMask && l != end {
			return ix, false
		}
		e.path = string(rest[:end])
		off += (entryFixedLen + end + 8) &^ 7
		if off > len(body) || !validIndexPath(e.path) || len(ix.entries) > 0 && e.path <= prev {
			return ix, false
		}
		if _, ok := treeMode(e.mode()); !ok {
			return ix, false
		}
		ix.entries = append(ix.entries, e)
		prev = e.path
	}
	ok = indexExtensions(body, off, func(sig string, data []byte) bool {
		if sig != "TREE" || ix.tree != nil {
			return false
		}
		ix.tree = data
		return true
	})
	if !ok {
		return ix, false
	}
	if ix.tree == nil {
		return ix, false
	}
	if _, ok := parseTreeCache(ix.tree); !ok {
		return ix, false
	}
	return ix, true
}

// encode is the index file of ix.
func (ix *indexV2) encode() []byte {
	var b bytes.Buffer
	b.WriteString("DIRC")
	b.Write(binary.BigEndian.AppendUint32(nil, 2))
	b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(ix.entries))))
	for _, e := range ix.entries {
		b.Write(e.fixed[:])
		b.WriteString(e.path)
		b.Write(make([]byte, 8-(entryFixedLen+len(e.path))%8))
	}
	b.WriteString("TREE")
	b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(ix.tree))))
	b.Write(ix.tree)
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// invalidateTreeCache is the TREE extension data with the trees of the
// directories in invalid marked invalid (an entry count of -1, no id), as
// git marks the trees a change reaches.
func invalidateTreeCache(data []byte, invalid map[string]bool) ([]byte, bool) {
	var out bytes.Buffer
	ok := walkTreeCache(data, func(n treeCacheNode) {
		out.Write(n.name)
		out.WriteByte(0)
		if n.id == nil || invalid[n.path] {
			fmt.Fprintf(&out, "-1 %d\n", n.subtrees)
			return
		}
		fmt.Fprintf(&out, "%d %d\n", n.entries, n.subtrees)
		out.Write(n.id)
	})
	if !ok {
		return nil, false
	}
	return out.Bytes(), true
}

// cloneConfig reports whether a repository's configuration holds only
// what a clone writes (core settings at git's defaults, the remote and
// the branch it tracks), so that git add would read nothing from it that
// stageInPlace does not do as well.
func cloneConfig(cfg []byte) bool {
	section := ""
	for _, line := range strings.Split(string(cfg), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") {
				return false
			}
			name, _, _ := strings.Cut(strings.TrimSpace(line[1:len(line)-1]), " ")
			section = strings.ToLower(name)
			continue
		}
		key, value, _ := strings.Cut(line, "=")
		key, value = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(value)
		switch section + "." + key {
		case "core.repositoryformatversion":
			if value != "0" {
				return false
			}
		case "core.filemode":
			if value != "true" {
				return false
			}
		case "core.bare":
			if value != "false" {
				return false
			}
		case "core.logallrefupdates", "remote.url", "remote.fetch", "branch.remote", "branch.merge":
		default:
			return false
		}
	}
	return true
}
