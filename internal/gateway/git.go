package gateway

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/git"
)

// GitReads serves sandboxes' agents the clones and fetches of the
// repositories their task names, under GitPrefix: git's smart HTTP
// protocol, reads only (upload-pack). The worker reads each repository
// once per sandbox, with its own token, into a copy of its own (Copy),
// and the agent's clone is served from that copy by git http-backend: no
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

	backendOnce sync.Once
	backendPath string
	backendArgs []string
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
	g.backend(s.Dir(), op).ServeHTTP(w, r)
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

// backend is git http-backend serving op of the bare repository at dir.
// It runs with no configuration but the repository's, and serves only
// what serveGit let through: upload-pack. It speaks protocol v0 (the
// request's Git-Protocol header is not passed on): a clone is then two
// requests, the references and the pack, where v2 takes three (its
// references are a request of their own), and the copy holds only the
// references the task asked for anyway.
func (g *Gateway) backend(dir, op string) http.Handler {
	path, args := g.Git.httpBackend()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = "/"+filepath.Base(dir)+"/"+op, ""
		r2.Header.Del("Git-Protocol")
		h := &cgi.Handler{
			Path: path,
			Args: args,
			Dir:  dir,
			Env: []string{
				"GIT_PROJECT_ROOT=" + filepath.Dir(dir), "GIT_HTTP_EXPORT_ALL=1",
				"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + dir,
				"PATH=" + os.Getenv("PATH"),
			},
		}
		h.ServeHTTP(w, r2)
	})
}

// httpBackend is how git http-backend is run: the program in git's
// exec path itself when it is there, found once, so that each request
// starts one process fewer than "git http-backend" (the git command
// only finds the program and starts it); otherwise through git.
func (g *GitReads) httpBackend() (string, []string) {
	g.backendOnce.Do(func() {
		bin := g.Git.Binary
		if bin == "" {
			bin, _ = exec.LookPath("git")
		}
		g.backendPath, g.backendArgs = bin, []string{"http-backend"}
		out, err := exec.Command(bin, "--exec-path").Output()
		if err != nil {
			return
		}
		p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			g.backendPath, g.backendArgs = p, nil
		}
	})
	return g.backendPath, g.backendArgs
}

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
