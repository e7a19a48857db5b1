package git

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// maxHTTPCloneBytes bounds the pack an in-process clone holds in memory,
// and maxHTTPCloneObjectBytes the objects it inflates from it: a larger
// repository is left to git clone, which streams.
const (
	maxHTTPCloneBytes       = 32 << 20
	maxHTTPCloneObjectBytes = 128 << 20
)

// httpClone makes the clone Clone would, in this process: a shallow clone
// of one branch over smart HTTP, instead of git clone and the five
// processes it starts (the HTTP helper twice, index-pack, rev-list, the
// credential helper). It fetches the branch's pack, keeps it as the
// clone's one pack with the index git would write for it, checks the
// branch out and writes the index, a tree cache included, as git clone
// leaves them.
//
// Tags come as git clone's tag following brings them: those of the
// commits fetched, annotated or not, in packed-refs with the
// remote-tracking branch.
//
// It takes the common case only. An error wrapping errLeftToGit says git
// clone should make it instead: the URL, the environment, the server or
// the repository is not that case. That is a clone of a tag, of an empty
// repository, with submodules or in full; a pack larger than
// maxHTTPCloneBytes; a tree with a path git would refuse or treat
// specially (a .git in any case, a name Windows reads as another, an
// unknown mode). A tree with a .gitattributes anywhere is checked out by
// git (read-tree), which applies the attributes; the rest is still done
// here.
func (g *Git) httpClone(ctx context.Context, rawURL, dest string, o CloneOptions) error {
	if o.Submodules || o.Depth <= 0 {
		return declined("a full clone, or one with submodules")
	}
	p, err := g.newSmartHTTP(rawURL)
	if err != nil {
		return err
	}
	defer p.release()
	adv, err := p.do(ctx, http.MethodGet, "/info/refs?service=git-upload-pack", "", nil)
	if err != nil {
		return err
	}
	refs, caps, err := parseAdvertisement(adv, "git-upload-pack")
	if err != nil {
		return err
	}
	if !caps["shallow"] || !caps["side-band-64k"] || caps["object-format=sha256"] {
		return declined("the server or the object format is not the common case")
	}
	ref := "refs/heads/" + o.Branch
	if o.Branch == "" {
		for c := range caps {
			if target, ok := strings.CutPrefix(c, "symref=HEAD:"); ok {
				ref = target
			}
		}
	}
	branch, ok := strings.CutPrefix(ref, "refs/heads/")
	tip := refs[ref]
	if !ok || branch == "" || CheckBranch(branch) != nil || strings.ContainsRune(branch, '"') || tip == "" {
		// A tag, a missing branch, an empty repository: git says what
		// it makes of it.
		return declined("no branch %q advertised", ref)
	}
	want := "side-band-64k no-progress shallow"
	for _, c := range []string{"ofs-delta", "include-tag"} {
		if caps[c] {
			want += " " + c
		}
	}
	for c := range caps {
		if strings.HasPrefix(c, "agent=") {
			want += " agent=git/fleetlift"
			break
		}
	}
	var body bytes.Buffer
	writePktLine(&body, fmt.Sprintf("want %s %s\n", tip, want))
	writePktLine(&body, fmt.Sprintf("deepen %d\n", o.Depth))
	body.WriteString("0000")
	writePktLine(&body, "done\n")
	resp, err := p.send(ctx, http.MethodPost, "/git-upload-pack", "application/x-git-upload-pack-request", body.Bytes())
	if err != nil {
		return err
	}
	shallow, pack, err := readUploadPack(bufio.NewReader(resp.Body))
	resp.Body.Close()
	if err != nil {
		return err
	}
	objs, err := readPack(pack)
	if err != nil {
		return err
	}
	c := &cloneWriter{dest: dest, gd: filepath.Join(dest, ".git"), objs: objs}
	co, err := c.plan(tip)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dest, 0o777); err != nil {
		return declined("create %s: %v", dest, err)
	}
	// From here on dest is this clone's: what fails leaves nothing.
	err = c.writeRepository(rawURL, branch, tip, o.Branch == "", shallow, pack, c.followTags(refs))
	if err == nil && co.attributes {
		_, err = g.run(ctx, invocation{dir: dest, args: []string{"read-tree", "--reset", "-u", "HEAD"}})
	} else if err == nil {
		err = c.checkout(co)
	}
	if err != nil {
		if rerr := os.RemoveAll(dest); rerr != nil {
			return fmt.Errorf("remove the failed clone: %w", rerr)
		}
		return err
	}
	// A diff of this clone reads its objects here (quickDiff), not with
	// git; with attributes, git diffs it.
	if !co.attributes {
		rememberClone(packName(pack), objs)
	}
	return nil
}

