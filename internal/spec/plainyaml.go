package spec

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// parsePlainYAML reads the plain subset of YAML that definition files are
// mostly written in, much faster than a full YAML parser. ok is false for
// anything outside the subset; the caller then uses CUE's YAML decoder.
// Within the subset the result is what that decoder gives
// (TestPlainYAMLMatchesCUE and FuzzPlainYAML compare them):
//
//   - block mappings at the top level (column 1) and nested, with keys of
//     letters, digits and "_./-" starting with a letter or "_", each
//     followed by ": " and a value or by nothing and a nested block;
//   - block sequences ("- " items, also at their key's indentation) of
//     such mappings or of single-line values;
//   - single-line values: plain scalars that YAML resolves to a string or
//     a decimal integer below 10^15, true and false in YAML's spellings,
//     quoted strings without escapes or inner quotes, and flow sequences
//     of those on one line;
//   - literal block scalars ("|" and "|-") with their indentation set by
//     their first line;
//   - blank lines and whole-line comments.
//
// Everything else (tabs, carriage returns, control and Unicode line-break
// characters, a byte order mark, document markers, directives, anchors,
// aliases, tags, flow mappings, multi-line plain or quoted scalars,
// comments after a value, folded scalars, explicit indentation or keep
// chomping, null, floats and other integer forms) is left to the decoder.
func parsePlainYAML(src []byte) (*node, bool) {
	if !plainText(src) {
		return nil, false
	}
	p := &plainParser{src: string(src)}
	p.split()
	i := p.next(0)
	if i == len(p.lines) || p.lines[i].indent != 0 {
		return nil, false
	}
	n, ok := p.mapping(0)
	if !ok || p.next(p.pos) != len(p.lines) {
		return nil, false
	}
	return n, true
}

// plainText reports whether src is valid UTF-8 without the characters the
// plain subset leaves out: control characters but newline (tabs and
// carriage returns among them), DEL, C1 controls (NEL among them), the
// Unicode line and paragraph separators, the byte order mark and the
// non-characters U+FFFE and U+FFFF.
func plainText(src []byte) bool {
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n') || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return false
		case r < 0xa0, r == 0x2028, r == 0x2029, r == 0xfeff, r == 0xfffe, r == 0xffff:
			return false
		}
		i += size
	}
	return true
}

type plainParser struct {
	src   string
	lines []plainLine
	// pos is the index of the first line not yet read.
	pos int
}

// plainLine is one line: its indentation in spaces and the rest, with
// trailing spaces removed; raw keeps them for block scalars.
type plainLine struct {
	indent int
	text   string
	raw    string
	// last is set on a final line without a newline.
	last bool
}

func (p *plainParser) split() {
	s := p.src
	p.lines = make([]plainLine, 0, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		line, rest, found := strings.Cut(s, "\n")
		s = rest
		ind := 0
		for ind < len(line) && line[ind] == ' ' {
			ind++
		}
		p.lines = append(p.lines, plainLine{indent: ind, text: strings.TrimRight(line[ind:], " "), raw: line, last: !found})
	}
}

// skip reports whether line l is blank or a whole-line comment.
func (l plainLine) skip() bool { return l.text == "" || l.text[0] == '#' }

// next returns the index of the first line from i on that is neither
// blank nor a comment.
func (p *plainParser) next(i int) int {
	for i < len(p.lines) && p.lines[i].skip() {
		i++
	}
	return i
}

