package git

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// indexTree is `git write-tree` for a plain clone, without running git:
// it reads the index, takes the trees its cache (the TREE extension) still
// holds, writes the trees that changed as loose objects, and returns the
// root tree's id. ok is false when the index is one this does not read
// (another version, a split or sparse index, an unmerged path, an entry
// only intended to be added, no tree cache, a checksum that does not
// match): then git should be asked.
func indexTree(gd string) (id string, ok bool, err error) {
	data, ok := readSmallRegular(filepath.Join(gd, "index"), 1<<30)
	if !ok {
		return "", false, nil
	}
	ix, ok := parseIndex(data)
	if !ok {
		return "", false, nil
	}
	w := treeWriter{objects: filepath.Join(gd, "objects"), cached: ix.trees}
	id, rest, err := w.write("", ix.entries)
	if err != nil {
		return "", false, fmt.Errorf("write tree: %w", err)
	}
	if len(rest) != 0 {
		return "", false, nil
	}
	return id, true, nil
}

// indexEntry is a path staged in the index.
type indexEntry struct {
	path string
	mode uint32
	id   []byte
}

type index struct {
	entries []indexEntry
	// trees are the valid trees of the cache, by directory ("" is the
	// root, "a/b" a subdirectory).
	trees map[string][]byte
}

const (
	hashLen         = sha1.Size
	entryFixedLen   = 62 // times, dev, ino, mode, uid, gid, size, id, flags
	flagExtended    = 0x4000
	flagStageMask   = 0x3000
	flagNameMask    = 0x0fff
	extIntentToAdd  = 0x2000
	extSkipWorktree = 0x4000
)

// parseIndex reads an index of version 2, 3 or 4 (see git's
// Documentation/gitformat-index.txt). ok is false for anything it does
// not read exactly as git would for write-tree.
func parseIndex(data []byte) (ix index, ok bool) {
	if len(data) < 12+hashLen || string(data[:4]) != "DIRC" {
		return ix, false
	}
	body, sum := data[:len(data)-hashLen], data[len(data)-hashLen:]
	if got := sha1.Sum(body); !bytes.Equal(got[:], sum) {
		return ix, false
	}
	version := binary.BigEndian.Uint32(body[4:8])
	if version < 2 || version > 4 {
		return ix, false
	}
	n := binary.BigEndian.Uint32(body[8:12])
	if uint64(n) > uint64(len(body))/entryFixedLen {
		return ix, false
	}
	ix.entries = make([]indexEntry, 0, n)
	off := 12
	prev := ""
	for range n {
		if off+entryFixedLen > len(body) {
			return ix, false
		}
		e := body[off:]
		mode := binary.BigEndian.Uint32(e[24:28])
		id := e[40 : 40+hashLen]
		flags := binary.BigEndian.Uint16(e[60:62])
		fixed := entryFixedLen
		if flags&flagExtended != 0 {
			if version < 3 || off+fixed+2 > len(body) {
				return ix, false
			}
			if ext := binary.BigEndian.Uint16(e[62:64]); ext&extIntentToAdd != 0 {
				return ix, false
			}
			fixed += 2
		}
		if flags&flagStageMask != 0 {
			return ix, false
		}
		var path string
		if version == 4 {
			strip, used := binary.Uvarint(e[fixed:])
			if used <= 0 || strip > uint64(len(prev)) {
				return ix, false
			}
			rest := e[fixed+used:]
			end := bytes.IndexByte(rest, 0)
			if end < 0 {
				return ix, false
			}
			path = prev[:len(prev)-int(strip)] + string(rest[:end])
			off += fixed + used + end + 1
		} else {
			rest := e[fixed:]
			end := bytes.IndexByte(rest, 0)
			if end < 0 {
				return ix, false
			}
			if l := int(flags & flagNameMask); l != flagNameMask && l != end {
				return ix, false
			}
			path = string(rest[:end])
			// The entry is padded with 1 to 8 NULs to a multiple of 8.
			off += (fixed + end + 8) &^ 7
		}
		if off > len(body) || !validIndexPath(path) || path <= prev && len(ix.entries) > 0 {
			return ix, false
		}
		if _, ok := treeMode(mode); !ok {
			return ix, false
		}
		ix.entries = append(ix.entries, indexEntry{path: path, mode: mode, id: id})
		prev = path
	}
	// Extensions: the tree cache is read; other optional ones (an upper
	// case first letter) are skipped; any other (a split or sparse index)
	// makes this index one to leave to git.
	ok = indexExtensions(body, off, func(sig string, data []byte) bool {
		switch {
		case sig == "TREE":
			trees, read := parseTreeCache(data)
			ix.trees = trees
			return read
		case sig[0] < 'A' || sig[0] > 'Z':
			return false
		}
		return true
	})
	if !ok {
		return ix, false
	}
	if ix.trees == nil {
		// Without a tree cache every tree would be written again,
		// unchanged ones too: git does that better.
		return ix, false
	}
	return ix, true
}

