package source

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

const hashLen = 40

// Resolve returns the commit SHA that ref names: a branch, a tag, "HEAD",
// a full ref name (refs/...), or a full or abbreviated (at least 4 hex
// digits) commit id. Empty means HEAD. A name is looked up as git does:
// refs/<ref>, refs/tags/<ref>, then refs/heads/<ref>; a local repository
// also has refs/remotes/<ref>, so "origin/main" works there.
//
// A local repository is read as it is. For a remote, Resolve lists the
// remote's refs (ls-remote) and fetches only when the remote's SHA for ref
// differs from the cached one; the fetch mirrors every branch and tag,
// forced and pruned, so a force-pushed ref resolves to its new SHA. A full
// commit id that is already cached is answered without asking the remote.
//
// Errors wrap ErrNotFound when the remote answered but has no such ref or
// commit, and ErrUnreachable when it could not be asked.
func (r *Repo) Resolve(ctx context.Context, ref string) (string, error) {
	if ref == "" {
		ref = "HEAD"
	}
	if err := checkRev(ref); err != nil {
		return "", fmt.Errorf("resolve in %s: %w", r.display, err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("resolve %s in %s: %w", ref, r.display, err)
	}
	if r.local {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reindex()
		h, err := r.resolveLocal(ref)
		if err != nil {
			return "", fmt.Errorf("resolve %s in %s: %w", ref, r.display, err)
		}
		return h.String(), nil
	}

	r.netMu.Lock()
	defer r.netMu.Unlock()
	if isHex(ref) && len(ref) == hashLen {
		r.mu.Lock()
		r.reindex()
		h, err := r.peel(plumbing.NewHash(ref))
		r.mu.Unlock()
		if err == nil {
			return h.String(), nil
		}
	}
	refs, err := r.lsRemote(ctx, ref)
	if err != nil {
		return "", err
	}
	// Another process sharing the cache may be fetching into it.
	unlock, err := lockFile(ctx, r.dir+".lock")
	if err != nil {
		return "", fmt.Errorf("resolve %s in %s: lock cache: %w", ref, r.display, err)
	}
	defer unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reindex()
	if err := r.followHead(refs); err != nil {
		return "", fmt.Errorf("resolve %s in %s: cache %s: %w", ref, r.display, r.dir, err)
	}

	if name, want, ok := matchRemote(refs, ref); ok {
		h, err := r.syncRef(ctx, ref, name, want)
		if err != nil {
			return "", err
		}
		return h.String(), nil
	}
	if isHex(ref) && len(ref) >= 4 {
		h, err := r.resolveHash(ref)
		if errors.Is(err, ErrNotFound) && r.stale(refs) {
			if err := r.fetch(ctx, ref, nil); err != nil {
				return "", err
			}
			h, err = r.resolveHash(ref)
		}
		if err != nil {
			return "", fmt.Errorf("resolve %s in %s: %w (no branch or tag of the remote leads to it)", ref, r.display, err)
		}
		return h.String(), nil
	}
	if ref == "HEAD" {
		return "", fmt.Errorf("resolve HEAD in %s: %w: the remote's HEAD names no branch; give a branch name", r.display, ErrNotFound)
	}
	return "", fmt.Errorf("resolve %s in %s: %w: the remote has no branch or tag of that name; check the name", ref, r.display, ErrNotFound)
}

// syncRef makes the cache's ref name hold want, the remote's value,
// fetching only if it does not yet, and returns the commit it names. The
// caller holds r.mu.
func (r *Repo) syncRef(ctx context.Context, ref string, name plumbing.ReferenceName, want plumbing.Hash) (plumbing.Hash, error) {
	if name == plumbing.HEAD {
		// The remote did not say which branch its HEAD is: all we know
		// is the commit. Fetching the branches and tags brings it
		// unless HEAD is detached on a commit no branch leads to.
		h, err := r.peel(want)
		if errors.Is(err, ErrNotFound) {
			if err := r.fetch(ctx, ref, nil); err != nil {
				return plumbing.ZeroHash, err
			}
			h, err = r.peel(want)
		}
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("resolve %s in %s: %w", ref, r.display, err)
		}
		return h, nil
	}
	var extra []config.RefSpec
	if !mirrored(name) {
		// Such as refs/pull/1/head: fetched on demand.
		extra = []config.RefSpec{config.RefSpec("+" + name + ":" + name)}
	}
	if cur, err := r.repo.Storer.Reference(name); err != nil || cur.Hash() != want {
		if err := r.fetch(ctx, ref, extra); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	cur, err := r.repo.Storer.Reference(name)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("resolve %s in %s: %s is missing after a fetch: %w", ref, r.display, name, err)
	}
	h, err := r.peel(cur.Hash())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("resolve %s in %s: %w", ref, r.display, err)
	}
	return h, nil
}