// readUploadPack reads upload-pack's answer to a shallow fetch: the
// shallow commits, a NAK, then the pack on side band 1.
func readUploadPack(r *bufio.Reader) (shallow []string, pack []byte, err error) {
	var buf []byte
	next := func() (data []byte, flush bool, err error) {
		data, flush, err = readPktLine(r, &buf)
		if err == nil && bytes.HasPrefix(data, []byte("ERR ")) {
			return nil, false, declined("upload-pack: %s", strings.TrimSpace(string(data[4:])))
		}
		return data, flush, err
	}
	for {
		line, flush, err := next()
		if err != nil {
			return nil, nil, err
		}
		if flush {
			break
		}
		id, ok := strings.CutPrefix(strings.TrimSuffix(string(line), "\n"), "shallow ")
		if !ok || !IsObjectID(id) || len(id) != 40 {
			return nil, nil, declined("upload-pack sent %q among the shallow commits", line)
		}
		shallow = append(shallow, id)
	}
	if line, _, err := next(); err != nil {
		return nil, nil, err
	} else if string(bytes.TrimSuffix(line, []byte("\n"))) != "NAK" {
		return nil, nil, declined("upload-pack sent %q, not NAK", line)
	}
	for {
		data, flush, err := next()
		if err != nil {
			return nil, nil, err
		}
		if flush {
			return shallow, pack, nil
		}
		if len(data) == 0 {
			return nil, nil, declined("an empty side-band packet")
		}
		switch data[0] {
		case 1:
			if len(pack)+len(data)-1 > maxHTTPCloneBytes {
				return nil, nil, declined("a pack of more than %d MiB", maxHTTPCloneBytes>>20)
			}
			pack = append(pack, data[1:]...)
		case 2:
		case 3:
			return nil, nil, declined("upload-pack: %s", strings.TrimSpace(string(data[1:])))
		default:
			return nil, nil, declined("side band %d", data[0])
		}
	}
}

// cloneWriter writes a clone's repository and work tree from the objects
// of its pack.
type cloneWriter struct {
	dest, gd string
	objs     *packObjects
}

// checkoutPlan is what the checkout writes: the root tree's entries, in
// index order, and the trees for the index's tree cache.
type checkoutPlan struct {
	entries []checkoutEntry
	trees   []cacheTree
	// attributes: a .gitattributes somewhere; git checks out.
	attributes bool
}

type checkoutEntry struct {
	path string
	mode uint32
	id   [hashLen]byte
}

// cacheTree is one entry of the TREE extension, in its (depth-first)
// order.
type cacheTree struct {
	name     string
	entries  int
	subtrees int
	id       [hashLen]byte
}

// plan reads the tree of commit tip and decides what the checkout writes.
func (c *cloneWriter) plan(tip string) (*checkoutPlan, error) {
	typ, data, ok := c.objs.get(tip)
	if !ok || typ != objCommit {
		return nil, declined("the pack has no commit %s", tip)
	}
	tree, _, err := commitLinks(data)
	if err != nil {
		return nil, err
	}
	var co checkoutPlan
	raw, _ := hex.DecodeString(tree)
	if _, err := c.planTree(&co, "", "", [hashLen]byte(raw), 0); err != nil {
		return nil, err
	}
	return &co, nil
}