// mapping reads a block mapping whose keys are at indent, from p.pos.
func (p *plainParser) mapping(indent int) (*node, bool) {
	n := &node{kind: nMap}
	for {
		i := p.next(p.pos)
		if i == len(p.lines) || p.lines[i].indent < indent {
			p.pos = i
			return n, len(n.fields) > 0
		}
		l := p.lines[i]
		if l.indent > indent {
			return nil, false
		}
		key, rest, ok := plainKey(l.text)
		if !ok {
			// A sequence item where a key belongs, or no key at all.
			return nil, false
		}
		f := field{name: key, line: i + 1, col: indent + 1}
		p.pos = i + 1
		if rest == "" {
			// The value is the block below: more indented, or a
			// sequence at the key's own indentation.
			j := p.next(p.pos)
			if j == len(p.lines) {
				return nil, false
			}
			next := p.lines[j]
			var v *node
			switch {
			case next.indent > indent && isItem(next.text):
				v, ok = p.sequence(next.indent)
			case next.indent > indent:
				v, ok = p.mapping(next.indent)
			case next.indent == indent && isItem(next.text):
				v, ok = p.sequence(indent)
			default:
				// An empty value is null.
				return nil, false
			}
			if !ok {
				return nil, false
			}
			f.value = v
		} else {
			v, ok := p.inline(rest, indent)
			if !ok {
				return nil, false
			}
			f.value = v
			// A value on the key's line ends there: a more indented
			// line after it would continue it.
			if j := p.next(p.pos); j < len(p.lines) && p.lines[j].indent > indent {
				return nil, false
			}
		}
		n.fields = append(n.fields, f)
	}
}

func isItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// sequence reads a block sequence whose "- " are at indent, from p.pos.
func (p *plainParser) sequence(indent int) (*node, bool) {
	n := &node{kind: nList}
	for {
		i := p.next(p.pos)
		if i == len(p.lines) || p.lines[i].indent < indent {
			p.pos = i
			return n, true
		}
		l := p.lines[i]
		if l.indent > indent || !strings.HasPrefix(l.text, "- ") {
			if l.indent == indent && !isItem(l.text) {
				// The next key of the mapping this sequence is the
				// value of, at the same indentation.
				p.pos = i
				return n, true
			}
			return nil, false
		}
		item := l.text[2:]
		if item == "" || item[0] == ' ' || item[0] == '-' {
			return nil, false
		}
		if _, _, ok := plainKey(item); ok {
			// A mapping that starts on the item's line, its keys two
			// columns in.
			p.lines[i] = plainLine{indent: indent + 2, text: item, raw: l.raw, last: l.last}
			p.pos = i
			v, ok := p.mapping(indent + 2)
			if !ok {
				return nil, false
			}
			n.list = append(n.list, v)
			continue
		}
		if item[0] == '|' {
			return nil, false
		}
		p.pos = i + 1
		v, ok := p.inline(item, indent)
		if !ok {
			return nil, false
		}
		if j := p.next(p.pos); j < len(p.lines) && p.lines[j].indent > indent {
			return nil, false
		}
		n.list = append(n.list, v)
	}
}

// plainKey splits "key: value" or "key:" into the key and the value.
func plainKey(text string) (key, rest string, ok bool) {
	i := 0
	for i < len(text) && i <= 128 && isKeyByte(text[i], i == 0) {
		i++
	}
	if i == 0 || i > 128 || i == len(text) || text[i] != ':' {
		return "", "", false
	}
	key = text[:i]
	if isPlainSpecial(key) {
		return "", "", false
	}
	switch rest = text[i+1:]; {
	case rest == "":
		return key, "", true
	case rest[0] == ' ':
		return key, strings.TrimLeft(rest, " "), true
	}
	return "", "", false
}

func isKeyByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case first:
		return false
	case c >= '0' && c <= '9', c == '.', c == '/', c == '-':
		return true
	}
	return false
}

// isPlainSpecial reports whether s is a plain scalar starting with a
// letter or "." that YAML does not read as a string.
func isPlainSpecial(s string) bool {
	switch s {
	case "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL",
		".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF":
		return true
	}
	return false
}

// inline reads a value that starts on a key's or an item's line; a block
// scalar goes on over the lines below, more indented than indent.
func (p *plainParser) inline(text string, indent int) (*node, bool) {
	switch text[0] {
	case '|':
		return p.literal(text, indent)
	case '[':
		return flowSequence(text)
	case '"', '\'':
		s, rest, ok := quotedScalar(text)
		if !ok || rest != "" {
			return nil, false
		}
		return &node{kind: nString, str: s}, true
	}
	if strings.Contains(text, " #") || strings.Contains(text, ": ") || strings.HasSuffix(text, ":") {
		return nil, false
	}
	return plainScalar(text)
}

