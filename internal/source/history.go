package source

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Change is the commit that last changed a file: its hash, author and
// committer.
type Change struct {
	Hash string
	// Parent is the commit's first parent, "" for a root commit.
	Parent         string
	AuthorName     string
	AuthorEmail    string
	CommitterName  string
	CommitterEmail string
}

// maxHistory bounds how many commits LastChanges walks back: a path not
// changed within them is reported as changed by the oldest one seen.
const maxHistory = 10000

// LastChanges returns, for each path (relative to the repository root),
// the most recent commit reachable from rev along first parents that
// changed it: whose tree has another blob at the path than its first
// parent's. Paths missing at rev are left out. It walks history once for
// all paths, and only until each is found.
func (r *Repo) LastChanges(ctx context.Context, rev string, paths []string) (map[string]Change, error) {
	if err := checkRev(rev); err != nil {
		return nil, fmt.Errorf("read history of %s: %w", r.display, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h, err := r.resolveLocal(rev)
	if err != nil {
		return nil, fmt.Errorf("read history of %s at %s: %w", r.display, rev, err)
	}
	c, err := object.GetCommit(r.repo.Storer, h)
	if err != nil {
		return nil, fmt.Errorf("read history of %s at %s: %w", r.display, rev, err)
	}
	want := map[string]plumbing.Hash{} // path → blob at the commit being looked at
	for _, p := range paths {
		p = strings.Trim(path.Clean(p), "/")
		if b, ok := blobAt(c, p); ok {
			want[p] = b
		}
	}
	out := map[string]Change{}
	for n := 0; len(want) > 0; n++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var parent *object.Commit
		if c.NumParents() > 0 && n < maxHistory {
			if parent, err = c.Parent(0); err != nil {
				return nil, fmt.Errorf("read history of %s: %w", r.display, err)
			}
		}
		for p, blob := range want {
			var pb plumbing.Hash
			var ok bool
			if parent != nil {
				pb, ok = blobAt(parent, p)
			}
			if !ok || pb != blob {
				out[p] = changeOf(c)
				delete(want, p)
			}
		}
		if parent == nil {
			break
		}
		c = parent
	}
	return out, nil
}

func blobAt(c *object.Commit, p string) (plumbing.Hash, bool) {
	t, err := c.Tree()
	if err != nil {
		return plumbing.ZeroHash, false
	}
	e, err := t.FindEntry(p)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	return e.Hash, true
}

func changeOf(c *object.Commit) Change {
	ch := Change{Hash: c.Hash.String(), AuthorName: c.Author.Name, AuthorEmail: c.Author.Email,
		CommitterName: c.Committer.Name, CommitterEmail: c.Committer.Email}
	if len(c.ParentHashes) > 0 {
		ch.Parent = c.ParentHashes[0].String()
	}
	return ch
}
