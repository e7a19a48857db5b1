package git

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// This file writes, in this process, what `git diff --raw --patch -z
// <commit> <tree>` writes for the change an agent makes most: files of a
// clone it fetched in this process (httpClone), each edited in one place.
// It spares the agent a git process per repository. It takes only the case
// whose output it can reproduce byte for byte, and leaves the rest to git:
//
//   - the repository is a plain clone (plainGitDir) with the configuration a
//     clone writes (cloneConfig), no attributes anywhere git would read them
//     for these paths, no alternates, and only the clone's pack, whose
//     objects this process still holds;
//   - every path in the diff is a regular file modified in place, mode
//     unchanged: nothing added, deleted, renamed or turned into another
//     kind, so that git's rename detection finds nothing;
//   - each file is text (no NUL) of at most quickDiffMaxBytes, named in
//     printable ASCII without a space, quote or backslash (git writes
//     those names otherwise);
//   - each file changed in one place: after the lines the two versions
//     share at their start and end, no line of one's middle is a line of
//     the other's, and neither middle could slide over an equal line next
//     to it (which git's diff would move, and place by its indent
//     heuristic). Then every diff algorithm gives the same one hunk.
//
// Abbreviated ids are 7 digits, git's for a repository of fewer than 8192
// packed objects, and only when no other object shares them.

// quickDiffMaxBytes bounds each version of a file diffed in this process.
const quickDiffMaxBytes = 1 << 20

// quickDiffMaxObjects bounds the objects of a repository whose ids are
// abbreviated here to git's shortest (7 digits below 8192).
const quickDiffMaxObjects = 4096

// abbrev is the digits of an abbreviated id in such a repository.
const abbrev = 7

// diffContext is git's default number of context lines.
const diffContext = 3

// funcLineMax is how much of a function line git shows in a hunk header.
const funcLineMax = 80

// cloned holds the objects of the packs this process cloned in-process,
// by pack file name, newest last, at most maxClonedBytes of them: a diff
// of a clone's commit reads them here. Objects are named by their content,
// so what is held never goes stale.
var cloned struct {
	sync.Mutex
	packs []clonedPack
	bytes int
}

type clonedPack struct {
	name  string
	objs  *packObjects
	bytes int
}

const maxClonedBytes = 16 << 20

// rememberClone keeps the objects of the pack written as name
// ("pack-<sum>.pack") for diffs of that clone.
func rememberClone(name string, objs *packObjects) {
	inflated := 0
	for _, o := range objs.list {
		inflated += len(o.data)
	}
	if inflated > maxClonedBytes || len(objs.list) >= quickDiffMaxObjects {
		return
	}
	cloned.Lock()
	defer cloned.Unlock()
	cloned.packs = append(cloned.packs, clonedPack{name: name, objs: objs, bytes: inflated})
	cloned.bytes += inflated
	for cloned.bytes > maxClonedBytes && len(cloned.packs) > 1 {
		cloned.bytes -= cloned.packs[0].bytes
		cloned.packs = cloned.packs[1:]
	}
}

func clonedPackNamed(name string) *packObjects {
	cloned.Lock()
	defer cloned.Unlock()
	for _, p := range cloned.packs {
		if p.name == name {
			return p.objs
		}
	}
	return nil
}

// quickRepo is a repository's objects as quickDiff reads them: the
// clone's pack held in memory, and the loose objects.
type quickRepo struct {
	objects string
	pack    *packObjects
	loose   map[[hashLen]byte]bool
}

// openQuickRepo reads what quickDiff needs of the objects directory of gd;
// ok is false when the repository is not the case it takes.
func openQuickRepo(gd string) (*quickRepo, bool) {
	objects := filepath.Join(gd, "objects")
	if _, err := os.Lstat(filepath.Join(objects, "info", "alternates")); !errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	packs, err := os.ReadDir(filepath.Join(objects, "pack"))
	if err != nil {
		return nil, false
	}
	r := &quickRepo{objects: objects, loose: map[[hashLen]byte]bool{}}
	for _, e := range packs {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".pack"):
			if r.pack != nil {
				return nil, false
			}
			if r.pack = clonedPackNamed(name); r.pack == nil {
				return nil, false
			}
		case strings.HasSuffix(name, ".idx"):
		default:
			// A .keep, .promisor, .rev or temporary file: git may
			// read the objects otherwise.
			return nil, false
		}
	}
	if r.pack == nil {
		return nil, false
	}
	dirs, err := os.ReadDir(objects)
	if err != nil {
		return nil, false
	}
	for _, d := range dirs {
		name := d.Name()
		if name == "pack" || name == "info" {
			continue
		}
		prefix, err := hex.DecodeString(name)
		if err != nil || len(prefix) != 1 || !d.IsDir() {
			return nil, false
		}
		files, err := os.ReadDir(filepath.Join(objects, name))
		if err != nil {
			return nil, false
		}
		for _, f := range files {
			rest, err := hex.DecodeString(f.Name())
			if err != nil || len(rest) != hashLen-1 {
				continue // git's temporary files
			}
			r.loose[[hashLen]byte(append(prefix, rest...))] = true
		}
	}
	if len(r.pack.list)+len(r.loose) >= quickDiffMaxObjects {
		return nil, false
	}
	return r, true
}

