package git

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Bundle writes to dest a git bundle (v2) whose one ref, ref, is commit
// of the repository at dir, with prerequisite (a commit the reader has)
// as its one prerequisite: it holds commit and what commit reaches that
// prerequisite's tree does not (missingObjects), as `git bundle create
// dest ref ^prerequisite` does, in this process. dir is a clone or a
// bare repository.
func (g *Git) Bundle(ctx context.Context, dir, dest, ref, commit, prerequisite string) error {
	if !strings.HasPrefix(ref, "refs/") || strings.ContainsAny(ref, " \n") || !IsObjectID(commit) || !IsObjectID(prerequisite) {
		return fmt.Errorf("bundle: invalid ref %q, commit %q or prerequisite %q", ref, commit, prerequisite)
	}
	st, _, err := g.repoStorage(ctx, dir)
	if err != nil {
		return err
	}
	hashes, err := missingObjects(st, []plumbing.Hash{plumbing.NewHash(commit)}, map[plumbing.Hash]bool{plumbing.NewHash(prerequisite): true})
	if err != nil {
		return fmt.Errorf("bundle %s: %w", commit, err)
	}
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "# v2 git bundle\n-%s\n%s %s\n\n", prerequisite, commit, ref)
	_, err = packfile.NewEncoder(w, st, false).Encode(hashes, 0)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bundle %s: %w", commit, err)
	}
	return nil
}

// bundleHeaderMax bounds the header of a bundle ReadBundle reads: a
// sandbox's has one prerequisite and one ref.
const bundleHeaderMax = 64 << 10

// ReadBundle takes into the scratch repository the objects of the
// bundle in, a stranger's (a sandbox's), as it is read: its header must
// be v2, with prerequisites the scratch has, and name ref; its pack goes
// straight to index-pack, which checks every object as a fetch from a
// stranger is checked (--strict: fsck, and every object an object names
// present). It returns the commit ref names and that commit's tree.
func (s *Scratch) ReadBundle(ctx context.Context, in io.Reader, ref string) (commit, tree string, _ error) {
	r := bufio.NewReader(in)
	st := storage(s.dir)
	line, err := r.ReadString('\n')
	if err != nil || line != "# v2 git bundle\n" {
		return "", "", fmt.Errorf("read the bundle: not a v2 git bundle")
	}
	for read := len(line); ; read += len(line) {
		if line, err = r.ReadString('\n'); err != nil || read > bundleHeaderMax {
			return "", "", fmt.Errorf("read the bundle: its header does not end")
		}
		if line == "\n" {
			break
		}
		id, rest, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if prereq, ok := strings.CutPrefix(id, "-"); ok {
			if !IsObjectID(prereq) || st.HasEncodedObject(plumbing.NewHash(prereq)) != nil {
				return "", "", fmt.Errorf("read the bundle: it builds on %q, which this repository does not have", prereq)
			}
			continue
		}
		if IsObjectID(id) && rest == ref {
			commit = id
		}
	}
	if commit == "" {
		return "", "", fmt.Errorf("read the bundle: it holds no %s", ref)
	}
	if _, err := s.g.run(ctx, invocation{dir: s.dir, gitDir: s.dir, args: []string{"index-pack", "--stdin", "--strict"}, stdin: r}); err != nil {
		return "", "", fmt.Errorf("read the bundle: %w", err)
	}
	// A storage opened anew: st listed the packs before index-pack
	// wrote this one.
	c, err := object.GetCommit(storage(s.dir), plumbing.NewHash(commit))
	if err != nil {
		return "", "", fmt.Errorf("read the bundle: its %s is no commit it holds: %w", ref, err)
	}
	return commit, c.TreeHash.String(), nil
}