// followHead points the cache's HEAD at the branch the remote's HEAD
// points to, so that FS(ctx, "HEAD", ...) reads what the remote calls HEAD.
// The caller holds r.mu.
func (r *Repo) followHead(refs map[plumbing.ReferenceName]*plumbing.Reference) error {
	head, ok := refs[plumbing.HEAD]
	if !ok || head.Type() != plumbing.SymbolicReference {
		return nil
	}
	cur, err := r.repo.Storer.Reference(plumbing.HEAD)
	if err == nil && cur.Type() == plumbing.SymbolicReference && cur.Target() == head.Target() {
		return nil
	}
	return r.repo.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, head.Target()))
}

// lsRemote lists the remote's refs; ref is only for messages.
func (r *Repo) lsRemote(ctx context.Context, ref string) (map[plumbing.ReferenceName]*plumbing.Reference, error) {
	auth, err := r.auth()
	if err != nil {
		return nil, fmt.Errorf("resolve %s in %s: %w", ref, r.display, err)
	}
	// A remote over memory storage: listing needs no repository, and
	// must not hold r.mu while it waits for the network.
	rem := gogit.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: remoteName, URLs: []string{r.url}})
	lctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	r.lsRemotes.Add(1)
	list, err := rem.ListContext(lctx, &gogit.ListOptions{Auth: auth, PeelingOption: gogit.IgnorePeeled})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("resolve %s in %s: %w", ref, r.display, ctx.Err())
		}
		return nil, r.remoteErr("resolve", ref, err)
	}
	refs := make(map[plumbing.ReferenceName]*plumbing.Reference, len(list))
	for _, rf := range list {
		refs[rf.Name()] = rf
	}
	return refs, nil
}

// fetch brings the cache mirror level with the remote. The caller holds
// r.mu and the cache lock.
func (r *Repo) fetch(ctx context.Context, ref string, extra []config.RefSpec) error {
	auth, err := r.auth()
	if err != nil {
		return fmt.Errorf("fetch %s from %s: %w", ref, r.display, err)
	}
	fctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	r.fetches.Add(1)
	err = r.repo.FetchContext(fctx, &gogit.FetchOptions{
		RemoteName: remoteName,
		RefSpecs:   append(slices.Clone(mirrorSpecs), extra...),
		Auth:       auth,
		Tags:       gogit.NoTags, // the refspecs mirror the tags
		Force:      true,
		Prune:      true,
	})
	if err == nil || errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("fetch %s from %s: %w", ref, r.display, ctx.Err())
	}
	return r.remoteErr("fetch", ref, err)
}

// matchRemote finds ref among the remote's refs and returns the name the
// cache keeps it under and its value. A symbolic HEAD becomes the branch
// it points to.
func matchRemote(refs map[plumbing.ReferenceName]*plumbing.Reference, ref string) (plumbing.ReferenceName, plumbing.Hash, bool) {
	if ref == "HEAD" {
		head, ok := refs[plumbing.HEAD]
		if !ok {
			return "", plumbing.ZeroHash, false
		}
		if head.Type() != plumbing.SymbolicReference {
			return plumbing.HEAD, head.Hash(), true
		}
		target, ok := refs[head.Target()]
		if !ok || target.Type() != plumbing.HashReference {
			return "", plumbing.ZeroHash, false
		}
		return target.Name(), target.Hash(), true
	}
	for _, name := range candidates(ref, false) {
		if rf, ok := refs[name]; ok && rf.Type() == plumbing.HashReference {
			return name, rf.Hash(), true
		}
	}
	return "", plumbing.ZeroHash, false
}

// stale reports whether a branch or tag of the remote is missing from
// the cache or differs there.
func (r *Repo) stale(refs map[plumbing.ReferenceName]*plumbing.Reference) bool {
	for name, rf := range refs {
		if !mirrored(name) || rf.Type() != plumbing.HashReference {
			continue
		}
		cur, err := r.repo.Storer.Reference(name)
		if err != nil || cur.Hash() != rf.Hash() {
			return true
		}
	}
	return false
}

func mirrored(name plumbing.ReferenceName) bool {
	return name.IsBranch() || name.IsTag()
}

