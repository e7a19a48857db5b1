package git

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"golang.org/x/net/http/httpproxy"
)

// The worker's copy of a repository at an http(s) forge (CloneBare), its
// pushes there (Scratch.Push, Git.Push) and the objects of an agent's
// clone (Clone) run in this process, through go-git's smart HTTP client,
// not as git processes: measured against a Gitea on loopback, a copy, a
// commit and its push cost 51 ms of CPU a repository as processes (git,
// git-remote-http loading libcurl, fetch-pack, index-pack, send-pack,
// pack-objects, and the credential helper's shell, twice) and 10 ms here;
// a fleet of small repositories spends most of its CPU there. Other
// remotes (ssh, local paths) and every other command still run git. What
// git would refuse is refused here as well: http:// to any but a loopback
// address, and the token for any origin but TokenOrigins (a redirect
// elsewhere drops it, and only the first request of a transfer follows
// one, as git does).

// remoteHTTP is an http(s) remote as this package talks to it: go-git's
// client for it (with the environment's proxy and certificate
// authorities), its endpoint, and the token when its origin may have it.
type remoteHTTP struct {
	client transport.Transport
	ep     *transport.Endpoint
	auth   transport.AuthMethod
}

// httpRemote is raw, an http(s) URL CheckURL accepted (http:// only to
// loopback), as a remoteHTTP.
func (g *Git) httpRemote(raw string) (*remoteHTTP, error) {
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return nil, err
	}
	client, err := g.httpClient()
	if err != nil {
		return nil, err
	}
	r := &remoteHTTP{client: client, ep: ep}
	if g.tokenAllowed(raw) && g.token() != "" {
		r.auth = &githttp.BasicAuth{Username: cmp.Or(g.getenv(UsernameEnv), "x-access-token"), Password: g.token()}
	}
	return r, nil
}

// httpClients are the HTTP clients made so far, by what sets them up
// (httpSetup): one per setup, so that connections are kept and reused
// from transfer to transfer.
var httpClients sync.Map

// httpSetup is what an HTTP client takes from the environment git starts
// from: the proxy variables curl reads (http_proxy in lower case alone),
// and the certificate authorities git is given.
type httpSetup struct {
	httpProxy, httpsProxy, noProxy, caInfo, caPath string
}

func (g *Git) httpClient() (transport.Transport, error) {
	s := httpSetup{
		httpProxy:  cmp.Or(g.getenv("http_proxy"), g.getenv("all_proxy"), g.getenv("ALL_PROXY")),
		httpsProxy: cmp.Or(g.getenv("https_proxy"), g.getenv("HTTPS_PROXY"), g.getenv("all_proxy"), g.getenv("ALL_PROXY")),
		noProxy:    cmp.Or(g.getenv("no_proxy"), g.getenv("NO_PROXY")),
		caInfo:     g.getenv("GIT_SSL_CAINFO"),
		caPath:     g.getenv("GIT_SSL_CAPATH"),
	}
	if c, ok := httpClients.Load(s); ok {
		return c.(transport.Transport), nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	proxy := (&httpproxy.Config{HTTPProxy: s.httpProxy, HTTPSProxy: s.httpsProxy, NoProxy: s.noProxy}).ProxyFunc()
	tr.Proxy = func(r *http.Request) (*url.URL, error) { return proxy(r.URL) }
	if s.caInfo != "" || s.caPath != "" {
		// As git: the authorities given stand in for the system's.
		pool := x509.NewCertPool()
		files := []string{s.caInfo}
		if s.caPath != "" {
			entries, err := os.ReadDir(s.caPath)
			if err != nil {
				return nil, fmt.Errorf("GIT_SSL_CAPATH: %w", err)
			}
			for _, e := range entries {
				files = append(files, filepath.Join(s.caPath, e.Name()))
			}
		}
		for _, f := range files {
			if f == "" {
				continue
			}
			pem, err := os.ReadFile(f)
			if err != nil && f == s.caInfo {
				return nil, fmt.Errorf("GIT_SSL_CAINFO: %w", err)
			}
			pool.AppendCertsFromPEM(pem)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c, _ := httpClients.LoadOrStore(s, githttp.NewClientWithOptions(&http.Client{Transport: tr},
		&githttp.ClientOptions{RedirectPolicy: githttp.FollowInitialRedirects}))
	return c.(transport.Transport), nil
}

// transfer runs f, a transfer with remote, in one of g's Slots.
func (g *Git) transfer(ctx context.Context, op string, f func() error) error {
	if g.Slots != nil {
		release, err := g.Slots.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("git %s: wait for a transfer slot: %w", op, err)
		}
		defer release()
	}
	err := f()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return errors.New(g.redact(err.Error()))
	}
	return nil
}

// storage is the repository at dir (bare), reading what it borrows
// (objects/info/alternates, absolute paths) too.
func storage(dir string) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(wholeIndexes{osfs.New(dir)}, cache.NewObjectLRUDefault(),
		filesystem.Options{AlternatesFS: wholeIndexes{osfs.New("/")}})
}