// indexExtensions calls visit with each extension of an index body from
// off on (its signature and data) until visit returns false; it reports
// whether every extension was whole and visited.
func indexExtensions(body []byte, off int, visit func(sig string, data []byte) bool) bool {
	for off < len(body) {
		if off+8 > len(body) {
			return false
		}
		sig := string(body[off : off+4])
		size := int(binary.BigEndian.Uint32(body[off+4 : off+8]))
		off += 8
		if size < 0 || off+size > len(body) || !visit(sig, body[off:off+size]) {
			return false
		}
		off += size
	}
	return true
}

// maxPath and maxDepth bound the paths read from an index (which an agent
// can write): longer ones are left to git.
const (
	maxPath  = 4096
	maxDepth = maxPath / 2
)

// validIndexPath is a path git would stage: relative, with no empty, "."
// or ".." component, and not longer than maxPath.
func validIndexPath(p string) bool {
	if p == "" || len(p) > maxPath {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// treeMode is how a tree records an index entry's mode.
func treeMode(mode uint32) (string, bool) {
	switch mode {
	case 0o100644:
		return "100644", true
	case 0o100755:
		return "100755", true
	case 0o120000:
		return "120000", true
	case 0o160000:
		return "160000", true
	}
	return "", false
}

// parseTreeCache reads the TREE extension: the ids of its valid trees, by
// directory.
func parseTreeCache(data []byte) (map[string][]byte, bool) {
	trees := map[string][]byte{}
	ok := walkTreeCache(data, func(n treeCacheNode) {
		if n.id != nil {
			trees[n.path] = n.id
		}
	})
	if !ok {
		return nil, false
	}
	return trees, true
}

// treeCacheNode is an entry of the TREE extension.
type treeCacheNode struct {
	// path is the directory ("" for the root), name its last component
	// as written.
	path string
	name []byte
	// entries is the count of index entries the tree covers, -1 when it
	// is invalid; subtrees the count of entries that follow for its
	// subdirectories.
	entries, subtrees int
	// id is the tree's id, nil when invalid.
	id []byte
}

// walkTreeCache calls visit for each entry of the TREE extension data,
// depth first: a path component, the count of index entries covered (-1:
// invalid), the number of subtrees and, for a valid entry, the tree's id.
// It reports false for data that is not such an extension.
func walkTreeCache(data []byte, visit func(treeCacheNode)) bool {
	var walk func(prefix string, depth int) bool
	walk = func(prefix string, depth int) bool {
		if depth > maxDepth {
			return false
		}
		end := bytes.IndexByte(data, 0)
		if end < 0 {
			return false
		}
		name := data[:end]
		data = data[end+1:]
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return false
		}
		count, subs, found := strings.Cut(string(data[:nl]), " ")
		data = data[nl+1:]
		entries, err1 := strconv.Atoi(count)
		n, err2 := strconv.Atoi(subs)
		if !found || err1 != nil || err2 != nil || n < 0 || n > len(data) {
			return false
		}
		node := treeCacheNode{path: string(name), name: name, entries: entries, subtrees: n}
		if prefix != "" {
			node.path = prefix + "/" + node.path
		}
		if entries >= 0 {
			if len(data) < hashLen {
				return false
			}
			node.id = data[:hashLen]
			data = data[hashLen:]
		}
		visit(node)
		for range n {
			if !walk(node.path, depth+1) {
				return false
			}
		}
		return true
	}
	return walk("", 0) && len(data) == 0
}

// treeWriter writes the trees of sorted index entries.
type treeWriter struct {
	objects string
	cached  map[string][]byte
}

// write writes the tree of directory dir ("" for the root) from entries,
// which start with dir's first path, and returns its id and the entries
// after dir's. Index order (by full path) is tree order: a directory sorts
// as its name with a '/' in both.
func (w *treeWriter) write(dir string, entries []indexEntry) (string, []indexEntry, error) {
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	inDir := func(e indexEntry) bool { return strings.HasPrefix(e.path, prefix) }
	if id, ok := w.cached[dir]; ok {
		for len(entries) > 0 && inDir(entries[0]) {
			entries = entries[1:]
		}
		return hex.EncodeToString(id), entries, nil
	}
	var tree bytes.Buffer
	for len(entries) > 0 && inDir(entries[0]) {
		e := entries[0]
		name := e.path[len(prefix):]
		if sub, _, nested := strings.Cut(name, "/"); nested {
			id, rest, err := w.write(prefix+sub, entries)
			if err != nil {
				return "", nil, err
			}
			raw, _ := hex.DecodeString(id)
			fmt.Fprintf(&tree, "40000 %s\x00", sub)
			tree.Write(raw)
			entries = rest
			continue
		}
		mode, _ := treeMode(e.mode)
		fmt.Fprintf(&tree, "%s %s\x00", mode, name)
		tree.Write(e.id)
		entries = entries[1:]
	}
	id, err := writeLooseObject(w.objects, "tree", tree.Bytes())
	return id, entries, err
}
