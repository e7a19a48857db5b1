package approval

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// codeOwnersPaths are where a CODEOWNERS file is looked for, in GitHub's
// order: the first that exists is the one used.
var codeOwnersPaths = []string{".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"}

// maxCodeOwnersBytes is GitHub's limit: a larger CODEOWNERS is ignored
// there, and refused here.
const maxCodeOwnersBytes = 3 << 20

// CodeOwners is a parsed CODEOWNERS file: for each path, who owns it.
type CodeOwners struct {
	// File is where it was read from (".github/CODEOWNERS").
	File  string
	lines []ownerLine
}

type ownerLine struct {
	line    int
	pattern string
	globs   []Glob
	owners  []string
}

// Owner kinds, as CODEOWNERS writes them.
const (
	ownerUser  = iota // @login
	ownerTeam         // @org/team
	ownerEmail        // someone@example.com
)

// Owners returns the owners of file (a slash-separated path relative to
// the repository root) as CODEOWNERS writes them ("@alice",
// "@acme/platform", "carol@example.com"), and the line that gave them.
// The last matching line wins, as on GitHub; a matching line without
// owners leaves the file without one. line is 0 when no line matches.
func (c *CodeOwners) Owners(file string) (owners []string, line int) {
	if c == nil {
		return nil, 0
	}
	for i := len(c.lines) - 1; i >= 0; i-- {
		l := c.lines[i]
		for _, g := range l.globs {
			if g.Match(file) {
				return l.owners, l.line
			}
		}
	}
	return nil, 0
}

// ReadCodeOwners reads the CODEOWNERS file of fsys (the campaigns
// repository at a revision): the first of .github/CODEOWNERS, CODEOWNERS
// and docs/CODEOWNERS that exists, in GitHub's order. It returns nil and
// no error when there is none, and refuses one that is a symbolic link.
func ReadCodeOwners(fsys fs.FS) (*CodeOwners, error) {
	for _, name := range codeOwnersPaths {
		fi, err := fs.Lstat(fsys, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if !fi.Mode().IsRegular() {
			// A symlink could make anything the code owners.
			return nil, fmt.Errorf("read %s: not a regular file (%s); refused", name, fi.Mode().Type())
		}
		f, err := fsys.Open(name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		data, err := io.ReadAll(io.LimitReader(f, maxCodeOwnersBytes+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if len(data) > maxCodeOwnersBytes {
			return nil, fmt.Errorf("read %s: larger than the limit of %d bytes", name, maxCodeOwnersBytes)
		}
		return ParseCodeOwners(name, data)
	}
	return nil, nil
}

// ParseCodeOwners parses a CODEOWNERS file named name, with GitHub's
// rules: one "pattern owner..." per line; # starts a comment (at the
// start of a line, or after a space); owners are @login, @org/team or an
// e-mail address. Patterns follow .gitignore: a pattern with a "/" at its
// start or in its middle is anchored at the repository root, any other
// matches at any depth ("*.yaml", "payments/"); a trailing "/" matches a
// directory's contents; a pattern naming a directory owns everything under
// it, except that "dir/*" owns only the files directly in dir (GitHub's
// documented exception); ** is as in Glob. Like GitHub, it refuses "!"
// negation and [ ] classes, which CODEOWNERS does not support.
//
// A line in error is not skipped, as GitHub skips it, but makes the whole
// file an error: with "last match wins", leaving out a line can hand a
// file to owners the line meant to replace. The error names every bad
// line.
func ParseCodeOwners(name string, data []byte) (*CodeOwners, error) {
	c := &CodeOwners{File: name}
	var errs []error
	for i, text := range strings.Split(string(data), "\n") {
		n := i + 1
		text = stripComment(strings.TrimSpace(text))
		if text == "" {
			continue
		}
		fields := strings.Fields(text)
		l := ownerLine{line: n, pattern: fields[0]}
		globs, err := codeOwnersGlobs(fields[0])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, n, err))
			continue
		}
		l.globs = globs
		for _, o := range fields[1:] {
			if _, err := ownerKind(o); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %w", name, n, err))
				continue
			}
			l.owners = append(l.owners, o)
		}
		c.lines = append(c.lines, l)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// stripComment removes a comment: a # at the start of the line or after
// white space. (A # inside a pattern or owner is kept.)
func stripComment(s string) string {
	if strings.HasPrefix(s, "#") {
		return ""
	}
	for i := 1; i < len(s); i++ {
		if s[i] == '#' && (s[i-1] == ' ' || s[i-1] == '\t') {
			return strings.TrimSpace(s[:i])
		}
	}
	return s
}

// codeOwnersGlobs turns a gitignore-style pattern into the Globs that
// match what it owns.
func codeOwnersGlobs(p string) ([]Glob, error) {
	switch {
	case strings.HasPrefix(p, "!"):
		return nil, fmt.Errorf("pattern %q: negation (!) is not supported in CODEOWNERS", p)
	case strings.ContainsAny(p, "[]"):
		return nil, fmt.Errorf("pattern %q: character ranges ([ ]) are not supported in CODEOWNERS", p)
	case strings.ContainsAny(p, "{}"):
		// Braces are literal in gitignore; Glob would expand them.
		return nil, fmt.Errorf("pattern %q: braces ({ }) are not supported in CODEOWNERS", p)
	case strings.Trim(p, "/") == "":
		return nil, fmt.Errorf("pattern %q matches nothing", p)
	}
	dir := strings.HasSuffix(p, "/")
	body := strings.TrimSuffix(p, "/")
	anchored := strings.HasPrefix(body, "/") || strings.Contains(body, "/")
	body = strings.TrimPrefix(body, "/")
	if !anchored && body != "**" {
		body = "**/" + body
	}
	var pats []string
	switch {
	case dir:
		pats = []string{body + "/**"}
	case body == "**" || strings.HasSuffix(body, "/**"):
		pats = []string{body}
	case strings.HasSuffix(body, "/*"):
		// "docs/*" owns the files directly in docs/, not deeper ("*",
		// now "**/*", owns every file).
		pats = []string{body}
	default:
		// A file of that name, or everything under a directory of it.
		pats = []string{body, body + "/**"}
	}
	globs := make([]Glob, len(pats))
	for i, s := range pats {
		g, err := CompileGlob(s)
		if err != nil {
			return nil, err
		}
		g.pattern = p
		globs[i] = g
	}
	return globs, nil
}

// ownerKind classifies an owner as CODEOWNERS writes it.
func ownerKind(o string) (int, error) {
	if login, ok := strings.CutPrefix(o, "@"); ok {
		org, team, isTeam := strings.Cut(login, "/")
		switch {
		case !isTeam && validLogin(login):
			return ownerUser, nil
		case isTeam && validLogin(org) && team != "" && !strings.ContainsAny(team, "/@"):
			return ownerTeam, nil
		}
		return -1, fmt.Errorf("owner %q: want @login, @org/team or an e-mail address", o)
	}
	if local, domain, ok := strings.Cut(o, "@"); ok && local != "" && strings.Contains(domain, ".") && !strings.Contains(domain, "@") {
		return ownerEmail, nil
	}
	return -1, fmt.Errorf("owner %q: want @login, @org/team or an e-mail address", o)
}

// validLogin reports whether s can be a forge login.
func validLogin(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '-' || r == '_' || r == '.'):
		default:
			return false
		}
	}
	return true
}