// wholeIndexes is a file system whose pack indexes (*.idx) open read
// whole into memory. go-git reads the first object of a repository it
// opens through the index of each pack, and decodes the index four bytes
// at a time from the file it opens, a read(2) each: a fanout table alone
// is 256. Read whole, an index is one read. Opening a repository and
// reading its tree took 0.29 ms before and 0.19 ms after for one of five
// files, 0.88 and 0.56 ms for a pack of about 1,700 objects.
type wholeIndexes struct{ billy.Filesystem }

func (w wholeIndexes) Open(name string) (billy.File, error) {
	if !strings.HasSuffix(name, ".idx") {
		return w.Filesystem.Open(name)
	}
	f, err := w.Filesystem.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return &memFile{name: f.Name(), Reader: bytes.NewReader(data)}, nil
}

func (w wholeIndexes) Chroot(path string) (billy.Filesystem, error) {
	fs, err := w.Filesystem.Chroot(path)
	if err != nil {
		return nil, err
	}
	return wholeIndexes{fs}, nil
}

// memFile is a file read whole, opened for reading.
type memFile struct {
	name string
	*bytes.Reader
}

func (f *memFile) Name() string { return f.name }

// Stat is what go-git's index decoder asks to check the size.
func (f *memFile) Stat() (fs.FileInfo, error) { return memInfo{f}, nil }

func (f *memFile) Write([]byte) (int, error) { return 0, os.ErrPermission }
func (f *memFile) Truncate(int64) error      { return os.ErrPermission }
func (f *memFile) Close() error              { return nil }
func (f *memFile) Lock() error               { return nil }
func (f *memFile) Unlock() error             { return nil }

type memInfo struct{ f *memFile }

func (i memInfo) Name() string       { return filepath.Base(i.f.name) }
func (i memInfo) Size() int64        { return i.f.Size() }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

// repoStorage is the storage of the repository at dir (a clone or a bare
// repository, see gitPaths), and its object directory.
func (g *Git) repoStorage(ctx context.Context, dir string) (*filesystem.Storage, string, error) {
	objects, _, err := g.gitPaths(ctx, dir)
	if err != nil {
		return nil, "", err
	}
	return storage(filepath.Dir(objects)), objects, nil
}

// fetchedBranch is what cloneHTTP read: the branch, its commit, and
// whether the remote's HEAD names it.
type fetchedBranch struct {
	name          string
	tip           plumbing.Hash
	remoteDefault bool
}

