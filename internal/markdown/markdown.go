// Package markdown quotes text for the Markdown that fleetlift writes for
// people: plan comments on pull requests, approval pull requests and the
// status mirror. Everything that comes from a definition or a forge goes
// through it, so that a name can never become a link, a heading or HTML.
//
// markdown imports only the standard library.
package markdown

import "strings"

// Code is s as inline code, on one line, with a fence longer than any run
// of backticks in it.
func Code(s string) string {
	if s == "" {
		return ""
	}
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	ticks := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return ticks + s + ticks
}

// Fence is s as a fenced code block in language lang.
func Fence(s, lang string) string {
	ticks := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	return ticks + lang + "\n" + s + ticks + "\n"
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// Text escapes what Markdown or HTML would read as markup in plain text,
// on one line. An underscore inside a word (awaiting_approval) is left
// alone: it is no emphasis there.
func Text(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch r {
		case '_':
			if i > 0 && i < len(rs)-1 && alnum(rs[i-1]) && alnum(rs[i+1]) {
				b.WriteRune(r)
				continue
			}
			b.WriteString(`\_`)
		case '\\', '`', '*', '[', ']', '#', '~':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\n', '\r':
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func alnum(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// Cell makes s safe inside a table cell: a pipe would end the cell, even
// inside code.
func Cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
