package visible

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// String returns s with every character a terminal would act on, rather
// than print, made visible:
//
//   - C0 control characters other than tab and newline in caret
//     notation: ESC as ^[, carriage return as ^M, NUL as ^@; DEL as ^?;
//   - C1 control characters (U+0080 to U+009F, which some terminals
//     take for escape sequences) and the bidirectional formatting
//     characters that reorder what follows (U+061C, U+200E, U+200F,
//     U+202A to U+202E, U+2066 to U+2069) as \u escapes, such as \u009b;
//   - bytes that are not UTF-8 as \x escapes, such as \xff.
//
// Everything else, tabs and newlines included, is kept as it is.
func String(s string) string {
	i := firstHidden(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteByte('^')
			b.WriteByte(byte(r) + '@')
		case r == 0x7f:
			b.WriteString("^?")
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstHidden is the index of the first byte String changes, or -1.
func firstHidden(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || hidden(r) {
			return i
		}
		i += size
	}
	return -1
}

// hidden reports whether r is a C1 control or a bidirectional formatting
// character.
func hidden(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Writer returns a writer that writes what it is given to w with String
// applied. Each Write is made visible on its own, so a character split
// between two writes shows as \x escapes: write whole strings, as
// fmt.Fprintf and text/tabwriter do.
func Writer(w io.Writer) io.Writer {
	if v, ok := w.(writer); ok {
		return v
	}
	return writer{w}
}

type writer struct{ w io.Writer }

func (v writer) Write(p []byte) (int, error) {
	s := string(p)
	if firstHidden(s) < 0 {
		return v.w.Write(p)
	}
	if _, err := io.WriteString(v.w, String(s)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// JSON returns JSON text b with the characters String shows as \u
// escapes, which JSON encoders leave as they are (C1 controls,
// bidirectional formatting characters), escaped: the same JSON value,
// safe to print. encoding/json escapes the C0 controls itself.
func JSON(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if hidden(r) {
			if out == nil {
				out = append(make([]byte, 0, len(b)+12), b[:i]...)
			}
			out = fmt.Appendf(out, `\u%04x`, r)
		} else if out != nil {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	if out == nil {
		return b
	}
	return out
}