// cloneHTTP reads branch of url (the default branch when empty), depth
// commits of it (all when 0), into the empty repository whose git
// directory is dir, as `git clone --single-branch --no-tags` does: its
// objects, the branch and HEAD naming it, and the remote's shallow
// commits with those the depth cut (a copy of a shallow copy is shallow
// where it is).
func (g *Git) cloneHTTP(ctx context.Context, raw, branch string, depth int, dir string) (fetchedBranch, error) {
	r, err := g.httpRemote(raw)
	if err != nil {
		return fetchedBranch{}, err
	}
	var got fetchedBranch
	err = g.transfer(ctx, "clone", func() error {
		sess, err := r.client.NewUploadPackSession(r.ep, r.auth)
		if err != nil {
			return err
		}
		defer sess.Close()
		ar, err := sess.AdvertisedReferencesContext(ctx)
		if err != nil {
			return err
		}
		refs, err := ar.AllReferences()
		if err != nil {
			return err
		}
		remoteDefault, defaultErr := defaultBranch(refs, ar)
		if branch == "" {
			if defaultErr != nil {
				return defaultErr
			}
			branch = remoteDefault
		}
		if err := CheckBranch(branch); err != nil {
			return err
		}
		got = fetchedBranch{name: branch, remoteDefault: defaultErr == nil && remoteDefault == branch}
		name := plumbing.NewBranchReferenceName(branch)
		want, err := refs.Reference(name)
		if err != nil {
			return fmt.Errorf("remote branch %s not found in %s", branch, Redact(raw))
		}
		req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
		req.Wants = []plumbing.Hash{want.Hash()}
		if depth > 0 {
			req.Depth = packp.DepthCommits(depth)
			if err := req.Capabilities.Set(capability.Shallow); err != nil {
				return err
			}
		}
		if ar.Capabilities.Supports(capability.NoProgress) {
			if err := req.Capabilities.Set(capability.NoProgress); err != nil {
				return err
			}
		}
		resp, err := sess.UploadPack(ctx, req)
		if err != nil {
			return err
		}
		defer resp.Close()
		st := storage(dir)
		if shallow := shallowUnion(ar.Shallows, resp.Shallows); len(shallow) > 0 {
			if err := st.SetShallow(shallow); err != nil {
				return err
			}
		}
		var pack io.Reader = resp
		switch {
		case req.Capabilities.Supports(capability.Sideband64k):
			pack = sideband.NewDemuxer(sideband.Sideband64k, resp)
		case req.Capabilities.Supports(capability.Sideband):
			pack = sideband.NewDemuxer(sideband.Sideband, resp)
		}
		if err := packfile.UpdateObjectStorage(st, pack); err != nil {
			return err
		}
		if _, err := st.EncodedObject(plumbing.CommitObject, want.Hash()); err != nil {
			return fmt.Errorf("the remote sent no commit %s for %s", want.Hash(), branch)
		}
		if err := st.SetReference(plumbing.NewHashReference(name, want.Hash())); err != nil {
			return err
		}
		got.tip = want.Hash()
		return os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: "+name.String()+"\n"), 0o644)
	})
	return got, err
}

