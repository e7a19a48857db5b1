package git

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetlift/fleetlift/internal/redact"
)

// Redact replaces the credentials of every URL in s with REDACTED (see
// redact.URLs).
func Redact(s string) string { return redact.URLs(s) }

// redact is Redact that also removes the token itself.
func (g *Git) redact(s string) string {
	s = Redact(s)
	if t := g.token(); len(t) >= 4 {
		s = strings.ReplaceAll(s, t, "REDACTED")
	}
	return s
}

// CheckURL accepts the repository locations fleetlift clones from and
// pushes to: https:// (and http:// to a loopback address), ssh:// and
// scp-like user@host:path, file:// and absolute local paths. It refuses
// credentials in http(s) URLs, transport helpers (ext::, fd::), git://,
// relative paths, '..' in paths, and anything that could be read as an
// option.
func CheckURL(raw string) error {
	if raw == "" {
		return errors.New("repository URL is empty")
	}
	if strings.HasPrefix(raw, "-") {
		return fmt.Errorf("repository URL %q starts with '-'", Redact(raw))
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("repository URL %q contains a control character", Redact(raw))
		}
	}
	if scheme, _, ok := strings.Cut(raw, "://"); ok && !strings.ContainsAny(scheme, "/:@") {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("repository URL %q: %w", Redact(raw), errors.Unwrap(err))
		}
		switch strings.ToLower(u.Scheme) {
		case "https":
		case "http":
			if !isLoopbackHTTP(raw) {
				return fmt.Errorf("repository URL %s: http:// is allowed only to a loopback address; use https://", Redact(raw))
			}
		case "ssh", "git+ssh", "ssh+git":
			if _, hasPassword := u.User.Password(); hasPassword {
				return fmt.Errorf("repository URL %s carries a password: credentials come from the environment", Redact(raw))
			}
			return nil
		case "file":
			if hasDotDot(u.Path) {
				return fmt.Errorf("repository URL %s contains '..'", raw)
			}
			return nil
		default:
			return fmt.Errorf("repository URL %s: transport %q is not allowed (https, ssh, file)", Redact(raw), u.Scheme)
		}
		if u.User != nil {
			return fmt.Errorf("repository URL %s carries credentials: they come from the environment, never the URL", Redact(raw))
		}
		if u.Host == "" {
			return fmt.Errorf("repository URL %s has no host", Redact(raw))
		}
		return nil
	}
	// git reads "<transport>::<address>" as a remote helper (ext::sh -c ...).
	if i := strings.Index(raw, "::"); i >= 0 && !strings.Contains(raw[:i], "/") {
		return fmt.Errorf("repository URL %q: remote helper transports are not allowed", Redact(raw))
	}
	// A colon before the first slash makes it scp-like ssh (user@host:path).
	if colon, slash := strings.IndexByte(raw, ':'), strings.IndexByte(raw, '/'); colon > 0 && (slash < 0 || colon < slash) {
		return nil
	}
	if !strings.HasPrefix(raw, "/") {
		return fmt.Errorf("repository path %q must be absolute", raw)
	}
	if hasDotDot(raw) {
		return fmt.Errorf("repository path %q contains '..'", raw)
	}
	return nil
}

func hasDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

func isHTTP(raw string) bool {
	l := strings.ToLower(raw)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}

// isLoopbackHTTP reports whether raw is an http:// URL to this machine.
func isLoopbackHTTP(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || strings.ToLower(u.Scheme) != "http" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LocalPath returns the directory a local repository location names: the
// path of a file:// URL, or an absolute path. ok is false for anything
// git reaches over a network (https, ssh, scp-like).
func LocalPath(raw string) (path string, ok bool) {
	if scheme, _, found := strings.Cut(raw, "://"); found && !strings.ContainsAny(scheme, "/:@") {
		u, err := url.Parse(raw)
		if err != nil || !strings.EqualFold(u.Scheme, "file") {
			return "", false
		}
		return u.Path, true
	}
	if strings.HasPrefix(raw, "/") {
		return raw, true
	}
	return "", false
}

// CheckLocal refuses a local repository (a file:// URL or an absolute
// path) outside roots, symbolic links resolved: a definition must not
// read, or push to, whatever the worker's user can. Other URLs pass. A
// repository under a root that this process cannot read (a container's
// user, another uid than the operator's) is refused saying which
// directory it cannot read; elsewhere, whether a path exists is not said.
func CheckLocal(raw string, roots []string) error {
	p, ok := LocalPath(raw)
	if !ok {
		return nil
	}
	real, err := filepath.EvalSymlinks(p)
	if err == nil {
		for _, root := range roots {
			if rr, err := filepath.EvalSymlinks(root); err == nil && under(real, rr) {
				return nil
			}
		}
	} else if errors.Is(err, fs.ErrPermission) {
		for _, root := range roots {
			if under(filepath.Clean(p), filepath.Clean(root)) {
				return fmt.Errorf("local repository %s: %w", raw, unreadable(filepath.Clean(root), filepath.Clean(p)))
			}
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		if root, ok := missingUnder(p, roots); ok {
			return fmt.Errorf("local repository %s does not exist: nothing is at %s (under --allow-file-root %s)", raw, filepath.Clean(p), root)
		}
	}
	return fmt.Errorf("local repository %s is outside the directories this worker may use: give the worker (or fleetlift run, up) --allow-file-root with a directory that holds it", raw)
}

// missingUnder reports whether p, which does not exist, would be under
// one of roots, and which: its deepest directory that exists, symbolic
// links resolved, is under that root's. (That a path does not exist is
// said only of paths under the roots: of others, a definition could
// learn what the worker's machine holds.)
func missingUnder(p string, roots []string) (string, bool) {
	dir := filepath.Clean(p)
	for {
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
		real, err := filepath.EvalSymlinks(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", false
		}
		for _, root := range roots {
			if rr, err := filepath.EvalSymlinks(root); err == nil && under(real, rr) {
				return root, true
			}
		}
		return "", false
	}
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// unreadable says which directory from root down to path this process
// may not enter or list, and what to do about it.
func unreadable(root, path string) error {
	dir := root
	rest, _ := filepath.Rel(root, path)
	for _, elem := range append(strings.Split(rest, string(filepath.Separator)), "") {
		var err error
		if elem == "" {
			_, err = os.ReadDir(dir)
		} else {
			_, err = os.Lstat(filepath.Join(dir, elem))
		}
		if errors.Is(err, fs.ErrPermission) {
			mode := ""
			if fi, err := os.Stat(dir); err == nil {
				mode = fmt.Sprintf(" (mode %v)", fi.Mode().Perm())
			}
			return fmt.Errorf("the directory %s%s is under --allow-file-root, but this user (uid %d) may not read it: make it readable to that user (chmod o+rx %s, or its group), or keep repositories in a directory it can read", dir, mode, os.Getuid(), dir)
		}
		if elem == "" || err != nil {
			break
		}
		dir = filepath.Join(dir, elem)
	}
	return fmt.Errorf("this user (uid %d) may not read it: make it and the directories above it up to --allow-file-root readable to that user", os.Getuid())
}
