package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/fleetlift/fleetlift/internal/git"
)

// Options say where the campaigns repository is and how to reach it.
type Options struct {
	// URL is a local path (absolute or relative; read in place), or a
	// file://, https:// (http:// only to a loopback address), ssh:// or
	// scp-like (git@host:org/repo.git) URL, which is mirrored into
	// CacheDir. It must not carry credentials.
	URL string
	// CacheDir holds one bare mirror per URL, in a directory named by a
	// hash of the URL. Empty means <user cache dir>/fleetlift/source.
	CacheDir string
	// TokenEnv names the environment variable holding an HTTPS token;
	// empty means FLEETLIFT_GIT_TOKEN. The user name sent with it comes
	// from FLEETLIFT_GIT_USERNAME (default x-access-token). The variable
	// is read at every request, so a rotated token is picked up.
	TokenEnv string
	// SSHKeyFile is an unencrypted private key for ssh URLs; empty means
	// the keys of the running ssh agent.
	SSHKeyFile string
	// KnownHostsFile holds the accepted ssh host keys; empty means
	// $SSH_KNOWN_HOSTS or ~/.ssh/known_hosts. Unknown hosts are refused.
	KnownHostsFile string
	// Timeout bounds each conversation with the remote (listing its refs,
	// fetching); zero means one minute.
	Timeout time.Duration
}

// Stats count the conversations a Repo had with its remote.
type Stats struct {
	// LsRemotes counts the times the remote was asked for its refs.
	LsRemotes int64
	// Fetches counts fetches; one happens only when a ref moved.
	Fetches int64
}

var (
	// ErrNotFound is wrapped by errors for a ref, commit or path that the
	// repository does not have. It lasts until the repository changes.
	ErrNotFound = errors.New("not found")
	// ErrUnreachable is wrapped by errors for a remote that could not be
	// read: network, credentials, or no such repository. Retrying may
	// help. (An empty repository is ErrNotFound.)
	ErrUnreachable = errors.New("remote unreachable")
)

// mirrorSpecs keep a cache mirror equal to the remote's branches and tags,
// moved and deleted ones included.
var mirrorSpecs = []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}

const remoteName = "origin"

// Repo is the campaigns repository. It is safe for concurrent use.
type Repo struct {
	url     string // as given; local paths made absolute
	display string // url with user-info redacted, for messages
	local   bool   // read in place, never fetched
	dir     string // the repository, or its cache mirror
	opts    Options

	// netMu serialises Resolve's conversations with the remote, so that
	// two callers never fetch the same change twice.
	netMu sync.Mutex
	// mu guards every use of repo: go-git's storage is not safe for
	// concurrent use, and fetch writes to it.
	mu   sync.Mutex
	repo *gogit.Repository

	lsRemotes, fetches atomic.Int64
}

// Open opens the repository o.URL names. A local path must be a git
// repository (bare or not); for any other URL, Open creates or reuses the
// cache mirror but does not talk to the remote: Resolve does.
func Open(ctx context.Context, o Options) (*Repo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u, local, err := normalise(o.URL)
	if err != nil {
		return nil, fmt.Errorf("open campaigns repository: %w", err)
	}
	if o.TokenEnv != "" && !envName.MatchString(o.TokenEnv) {
		return nil, fmt.Errorf("open %s: token variable name %q is not a valid environment variable name", git.Redact(u), o.TokenEnv)
	}
	r := &Repo{url: u, display: git.Redact(u), local: local, opts: o}
	if local {
		repo, err := gogit.PlainOpenWithOptions(u, &gogit.PlainOpenOptions{EnableDotGitCommonDir: true})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w (check that it is a git repository)", u, err)
		}
		r.dir, r.repo = u, repo
		return r, nil
	}
	if _, err := r.auth(); err != nil {
		return nil, fmt.Errorf("open %s: %w", r.display, err)
	}
	cacheDir := o.CacheDir
	if cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("open %s: no cache directory given and none found: %w", r.display, err)
		}
		cacheDir = filepath.Join(base, "fleetlift", "source")
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("open %s: create cache: %w", r.display, err)
	}
	sum := sha256.Sum256([]byte(u))
	r.dir = filepath.Join(cacheDir, hex.EncodeToString(sum[:16])+".git")
	unlock, err := lockFile(ctx, r.dir+".lock")
	if err != nil {
		return nil, fmt.Errorf("open %s: lock cache: %w", r.display, err)
	}
	defer unlock()
	if err := r.openMirror(); err != nil {
		return nil, fmt.Errorf("open %s: cache %s: %w", r.display, r.dir, err)
	}
	return r, nil
}

// Stats returns how often r talked to its remote.
func (r *Repo) Stats() Stats {
	return Stats{LsRemotes: r.lsRemotes.Load(), Fetches: r.fetches.Load()}
}

// openMirror opens the cache mirror of r.url, creating it first if there
// is none. A mirror is created under a temporary name and renamed into
// place, so an interrupted creation leaves nothing half made behind.
func (r *Repo) openMirror() error {
	if _, err := os.Stat(r.dir); errors.Is(err, os.ErrNotExist) {
		tmp, err := os.MkdirTemp(filepath.Dir(r.dir), ".tmp-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		repo, err := gogit.PlainInitWithOptions(tmp, &gogit.PlainInitOptions{
			Bare:        true,
			InitOptions: gogit.InitOptions{DefaultBranch: plumbing.Main},
		})
		if err != nil {
			return err
		}
		if _, err := repo.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{r.url}, Fetch: mirrorSpecs}); err != nil {
			return err
		}
		if err := os.Rename(tmp, r.dir); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	repo, err := gogit.PlainOpen(r.dir)
	if err != nil {
		return err
	}
	rem, err := repo.Remote(remoteName)
	if err != nil {
		return err
	}
	if urls := rem.Config().URLs; len(urls) != 1 || urls[0] != r.url {
		return fmt.Errorf("it mirrors %s, not %s; remove it", git.Redact(strings.Join(urls, " ")), r.display)
	}
	r.repo = repo
	return nil
}

