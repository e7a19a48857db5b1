package gateway

import (
	"cmp"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/git"
)

// GitReads serves sandboxes' agents the clones and fetches of the
// repositories their task names, under GitPrefix: git's smart HTTP
// protocol, reads only (upload-pack). The worker reads each repository
// once per sandbox, with its own token, into a copy of its own (Copy),
// and the agent's clone is served from that copy by git upload-pack: no
// token for the forge is in a sandbox, the forge is read once, and the
// worker proposes the sandbox's change from the same copy (see
// activity.Delivery), its base already there.
type GitReads struct {
	// Git reads the repositories: with the worker's token where its
	// TokenOrigins allow, into its ScratchDir.
	Git *git.Git
	// CopyTimeout bounds reading one repository (default 10 minutes).
	CopyTimeout time.Duration
	// FileRoots, when set, are the worker's --allow-file-root
	// directories: the local repositories (file:// URLs and absolute
	// paths) under them are served too, to sandboxes that cannot see the
	// worker's files (Kubernetes pods). Without them only http(s)
	// repositories are.
	FileRoots []string
}

// serves reports whether the gateway reads repository raw for its
// sandboxes: an http(s) URL without credentials in it, or a local
// repository under FileRoots (git.CheckLocal).
func (g *GitReads) serves(raw string) bool {
	if _, local := git.LocalPath(raw); local {
		return len(g.FileRoots) > 0 && git.CheckLocal(raw, g.FileRoots) == nil
	}
	u, err := url.Parse(raw)
	return raw != "" && err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil
}

// Repository is one repository a sandbox may read: where it is, and
// what of it its task asks for.
type Repository struct {
	URL    string
	Branch string // empty: the default branch
	Depth  int    // 0: all of its history
}

// GitPrefix is where the gateway serves GitReads: GitPrefix + the
// repository's name in the manifest, path-escaped, is the URL to clone.
const GitPrefix = "/git/"

// copyOf is the worker's copy of one repository for one sandbox, read
// when the sandbox first asks for it.
type copyOf struct {
	once    sync.Once
	scratch *git.Scratch
	err     error
}

// gitKey is the sandbox key of a git request: git sends it as the
// password of basic authentication.
func gitKey(r *http.Request) string {
	_, pass, _ := r.BasicAuth()
	return pass
}

// serveGit serves a git read of one of the box's repositories, or refuses
// it: anything but upload-pack (403), a repository the task does not
// name (404), one that could not be read (502).
func (g *Gateway) serveGit(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	b := g.boxes[gitKey(r)]
	g.mu.Unlock()
	if b == nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="fleetlift gateway"`)
		http.Error(w, "fleetlift gateway: not a key of a sandbox this gateway serves", http.StatusUnauthorized)
		return
	}
	if g.Git == nil || g.Git.Git == nil {
		http.Error(w, "fleetlift gateway: this worker serves no repositories", http.StatusServiceUnavailable)
		return
	}
	rest := strings.TrimPrefix(r.URL.EscapedPath(), GitPrefix)
	escaped, op, ok := strings.Cut(rest, "/")
	name, err := url.PathUnescape(escaped)
	if !ok || err != nil {
		http.Error(w, "fleetlift gateway: not a repository path", http.StatusNotFound)
		return
	}
	switch {
	case op == "info/refs" && r.Method == http.MethodGet && r.URL.Query().Get("service") == "git-upload-pack":
	case op == "git-upload-pack" && r.Method == http.MethodPost:
	default:
		http.Error(w, "fleetlift gateway: sandboxes only read repositories (git-upload-pack)", http.StatusForbidden)
		return
	}
	var repo Repository
	if b.Repositories != nil {
		repo = b.Repositories()[name]
	}
	if !g.Git.serves(repo.URL) {
		http.Error(w, "fleetlift gateway: the task names no repository "+name+" this gateway serves", http.StatusNotFound)
		return
	}
	s, err := g.copy(b, name, repo)
	if err != nil {
		http.Error(w, "fleetlift gateway: "+git.Redact(err.Error()), http.StatusBadGateway)
		return
	}
	g.uploadPack(w, r, s.Dir(), op)
}

// copy is b's copy of repository name, read on first use.
func (g *Gateway) copy(b *box, name string, repo Repository) (*git.Scratch, error) {
	b.mu.Lock()
	if b.copies == nil {
		b.copies = map[string]*copyOf{}
	}
	c := b.copies[name]
	if c == nil {
		c = &copyOf{}
		b.copies[name] = c
	}
	ctx := b.ctx
	b.mu.Unlock()
	c.once.Do(func() {
		timeout := g.Git.CopyTimeout
		if timeout <= 0 {
			timeout = 10 * time.Minute
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c.scratch, c.err = g.Git.Git.CloneBare(cctx, repo.URL, repo.Branch, repo.Depth)
	})
	return c.scratch, c.err
}

// uploadPack serves op (info/refs, or git-upload-pack) of the bare
// repository at dir as git http-backend would, starting only git
// upload-pack (http-backend would be a second process for each of a
// clone's two requests). It runs with no configuration but the
// repository's, and serves only what serveGit let through: upload-pack.
// It speaks protocol v0 (the request's Git-Protocol header is not passed
// on): a clone is then two requests, the references and the pack, where
// v2 takes three (its references are a request of their own), and the
// copy holds only the references the task asked for anyway.
func (g *Gateway) uploadPack(w http.ResponseWriter, r *http.Request, dir, op string) {
	args := []string{"upload-pack", "--stateless-rpc"}
	var in io.Reader
	if op == "info/refs" {
		args = append(args, "--advertise-refs")
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
	} else {
		if r.Header.Get("Content-Type") != "application/x-git-upload-pack-request" {
			http.Error(w, "fleetlift gateway: not an upload-pack request", http.StatusUnsupportedMediaType)
			return
		}
		in = http.MaxBytesReader(w, r.Body, maxUploadPackRequest)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(in)
			if err != nil {
				http.Error(w, "fleetlift gateway: "+err.Error(), http.StatusBadRequest)
				return
			}
			defer zr.Close()
			in = zr
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	}
	w.Header().Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
	bin := cmp.Or(g.Git.Git.Binary, "git")
	cmd := exec.CommandContext(r.Context(), bin, append(args, dir)...)
	cmd.Dir = dir
	cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = in
	if op == "info/refs" {
		// What http-backend puts before the references.
		_, _ = io.WriteString(w, "001e# service=git-upload-pack\n0000")
	}
	// What fails once the answer has begun reaches the sandbox's git
	// as a cut answer, which it reports; the copy is the worker's own.
	cmd.Stdout = w
	_ = cmd.Run()
}

// maxUploadPackRequest bounds what a sandbox's git sends to upload-pack:
// its wants and haves.
const maxUploadPackRequest = 16 << 20

// Copy is the worker's copy of repository name that sandbox id read
// through the gateway, if it read it: the change the sandbox leaves for
// it is proposed from there. The gateway removes it when the sandbox's
// key is closed.
func (g *Gateway) Copy(id, name string) (*git.Scratch, bool) {
	var c *copyOf
	g.mu.Lock()
	for _, b := range g.boxes {
		if b.ID == id {
			b.mu.Lock()
			c = b.copies[name]
			b.mu.Unlock()
		}
	}
	g.mu.Unlock()
	if c == nil {
		return nil, false
	}
	c.once.Do(func() {}) // wait for a read under way
	return c.scratch, c.err == nil && c.scratch != nil
}