// shallowUnion is the shallow commits of a and b, each once.
func shallowUnion(a, b []plumbing.Hash) []plumbing.Hash {
	var out []plumbing.Hash
	seen := map[plumbing.Hash]bool{}
	for _, h := range append(slices.Clip(a), b...) {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// defaultBranch is the branch the remote's HEAD names: as its symref
// capability says, else the one branch at HEAD's commit (main or master
// first), as git guesses it.
func defaultBranch(refs storer.ReferenceStorer, ar *packp.AdvRefs) (string, error) {
	if head, err := refs.Reference(plumbing.HEAD); err == nil && head.Type() == plumbing.SymbolicReference && head.Target().IsBranch() {
		return head.Target().Short(), nil
	}
	if ar.Head != nil {
		for _, b := range []string{"main", "master"} {
			if r, err := refs.Reference(plumbing.NewBranchReferenceName(b)); err == nil && r.Hash() == *ar.Head {
				return b, nil
			}
		}
		iter, err := refs.IterReferences()
		if err == nil {
			var found string
			_ = iter.ForEach(func(r *plumbing.Reference) error {
				if found == "" && r.Name().IsBranch() && r.Type() == plumbing.HashReference && r.Hash() == *ar.Head {
					found = r.Name().Short()
				}
				return nil
			})
			if found != "" {
				return found, nil
			}
		}
	}
	return "", errors.New("the remote names no default branch (HEAD)")
}

// pushHTTP is push to an http(s) remote from the objects in st: each
// update checked against what the remote advertises (a lease against
// Expect; otherwise only a fast-forward), then sent with the value it
// must replace, which the remote checks again as it updates the ref. It
// runs in this process and reads only objects (and the list of shallow
// commits): nothing of the repository's configuration takes part.
func (g *Git) pushHTTP(ctx context.Context, st *filesystem.Storage, raw string, updates []RefUpdate) ([]string, error) {
	r, err := g.httpRemote(raw)
	if err != nil {
		return nil, err
	}
	var created []string
	err = g.transfer(ctx, "push", func() error {
		sess, err := r.client.NewReceivePackSession(r.ep, r.auth)
		if err != nil {
			return err
		}
		defer sess.Close()
		ar, err := sess.AdvertisedReferencesContext(ctx)
		if err != nil {
			return err
		}
		req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
		var refused []string
		for _, u := range updates {
			cmd, why, err := command(st, ar, u)
			switch {
			case err != nil:
				return err
			case why != "":
				refused = append(refused, u.Dst+" "+why)
			case cmd != nil:
				req.Commands = append(req.Commands, cmd)
			}
		}
		if len(refused) > 0 {
			return fmt.Errorf("refused: %s", strings.Join(refused, ", "))
		}
		if len(req.Commands) == 0 {
			return nil // up to date
		}
		if len(req.Commands) > 1 {
			if !ar.Capabilities.Supports(capability.Atomic) {
				return errors.New("the receiving end does not support --atomic push")
			}
			if err := req.Capabilities.Set(capability.Atomic); err != nil {
				return err
			}
		}
		rs, err := sendPack(ctx, sess, st, req, ar)
		if err != nil {
			return err
		}
		if rs != nil {
			if err := rs.Error(); err != nil {
				return err
			}
		}
		for _, c := range req.Commands {
			if c.Old.IsZero() && !c.New.IsZero() {
				created = append(created, c.Name.String())
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("push to %s: %w", Redact(raw), err)
	}
	return created, nil
}

// command is u as the command to send, nil when the remote has it
// already; why, when not "", is why it is refused (as git says it).
func command(st *filesystem.Storage, ar *packp.AdvRefs, u RefUpdate) (*packp.Command, string, error) {
	name := plumbing.ReferenceName(u.Dst)
	var old, want plumbing.Hash
	if h, ok := ar.References[u.Dst]; ok {
		old = h
	}
	switch {
	case u.Src == "":
	case IsObjectID(u.Src):
		want = plumbing.NewHash(u.Src)
	default:
		ref, err := storer.ResolveReference(st, plumbing.ReferenceName(u.Src))
		if err != nil {
			return nil, "", fmt.Errorf("src refspec %s does not match any", u.Src)
		}
		want = ref.Hash()
	}
	if old == want {
		return nil, "", nil // up to date, whatever the lease
	}
	if u.Lease {
		expect := plumbing.ZeroHash
		if u.Expect != "" {
			expect = plumbing.NewHash(u.Expect)
		}
		if old != expect {
			return nil, "[rejected] (stale info)", nil
		}
	} else if !old.IsZero() && !want.IsZero() && old != want {
		c, err := object.GetCommit(st, want)
		if err != nil {
			return nil, "", err
		}
		base, err := object.GetCommit(st, old)
		if err != nil {
			return nil, "[rejected] (fetch first)", nil
		}
		if ok, err := base.IsAncestor(c); err != nil || !ok {
			return nil, "[rejected] (non-fast-forward)", nil
		}
	}
	return &packp.Command{Name: name, Old: old, New: want}, "", nil
}

// sendPack sends req with a pack of the objects its commands' commits
// reach and the remote does not have, and returns the remote's report.
func sendPack(ctx context.Context, sess transport.ReceivePackSession, st *filesystem.Storage, req *packp.ReferenceUpdateRequest, ar *packp.AdvRefs) (*packp.ReportStatus, error) {
	var tips []plumbing.Hash
	for _, c := range req.Commands {
		if !c.New.IsZero() {
			tips = append(tips, c.New)
		}
	}
	if len(tips) == 0 {
		return sess.ReceivePack(ctx, req)
	}
	has := map[plumbing.Hash]bool{}
	for _, h := range ar.References {
		has[h] = true
	}
	hashes, err := missingObjects(st, tips, has)
	if err != nil {
		return nil, err
	}
	rd, wr := io.Pipe()
	req.Packfile = rd
	done := make(chan error, 1)
	go func() {
		// No delta search: the objects of one change rarely delta
		// against each other, and the remote has the ones they would.
		_, err := packfile.NewEncoder(wr, st, !ar.Capabilities.Supports(capability.OFSDelta)).Encode(hashes, 0)
		done <- wr.CloseWithError(err)
	}()
	rs, err := sess.ReceivePack(ctx, req)
	rd.Close()
	if perr := <-done; err == nil && perr != nil {
		err = perr
	}
	return rs, err
}

// missingObjects are the objects tips reach that a repository holding
// the commits has (and all they reach) does not: the commits down to one
// it has (or a shallow one, or a root), and each one's trees and blobs
// not in its first parent's tree, walking only trees that differ. That is
// what a thin pack leaves out, without reading whole histories.
func missingObjects(st *filesystem.Storage, tips []plumbing.Hash, has map[plumbing.Hash]bool) ([]plumbing.Hash, error) {
	shallow, err := st.Shallow()
	if err != nil {
		return nil, err
	}
	boundary := map[plumbing.Hash]bool{}
	for _, h := range shallow {
		boundary[h] = true
	}
	seen := map[plumbing.Hash]bool{}
	var out []plumbing.Hash
	add := func(h plumbing.Hash) bool {
		if seen[h] {
			return false
		}
		seen[h] = true
		out = append(out, h)
		return true
	}
	queue := append([]plumbing.Hash(nil), tips...)
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		if has[h] || seen[h] {
			continue
		}
		c, err := object.GetCommit(st, h)
		if err != nil {
			return nil, err
		}
		add(h)
		var base *object.Tree
		if len(c.ParentHashes) > 0 {
			if p, err := object.GetCommit(st, c.ParentHashes[0]); err == nil {
				if base, err = p.Tree(); err != nil {
					return nil, err
				}
			}
		}
		if err := addTree(st, c.TreeHash, base, add); err != nil {
			return nil, err
		}
		if !boundary[h] {
			queue = append(queue, c.ParentHashes...)
		}
	}
	return out, nil
}

// addTree adds tree h and what it holds that base (nil: none) does not
// have at the same path.
func addTree(st *filesystem.Storage, h plumbing.Hash, base *object.Tree, add func(plumbing.Hash) bool) error {
	if base != nil && base.Hash == h {
		return nil
	}
	if !add(h) {
		return nil
	}
	t, err := object.GetTree(st, h)
	if err != nil {
		return err
	}
	for _, e := range t.Entries {
		var was *object.TreeEntry
		if base != nil {
			was, _ = base.FindEntry(e.Name)
		}
		if was != nil && was.Hash == e.Hash {
			continue
		}
		switch {
		case e.Mode.IsFile():
			add(e.Hash)
		case e.Mode == filemode.Dir:
			var sub *object.Tree
			if was != nil && was.Mode == e.Mode {
				if sub, err = object.GetTree(st, was.Hash); err != nil {
					return err
				}
			}
			if err := addTree(st, e.Hash, sub, add); err != nil {
				return err
			}
		}
		// A submodule's commit is not this repository's object.
	}
	return nil
}