// object returns the object id of type want, from the pack or loose
// (readLoose, which checks its content against its id); ok is false when
// it is neither, or of another type.
func (r *quickRepo) object(id [hashLen]byte, want int) ([]byte, bool) {
	if typ, data, ok := r.pack.getRaw(id); ok {
		return data, typ == want
	}
	if !r.loose[id] {
		return nil, false
	}
	typ, data, ok, err := readLoose(r.objects, hex.EncodeToString(id[:]))
	return data, ok && err == nil && typ == want
}

// unique reports whether no other object's id starts with id's first
// abbrev hexadecimal digits.
func (r *quickRepo) unique(id [hashLen]byte) bool {
	short := hex.EncodeToString(id[:4])[:abbrev]
	same := func(other [hashLen]byte) bool {
		return other != id && hex.EncodeToString(other[:4])[:abbrev] == short
	}
	for _, o := range r.pack.list {
		if same(o.id) {
			return false
		}
	}
	for other := range r.loose {
		if same(other) {
			return false
		}
	}
	return true
}

// treeEntry is an entry of a tree object.
type treeEntry struct {
	mode string
	name string
	id   [hashLen]byte
}

func parseTree(data []byte) ([]treeEntry, bool) {
	var out []treeEntry
	err := treeEntries(data, func(mode, name string, id [hashLen]byte) error {
		out = append(out, treeEntry{mode: mode, name: name, id: id})
		return nil
	})
	return out, err == nil
}

// quickFile is a file modified in place.
type quickFile struct {
	path     string
	mode     string
	old, new [hashLen]byte
}

// modified lists, in git's order, the files that differ between trees a
// and b, below prefix; ok is false for any difference but a regular file
// modified in place.
func (r *quickRepo) modified(a, b [hashLen]byte, prefix string, out []quickFile) ([]quickFile, bool) {
	if a == b {
		return out, true
	}
	ad, ok := r.object(a, objTree)
	if !ok {
		return nil, false
	}
	bd, ok := r.object(b, objTree)
	if !ok {
		return nil, false
	}
	ae, ok := parseTree(ad)
	if !ok {
		return nil, false
	}
	be, ok := parseTree(bd)
	if !ok || len(ae) != len(be) {
		return nil, false
	}
	for i, e := range be {
		o := ae[i]
		if o.name != e.name || o.mode != e.mode {
			return nil, false
		}
		if o.id == e.id {
			continue
		}
		switch e.mode {
		case "40000":
			if out, ok = r.modified(o.id, e.id, prefix+e.name+"/", out); !ok {
				return nil, false
			}
		case "100644", "100755":
			out = append(out, quickFile{path: prefix + e.name, mode: e.mode, old: o.id, new: e.id})
		default:
			return nil, false
		}
	}
	return out, true
}

// quickDiff writes what `git diff --no-ext-diff --no-textconv --no-color
// --find-renames --ignore-submodules=none --raw --patch -z base tree --`
// writes in the work tree dir, or reports that git must (see the top of
// this file).
func quickDiff(dir, base, tree string) ([]byte, bool) {
	if !IsObjectID(base) || !IsObjectID(tree) {
		return nil, false
	}
	gd, cfg, ok := plainGitDir(dir)
	if !ok || !cloneConfig(cfg) || infoAttributes(gd) {
		return nil, false
	}
	r, ok := openQuickRepo(gd)
	if !ok {
		return nil, false
	}
	var baseID, treeID [hashLen]byte
	hex.Decode(baseID[:], []byte(base))
	hex.Decode(treeID[:], []byte(tree))
	commit, ok := r.object(baseID, objCommit)
	if !ok {
		return nil, false
	}
	baseTree, _, err := commitLinks(commit)
	if err != nil || len(baseTree) != 2*hashLen {
		return nil, false
	}
	var baseTreeID [hashLen]byte
	hex.Decode(baseTreeID[:], []byte(baseTree))
	files, ok := r.modified(baseTreeID, treeID, "", nil)
	if !ok {
		return nil, false
	}
	var raw, patch bytes.Buffer
	attrs := map[string]bool{}
	for _, f := range files {
		if !plainDiffPath(f.path) || hasAttributes(dir, f.path, attrs) || !r.unique(f.old) || !r.unique(f.new) {
			return nil, false
		}
		old, ok := r.object(f.old, objBlob)
		if !ok {
			return nil, false
		}
		new, ok := r.object(f.new, objBlob)
		if !ok {
			return nil, false
		}
		hunk, ok := oneHunk(old, new)
		if !ok {
			return nil, false
		}
		o, n := hex.EncodeToString(f.old[:])[:abbrev], hex.EncodeToString(f.new[:])[:abbrev]
		raw.WriteString(":" + f.mode + " " + f.mode + " " + o + " " + n + " M\x00" + f.path + "\x00")
		patch.WriteString("diff --git a/" + f.path + " b/" + f.path + "\nindex " + o + ".." + n + " " + f.mode + "\n--- a/" + f.path + "\n+++ b/" + f.path + "\n")
		patch.Write(hunk)
	}
	if len(files) > 0 {
		raw.WriteByte(0)
		raw.Write(patch.Bytes())
	}
	return raw.Bytes(), true
}