// plainScalar resolves a plain scalar as YAML does, for the forms the
// subset reads.
func plainScalar(s string) (*node, bool) {
	switch c := s[0]; {
	case strings.IndexByte("-?:,[]{}#&*!|>'\"%@`", c) >= 0:
		// Indicators: a plain scalar may start with some of them, but
		// the subset leaves them to the decoder.
		return nil, false
	case c >= '0' && c <= '9', c == '+':
		if !plainIntRe.MatchString(s) {
			return nil, false
		}
		v, err := strconv.Atoi(s)
		return &node{kind: nInt, num: v}, err == nil
	case c == '.':
		if isPlainSpecial(s) {
			return nil, false
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return nil, false
		}
	case c == '~':
		if s == "~" {
			return nil, false
		}
	}
	switch s {
	case "true", "True", "TRUE":
		return &node{kind: nBool, num: 1}, true
	case "false", "False", "FALSE":
		return &node{kind: nBool}, true
	}
	if isPlainSpecial(s) {
		return nil, false
	}
	return &node{kind: nString, str: s}, true
}

// quotedScalar reads a quoted string without escapes or inner quotes at
// the start of text, and returns what follows it.
func quotedScalar(text string) (s, rest string, ok bool) {
	q := text[0]
	end := strings.IndexByte(text[1:], q)
	if end < 0 {
		return "", "", false
	}
	s = text[1 : 1+end]
	if q == '"' && strings.IndexByte(s, '\\') >= 0 {
		return "", "", false
	}
	return s, strings.TrimLeft(text[2+end:], " "), true
}

// flowSequence reads "[a, b, "c"]" on one line.
func flowSequence(text string) (*node, bool) {
	n := &node{kind: nList}
	s := strings.TrimLeft(text[1:], " ")
	if s == "]" {
		return n, true
	}
	for {
		var v *node
		switch {
		case s == "":
			return nil, false
		case s[0] == '"' || s[0] == '\'':
			str, rest, ok := quotedScalar(s)
			if !ok {
				return nil, false
			}
			v, s = &node{kind: nString, str: str}, rest
		default:
			end := strings.IndexAny(s, ",]")
			if end < 0 {
				return nil, false
			}
			item := strings.TrimRight(s[:end], " ")
			if item == "" || strings.ContainsAny(item, "[]{}:#") {
				return nil, false
			}
			var ok bool
			if v, ok = plainScalar(item); !ok {
				return nil, false
			}
			s = s[end:]
		}
		n.list = append(n.list, v)
		switch {
		case s == "]":
			return n, true
		case strings.HasPrefix(s, ","):
			s = strings.TrimLeft(s[1:], " ")
			if s == "" || s[0] == ']' || s[0] == ',' {
				return nil, false
			}
		default:
			return nil, false
		}
	}
}

// literal reads a literal block scalar ("|" or "|-") whose lines follow
// p.pos, more indented than indent.
func (p *plainParser) literal(header string, indent int) (*node, bool) {
	var strip bool
	switch header {
	case "|":
	case "|-":
		strip = true
	default:
		return nil, false
	}
	start := p.pos
	if start == len(p.lines) || p.lines[start].text == "" {
		// Leading empty lines: left to the decoder.
		return nil, false
	}
	m := p.lines[start].indent
	if m <= indent {
		return nil, false
	}
	var b strings.Builder
	end, lastText := start, start
	for ; end < len(p.lines); end++ {
		l := p.lines[end]
		if l.text == "" {
			if len(l.raw) > m {
				// Spaces beyond the indentation on an otherwise empty
				// line: left to the decoder.
				return nil, false
			}
			continue
		}
		if l.indent < m {
			break
		}
		for range end - lastText - 1 {
			b.WriteByte('\n')
		}
		if end > start {
			b.WriteByte('\n')
		}
		b.WriteString(l.raw[m:])
		lastText = end
	}
	if p.lines[lastText].last {
		return nil, false
	}
	if !strip {
		b.WriteByte('\n')
	}
	p.pos = end
	return &node{kind: nString, str: b.String()}, true
}