// planTree adds the entries of tree id at dir ("" the root, named name in
// its parent) and returns how many index entries it holds.
func (c *cloneWriter) planTree(co *checkoutPlan, dir, name string, id [hashLen]byte, depth int) (int, error) {
	if depth > maxDepth {
		return 0, declined("trees nested too deep")
	}
	typ, data, ok := c.objs.getRaw(id)
	if !ok || typ != objTree {
		return 0, declined("the pack lacks tree %x", id)
	}
	at := len(co.trees)
	co.trees = append(co.trees, cacheTree{name: name, id: id})
	count, subtrees := 0, 0
	prev, prevName := "", ""
	err := treeEntries(data, func(mode, entry string, eid [hashLen]byte) error {
		if !safeTreeName(entry) {
			return declined("a tree entry named %q", entry)
		}
		// Tree order, strictly, and each name once (a file and a
		// directory of one name too): git refuses anything else.
		key := entry
		if mode == "40000" {
			key += "/"
		}
		if key <= prev || entry == prevName {
			return declined("a tree out of order at %q", entry)
		}
		prev, prevName = key, entry
		path := entry
		if dir != "" {
			path = dir + "/" + entry
		}
		if len(path) > maxPath {
			return declined("a path longer than %d bytes", maxPath)
		}
		switch mode {
		case "40000":
			n, err := c.planTree(co, path, entry, eid, depth+1)
			if err != nil {
				return err
			}
			count += n
			subtrees++
			return nil
		case "100644", "100755", "120000":
			if typ, _, ok := c.objs.getRaw(eid); !ok || typ != objBlob {
				return declined("the pack lacks blob %x", eid)
			}
			if entry == ".gitattributes" {
				co.attributes = true
			}
			if mode == "120000" && specialGitFile(entry) {
				// git refuses these as links.
				return declined("a link named %s", entry)
			}
		case "160000":
		default:
			return declined("tree mode %s", mode)
		}
		if len(co.entries) >= maxCheckoutEntries {
			// A tree that names a subtree many times over (a "git
			// bomb") or a very large repository.
			return declined("more than %d files", maxCheckoutEntries)
		}
		m, _ := strconv.ParseUint(mode, 8, 32)
		co.entries = append(co.entries, checkoutEntry{path: path, mode: uint32(m), id: eid})
		count++
		return nil
	})
	if err != nil {
		return 0, err
	}
	if count == 0 {
		return 0, declined("an empty tree")
	}
	co.trees[at].entries, co.trees[at].subtrees = count, subtrees
	return count, nil
}

// safeTreeName is a tree entry name this checkout writes as it is: not
// empty, ".", "..", with no '/', NUL or backslash, and nothing git
// protects against on any file system it guards (a .git in any case, with
// trailing dots or spaces, its 8.3 short name git~1, or a name with a
// colon, which NTFS reads as a stream). Anything else is left to git,
// which refuses or writes it by its own rules.
func safeTreeName(name string) bool {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\:\x00") {
		return false
	}
	lower := strings.ToLower(strings.TrimRight(name, ". "))
	return lower != ".git" && !strings.HasPrefix(lower, "git~") && strings.TrimRight(lower, ". ") != ""
}

// specialGitFile names the files git reads from a work tree and so refuses
// to check out as links.
func specialGitFile(name string) bool {
	switch strings.ToLower(name) {
	case ".gitmodules", ".gitattributes", ".gitignore", ".mailmap":
		return true
	}
	return false
}