// plainDiffPath reports whether git writes path as it is in a diff: printable
// ASCII without a space (which adds a tab to the ---/+++ lines), a double
// quote or a backslash (which git quotes).
func plainDiffPath(path string) bool {
	for i := 0; i < len(path); i++ {
		if c := path[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return path != ""
}

// hasAttributes reports whether a .gitattributes in the work tree dir
// could apply to path (git reads them for a diff: a driver, binary, a
// function pattern); seen caches the directories looked at.
func hasAttributes(dir, path string, seen map[string]bool) bool {
	dirs := []string{""}
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			dirs = append(dirs, path[:i])
		}
	}
	for _, d := range dirs {
		has, ok := seen[d]
		if !ok {
			_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(d), ".gitattributes"))
			has = !errors.Is(err, fs.ErrNotExist)
			seen[d] = has
		}
		if has {
			return true
		}
	}
	return false
}

// lines splits data into git's records: each line with its newline, the
// last without one when the file does not end in one.
func lines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, data)
			break
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}

// oneHunk is the hunk git writes for a file changed in one place (see the
// top of this file), and ok false for anything else.
func oneHunk(oldData, newData []byte) ([]byte, bool) {
	if len(oldData) > quickDiffMaxBytes || len(newData) > quickDiffMaxBytes ||
		bytes.IndexByte(oldData, 0) >= 0 || bytes.IndexByte(newData, 0) >= 0 {
		return nil, false
	}
	a, b := lines(oldData), lines(newData)
	p := 0
	for p < len(a) && p < len(b) && bytes.Equal(a[p], b[p]) {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && bytes.Equal(a[len(a)-1-s], b[len(b)-1-s]) {
		s++
	}
	m, n := len(a)-p-s, len(b)-p-s
	if m == 0 && n == 0 {
		return nil, false
	}
	inA := make(map[string]bool, m)
	for _, l := range a[p : p+m] {
		inA[string(l)] = true
	}
	for _, l := range b[p : p+n] {
		if inA[string(l)] {
			return nil, false
		}
	}
	if slides(a, p, p+m) || slides(b, p, p+n) {
		return nil, false
	}
	start := max(0, p-diffContext)
	after := min(diffContext, s)
	c1, c2 := p-start+m+after, p-start+n+after
	var h bytes.Buffer
	h.WriteString("@@ -" + hunkRange(start, c1) + " +" + hunkRange(start, c2) + " @@")
	if f := funcLine(a, start-1); len(f) > 0 {
		h.WriteByte(' ')
		h.Write(f)
	}
	h.WriteByte('\n')
	emit := func(sign byte, ls [][]byte) {
		for _, l := range ls {
			h.WriteByte(sign)
			h.Write(l)
			if l[len(l)-1] != '\n' {
				h.WriteString("\n\\ No newline at end of file\n")
			}
		}
	}
	emit(' ', a[start:p])
	emit('-', a[p:p+m])
	emit('+', b[p:p+n])
	emit(' ', a[p+m:p+m+after])
	return h.Bytes(), true
}

// slides reports whether the changed lines [from, to) of ls could move up
// or down over an equal line, as git's diff may move them.
func slides(ls [][]byte, from, to int) bool {
	if from == to {
		return false
	}
	return from > 0 && bytes.Equal(ls[from-1], ls[to-1]) || to < len(ls) && bytes.Equal(ls[from], ls[to])
}

// hunkRange is a hunk header's range of count lines from line start
// (0-based), as git writes it.
func hunkRange(start, count int) string {
	if count == 0 {
		return strconv.Itoa(start) + ",0"
	}
	if count == 1 {
		return strconv.Itoa(start + 1)
	}
	return strconv.Itoa(start+1) + "," + strconv.Itoa(count)
}

// funcLine is what git shows of the nearest line at or above line i that
// starts with a letter, '_' or '$' (its default function line), nothing
// when there is none.
func funcLine(ls [][]byte, i int) []byte {
	for ; i >= 0; i-- {
		l := ls[i]
		if c := l[0]; 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '$' {
			l = l[:min(len(l), funcLineMax)]
			return bytes.TrimRight(l, " \t\n\v\f\r")
		}
	}
	return nil
}
