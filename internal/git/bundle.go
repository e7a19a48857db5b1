package git

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Bundle writes to dest a git bundle (v2) whose one ref, ref, is commit
// of the repository at dir, with prerequisite (a commit the reader has)
// as its one prerequisite: it holds commit and what commit reaches that
// prerequisite's tree does not (missingObjects), as `git bundle create
// dest ref ^prerequisite` does, in this process. dir is a clone whose
// .git is a directory, or a bare repository; its alternates are not
// read.
func (g *Git) Bundle(ctx context.Context, dir, dest, ref, commit, prerequisite string) error {
	if !strings.HasPrefix(ref, "refs/") || strings.ContainsAny(ref, " \n") || !IsObjectID(commit) || !IsObjectID(prerequisite) {
		return fmt.Errorf("bundle: invalid ref %q, commit %q or prerequisite %q", ref, commit, prerequisite)
	}
	objects, _, err := g.gitPaths(ctx, dir)
	if err != nil {
		return err
	}
	st := filesystem.NewStorage(osfs.New(filepath.Dir(objects)), cache.NewObjectLRUDefault())
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