// writeRepository writes dest/.git: the pack and its index, the shallow
// commits, HEAD on branch at tip, the remote-tracking branch (and, for the
// remote's default branch, its HEAD) and the configuration git clone
// writes for a single-branch clone.
func (c *cloneWriter) writeRepository(url, branch, tip string, isDefault bool, shallow []string, pack []byte, tags []packedRef) error {
	// Only the directories something goes in, and refs, without which
	// git takes the directory for no repository: git makes the others
	// (objects/info, refs/heads, refs/tags) when it needs them, and each
	// is an inode to make and remove again with the sandbox.
	for _, d := range []string{filepath.Join("objects", "pack"), "refs"} {
		if err := os.MkdirAll(filepath.Join(c.gd, d), 0o777); err != nil {
			return err
		}
	}
	base := filepath.Join(c.gd, "objects", "pack", strings.TrimSuffix(packName(pack), ".pack"))
	if err := writeFileMode(base+".pack", pack, 0o444); err != nil {
		return err
	}
	if err := writeFileMode(base+".idx", c.objs.index(pack[len(pack)-hashLen:]), 0o444); err != nil {
		return err
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n")
	fmt.Fprintf(&cfg, "[remote \"origin\"]\n\turl = %s\n\tfetch = +refs/heads/%s:refs/remotes/origin/%s\n", configValue(url), branch, branch)
	fmt.Fprintf(&cfg, "[branch \"%s\"]\n\tremote = origin\n\tmerge = refs/heads/%s\n", branch, branch)
	type file struct{ path, data string }
	files := []file{
		{"config", cfg.String()},
		{"HEAD", "ref: refs/heads/" + branch + "\n"},
		// The branch, the remote-tracking branch and the tags, packed:
		// one file, not one each (and no refs/heads to make); git reads
		// a branch from packed-refs as from its own file, and writes one
		// the first time the branch moves.
		{"packed-refs", packedRefs(append([]packedRef{{name: "refs/heads/" + branch, id: tip}, {name: "refs/remotes/origin/" + branch, id: tip}}, tags...))},
	}
	if isDefault {
		files = append(files, file{"refs/remotes/origin/HEAD", "ref: refs/remotes/origin/" + branch + "\n"})
	}
	if len(shallow) > 0 {
		slices.Sort(shallow)
		files = append(files, file{"shallow", strings.Join(shallow, "\n") + "\n"})
	}
	for _, f := range files {
		path := filepath.Join(c.gd, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
			return err
		}
		if err := writeFileMode(path, []byte(f.data), 0o666); err != nil {
			return err
		}
	}
	return nil
}

// packName is the name of pack's file in objects/pack, as git names it
// (by the pack's checksum).
func packName(pack []byte) string {
	return "pack-" + hex.EncodeToString(pack[len(pack)-hashLen:]) + ".pack"
}

// packedRef is an entry of packed-refs: a ref, its object and, for an
// annotated tag, the object it peels to.
type packedRef struct{ name, id, peeled string }

// followTags are the advertised tags whose object came with the pack (git
// clone's tag following: a tag of a commit fetched, annotated or not).
func (c *cloneWriter) followTags(refs map[string]string) []packedRef {
	var tags []packedRef
	for name, id := range refs {
		if !strings.HasPrefix(name, "refs/tags/") || strings.HasSuffix(name, "^{}") || !checkRefName(name) {
			continue
		}
		if _, _, ok := c.objs.get(id); !ok {
			continue
		}
		t := packedRef{name: name, id: id}
		if peeled, ok := refs[name+"^{}"]; ok && IsObjectID(peeled) {
			t.peeled = peeled
		}
		tags = append(tags, t)
	}
	return tags
}

// packedRefs is a packed-refs file of refs, sorted by name, each
// annotated tag with the line of what it peels to.
func packedRefs(refs []packedRef) string {
	slices.SortFunc(refs, func(a, b packedRef) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
	for _, r := range refs {
		b.WriteString(r.id + " " + r.name + "\n")
		if r.peeled != "" {
			b.WriteString("^" + r.peeled + "\n")
		}
	}
	return b.String()
}

// checkRefName is a ref name git would take, by its rules
// (git-check-ref-format), kept on the safe side: components that are not
// empty and do not start with a dot or end with .lock, no "..", "@{" or
// control, space or ~^:?*[\ characters, and no trailing dot.
func checkRefName(name string) bool {
	if name == "" || strings.HasSuffix(name, ".") || strings.Contains(name, "..") || strings.Contains(name, "@{") ||
		strings.ContainsAny(name, " ~^:?*[\\\x7f") {
		return false
	}
	for _, r := range name {
		if r < 0x20 {
			return false
		}
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return false
		}
	}
	return true
}

// configValue quotes a configuration value as git writes one.
func configValue(v string) string {
	if !strings.ContainsAny(v, "\"\\#; \t") {
		return v
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\t", `\t`).Replace(v) + `"`
}

// writeFileMode creates path, which must not exist, with data.
func writeFileMode(path string, data []byte, perm os.FileMode) error {
	_, err := createFile(path, data, perm)
	return err
}

// checkout writes co's entries into the work tree and the index git clone
// leaves, its tree cache included. Every file, link and directory is made
// here, new (O_EXCL, O_NOFOLLOW): nothing is written through a link.
func (c *cloneWriter) checkout(co *checkoutPlan) error {
	made := map[string]bool{"": true}
	var mkdirs func(dir string) error
	mkdirs = func(dir string) error {
		if made[dir] {
			return nil
		}
		if err := mkdirs(parentDir(dir)); err != nil {
			return err
		}
		made[dir] = true
		return os.Mkdir(filepath.Join(c.dest, filepath.FromSlash(dir)), 0o777)
	}
	stats := make([]os.FileInfo, len(co.entries))
	for i, e := range co.entries {
		if err := mkdirs(parentDir(e.path)); err != nil {
			return fmt.Errorf("check out %s: %w", e.path, err)
		}
		path := filepath.Join(c.dest, filepath.FromSlash(e.path))
		var err error
		switch e.mode {
		case 0o160000:
			// A submodule's place, empty, as git clone leaves it.
			made[e.path] = true
			err = os.Mkdir(path, 0o777)
		case 0o120000:
			_, target, _ := c.objs.getRaw(e.id)
			if err = os.Symlink(string(target), path); err == nil {
				stats[i], err = os.Lstat(path)
			}
		default:
			_, data, _ := c.objs.getRaw(e.id)
			perm := os.FileMode(0o666)
			if e.mode == 0o100755 {
				perm = 0o777
			}
			stats[i], err = createFile(path, data, perm)
		}
		if err != nil {
			return fmt.Errorf("check out %s: %w", e.path, err)
		}
	}
	return writeFileMode(filepath.Join(c.gd, "index"), indexFile(co, stats), 0o666)
}

func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// createFile creates path with data and perm and returns its stat. The
// path must not exist, not even as a link.
func createFile(path string, data []byte, perm os.FileMode) (os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, perm)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(data)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return fi, err
}

// indexFile is the version 2 index of co's entries with the stat data
// their files have, and the tree cache of co's trees.
func indexFile(co *checkoutPlan, stats []os.FileInfo) []byte {
	ix := indexV2{entries: make([]rawEntry, len(co.entries))}
	for i, e := range co.entries {
		re := &ix.entries[i]
		re.path = e.path
		if stats[i] != nil { // a submodule's place has none
			statData(re.fixed[:40], stats[i])
		}
		binary.BigEndian.PutUint32(re.fixed[24:28], e.mode)
		copy(re.fixed[40:40+hashLen], e.id[:])
		binary.BigEndian.PutUint16(re.fixed[60:62], uint16(min(len(e.path), flagNameMask)))
	}
	var tc bytes.Buffer
	for _, t := range co.trees {
		fmt.Fprintf(&tc, "%s\x00%d %d\n", t.name, t.entries, t.subtrees)
		tc.Write(t.id[:])
	}
	ix.tree = tc.Bytes()
	return ix.encode()
}

// statDataPortable is statData from what every system's FileInfo says:
// the modification time and the size. git compares the rest, sees it
// differ once and looks at the file's content.
func statDataPortable(b []byte, fi os.FileInfo) {
	if fi == nil {
		return
	}
	mt := fi.ModTime()
	binary.BigEndian.PutUint32(b[8:], uint32(mt.Unix()))
	binary.BigEndian.PutUint32(b[12:], uint32(mt.Nanosecond()))
	binary.BigEndian.PutUint32(b[36:], uint32(fi.Size()))
}