// normalise checks a repository location and tells whether it is a local
// path, which it makes absolute.
func normalise(raw string) (string, bool, error) {
	if raw == "" {
		return "", false, errors.New("repository URL is empty")
	}
	if strings.Contains(raw, "://") || isSCPLike(raw) {
		if err := git.CheckURL(raw); err != nil {
			return "", false, err
		}
		return raw, false, nil
	}
	abs, err := filepath.Abs(raw)
	if err != nil {
		return "", false, err
	}
	if err := git.CheckURL(abs); err != nil {
		return "", false, err
	}
	return abs, true, nil
}

// LocalDir is the directory of a campaigns repository given as a path or
// a file:// URL, which can be watched for commits, or "" for one reached
// over a network (a URL with another scheme, or scp-like host:path).
func LocalDir(raw string) string {
	switch {
	case strings.HasPrefix(raw, "file://"):
		return strings.TrimPrefix(raw, "file://")
	case strings.Contains(raw, "://"), isSCPLike(raw):
		return ""
	}
	return raw
}

// isSCPLike reports whether raw reads as user@host:path: a colon before
// the first slash.
func isSCPLike(raw string) bool {
	colon, slash := strings.IndexByte(raw, ':'), strings.IndexByte(raw, '/')
	return colon > 0 && (slash < 0 || colon < slash)
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (r *Repo) tokenEnv() string {
	if r.opts.TokenEnv != "" {
		return r.opts.TokenEnv
	}
	return git.DefaultTokenEnv
}

// auth returns the credentials for r's remote, read now from the
// environment and the key file; nil means none (go-git then uses the ssh
// agent for ssh).
func (r *Repo) auth() (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(r.url)
	if err != nil {
		return nil, err
	}
	switch ep.Protocol {
	case "http", "https":
		tok := os.Getenv(r.tokenEnv())
		if tok == "" {
			return nil, nil
		}
		user := os.Getenv(git.UsernameEnv)
		if user == "" {
			user = "x-access-token"
		}
		return &githttp.BasicAuth{Username: user, Password: tok}, nil
	case "ssh":
		user := ep.User
		if user == "" {
			user = "git"
		}
		var a transport.AuthMethod
		if r.opts.SSHKeyFile != "" {
			pk, err := gitssh.NewPublicKeysFromFile(user, r.opts.SSHKeyFile, "")
			if err != nil {
				return nil, fmt.Errorf("read ssh key %s: %w", r.opts.SSHKeyFile, err)
			}
			if r.opts.KnownHostsFile != "" {
				if pk.HostKeyCallback, err = gitssh.NewKnownHostsCallback(r.opts.KnownHostsFile); err != nil {
					return nil, fmt.Errorf("read known hosts %s: %w", r.opts.KnownHostsFile, err)
				}
			}
			a = pk
		} else if r.opts.KnownHostsFile != "" {
			ag, err := gitssh.NewSSHAgentAuth(user)
			if err != nil {
				return nil, fmt.Errorf("no ssh key file given and no ssh agent: %w", err)
			}
			if ag.HostKeyCallback, err = gitssh.NewKnownHostsCallback(r.opts.KnownHostsFile); err != nil {
				return nil, fmt.Errorf("read known hosts %s: %w", r.opts.KnownHostsFile, err)
			}
			a = ag
		}
		return a, nil
	}
	return nil, nil
}

func (r *Repo) timeout() time.Duration {
	if r.opts.Timeout > 0 {
		return r.opts.Timeout
	}
	return time.Minute
}

// remoteError is a failed conversation with the remote. Its message has
// URL user-info and the token removed.
type remoteError struct {
	msg  string
	kind error // ErrUnreachable, or ErrNotFound for an empty repository
	err  error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return []error{e.kind, e.err} }

// remoteErr describes err, from op on the remote for ref, with what to
// check next.
func (r *Repo) remoteErr(op, ref string, err error) error {
	hint := "cannot reach the remote; check the URL, the network and that the host is up"
	kind := ErrUnreachable
	isHTTP := strings.HasPrefix(r.url, "http://") || strings.HasPrefix(r.url, "https://")
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		if isHTTP {
			hint = fmt.Sprintf("the remote refused the credentials; check the token in $%s", r.tokenEnv())
		} else {
			hint = "the remote refused the credentials; check the ssh key and known hosts"
		}
	case errors.Is(err, transport.ErrRepositoryNotFound):
		hint = "no such repository; check the URL and that the credentials may read it"
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		hint = "the repository has no commits; push a branch first"
		kind = ErrNotFound
	case errors.Is(err, context.DeadlineExceeded):
		hint = fmt.Sprintf("the remote did not answer within %s; check the URL, the network and that the host is up", r.timeout())
	}
	// Some go-git errors end in ": " with nothing after.
	detail := strings.TrimSuffix(strings.TrimSpace(err.Error()), ":")
	msg := fmt.Sprintf("%s %s in %s: %s: %s", op, ref, r.display, hint, detail)
	msg = git.Redact(msg)
	if tok := os.Getenv(r.tokenEnv()); len(tok) >= 4 {
		msg = strings.ReplaceAll(msg, tok, "REDACTED")
	}
	return &remoteError{msg: msg, kind: kind, err: err}
}
