package approval

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Glob is a compiled path pattern over slash-separated paths relative to
// the repository root, such as "campaigns/payments/**". It is anchored:
// the whole path must match. Within one path element, * matches any run
// of characters, ? one character, [a-z] and [^a-z] a class, and \ escapes
// (the syntax of path.Match). An element that is exactly ** matches zero
// or more whole elements: "campaigns/**" matches every file under
// campaigns/, "**/prod.yaml" a prod.yaml at any depth, "a/**/b" a/b,
// a/x/b and a/x/y/b. A ** that is not a whole element acts as *.
// {a,b} matches either alternative ("campaigns/{payments,billing}/**");
// alternatives may nest and hold slashes. A leading "/" is ignored, and a
// trailing "/" stands for "/**" (everything under the directory).
type Glob struct {
	pattern string
	alts    [][]string
}

// maxAlternatives bounds brace expansion: a pattern is written by a person
// and never needs more.
const maxAlternatives = 256

// CompileGlob compiles pattern, refusing an empty one, empty path
// elements ("a//b"), ".." and "." elements, unbalanced braces and
// malformed classes.
func CompileGlob(pattern string) (Glob, error) {
	alts, err := expandBraces(pattern)
	if err != nil {
		return Glob{}, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	g := Glob{pattern: pattern}
	for _, a := range alts {
		segs, err := splitPattern(a)
		if err != nil {
			return Glob{}, fmt.Errorf("pattern %q: %w", pattern, err)
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// MustCompileGlob is CompileGlob for patterns known to be valid; it
// panics on an invalid one.
func MustCompileGlob(pattern string) Glob {
	g, err := CompileGlob(pattern)
	if err != nil {
		panic(err)
	}
	return g
}

func (g Glob) String() string { return g.pattern }

// Match reports whether name, a slash-separated path relative to the
// repository root, matches the pattern. name is cleaned first
// ("./campaigns//a.yaml" is "campaigns/a.yaml"); a name that leaves the
// root ("../x") never matches.
func (g Glob) Match(name string) bool {
	segs, ok := splitName(name)
	if !ok {
		return false
	}
	for _, a := range g.alts {
		if matchSegments(a, segs) {
			return true
		}
	}
	return false
}

// splitName cleans a path and splits it into elements.
func splitName(name string) ([]string, bool) {
	name = path.Clean(strings.TrimLeft(name, "/"))
	if name == "." || name == ".." || strings.HasPrefix(name, "../") {
		return nil, false
	}
	return strings.Split(name, "/"), true
}

// splitPattern splits one brace-free alternative into elements, folding
// runs of ** into one.
func splitPattern(p string) ([]string, error) {
	p = strings.TrimPrefix(p, "/")
	if strings.HasSuffix(p, "/") {
		p += "**"
	}
	if p == "" {
		return nil, errors.New("empty pattern")
	}
	var segs []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "":
			return nil, errors.New("empty path element (\"//\")")
		case ".", "..":
			return nil, fmt.Errorf("%q is not allowed as a path element", s)
		case "**":
			if len(segs) > 0 && segs[len(segs)-1] == "**" {
				continue
			}
		default:
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("element %q: %w", s, err)
			}
		}
		segs = append(segs, s)
	}
	return segs, nil
}

// matchSegments matches path elements against pattern elements. It
// remembers the pairs it has tried, so many ** elements cost
// len(pat)*len(name) steps at most, never an exponential search.
func matchSegments(pat, name []string) bool {
	width := len(name) + 1
	tried := make([]bool, (len(pat)+1)*width)
	var match func(i, j int) bool
	match = func(i, j int) bool {
		for {
			if tried[i*width+j] {
				return false
			}
			tried[i*width+j] = true
			if i == len(pat) {
				return j == len(name)
			}
			if pat[i] == "**" {
				// Zero elements, or one more and try again.
				if match(i+1, j) {
					return true
				}
				if j == len(name) {
					return false
				}
				j++
				continue
			}
			if j == len(name) {
				return false
			}
			if ok, _ := path.Match(pat[i], name[j]); !ok {
				return false
			}
			i, j = i+1, j+1
		}
	}
	return match(0, 0)
}

// expandBraces expands {a,b} alternatives, nested or not. A brace escaped
// with \ is literal, as is a brace inside a [class].
func expandBraces(p string) ([]string, error) {
	open := -1
	depth := 0
	inClass := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			// A ']' right after '[' or '[^' is part of the class.
			if i+1 < len(p) && p[i+1] == '^' {
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				i++
			}
		case c == '{':
			if depth == 0 {
				open = i
			}
			depth++
		case c == '}':
			if depth == 0 {
				return nil, errors.New("unbalanced '}'")
			}
			depth--
			if depth > 0 {
				continue
			}
			var out []string
			for _, alt := range splitAlternatives(p[open+1 : i]) {
				rest, err := expandBraces(alt + p[i+1:])
				if err != nil {
					return nil, err
				}
				for _, r := range rest {
					out = append(out, p[:open]+r)
					if len(out) > maxAlternatives {
						return nil, fmt.Errorf("more than %d alternatives", maxAlternatives)
					}
				}
			}
			return out, nil
		}
	}
	if depth > 0 {
		return nil, errors.New("unbalanced '{'")
	}
	return []string{p}, nil
}

// splitAlternatives splits the inside of one {...} at its top-level
// commas.
func splitAlternatives(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