// candidates are the ref names ref may mean, in git's order.
func candidates(ref string, withRemotes bool) []plumbing.ReferenceName {
	if ref == "HEAD" || strings.HasPrefix(ref, "refs/") {
		return []plumbing.ReferenceName{plumbing.ReferenceName(ref)}
	}
	names := []plumbing.ReferenceName{
		plumbing.ReferenceName("refs/" + ref),
		plumbing.NewTagReferenceName(ref),
		plumbing.NewBranchReferenceName(ref),
	}
	if withRemotes {
		names = append(names,
			plumbing.ReferenceName("refs/remotes/"+ref),
			plumbing.ReferenceName("refs/remotes/"+ref+"/HEAD"))
	}
	return names
}

// resolveLocal resolves ref in r's repository (or cache) without any
// network. The caller holds r.mu.
func (r *Repo) resolveLocal(ref string) (plumbing.Hash, error) {
	if isHex(ref) && len(ref) == hashLen {
		if h, err := r.peel(plumbing.NewHash(ref)); err == nil {
			return h, nil
		}
	}
	for _, name := range candidates(ref, true) {
		rf, err := r.repo.Reference(name, true)
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			continue
		}
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return r.peel(rf.Hash())
	}
	if isHex(ref) && len(ref) >= 4 {
		return r.resolveHash(ref)
	}
	return plumbing.ZeroHash, fmt.Errorf("%w: no branch, tag or commit of that name", ErrNotFound)
}

// resolveHash finds the one commit whose id starts with prefix (tags are
// peeled). The caller holds r.mu.
func (r *Repo) resolveHash(prefix string) (plumbing.Hash, error) {
	prefix = strings.ToLower(prefix)
	if len(prefix) == hashLen {
		return r.peel(plumbing.NewHash(prefix))
	}
	hp, ok := r.repo.Storer.(interface {
		HashesWithPrefix([]byte) ([]plumbing.Hash, error)
	})
	if !ok {
		return plumbing.ZeroHash, errors.New("abbreviated commit ids are not supported by this storage")
	}
	b, err := hex.DecodeString(prefix[:len(prefix)&^1])
	if err != nil {
		return plumbing.ZeroHash, err
	}
	hashes, err := hp.HashesWithPrefix(b)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	var found []plumbing.Hash
	for _, h := range hashes {
		if !strings.HasPrefix(h.String(), prefix) {
			continue
		}
		if c, err := r.peel(h); err == nil && !slices.Contains(found, c) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return plumbing.ZeroHash, fmt.Errorf("%w: no commit id starts with %s", ErrNotFound, prefix)
	case 1:
		return found[0], nil
	}
	return plumbing.ZeroHash, fmt.Errorf("commit id %s is ambiguous: %d commits start with it; give more digits", prefix, len(found))
}

// peel follows annotated tags from h to a commit. The caller holds r.mu.
func (r *Repo) peel(h plumbing.Hash) (plumbing.Hash, error) {
	for range 10 {
		obj, err := r.repo.Storer.EncodedObject(plumbing.AnyObject, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return plumbing.ZeroHash, fmt.Errorf("%w: commit %s", ErrNotFound, h)
		}
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read object %s: %w", h, err)
		}
		switch obj.Type() {
		case plumbing.CommitObject:
			return h, nil
		case plumbing.TagObject:
			tag, err := object.DecodeTag(r.repo.Storer, obj)
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("read tag %s: %w", h, err)
			}
			h = tag.Target
		default:
			return plumbing.ZeroHash, fmt.Errorf("%s is a %s, not a commit", h, obj.Type())
		}
	}
	return plumbing.ZeroHash, fmt.Errorf("tag %s: too many levels of tags", h)
}

// reindex makes go-git see pack files that git or another process wrote
// since it last looked. The caller holds r.mu.
func (r *Repo) reindex() {
	if ri, ok := r.repo.Storer.(interface{ Reindex() }); ok {
		ri.Reindex()
	}
}

// checkRev refuses what is not a plain branch, tag, ref name or commit id.
func checkRev(rev string) error {
	bad := strings.HasPrefix(rev, "-") || strings.HasPrefix(rev, "/") || strings.HasSuffix(rev, "/") ||
		strings.HasSuffix(rev, ".") || strings.Contains(rev, "..") || strings.Contains(rev, "@{") ||
		strings.Contains(rev, "//") || strings.ContainsAny(rev, " ~^:?*[\\")
	for _, c := range rev {
		if c < 0x20 || c == 0x7f {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("%q is not a branch, tag or commit id (revision expressions such as main~1 are not supported)", rev)
	}
	return nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}
