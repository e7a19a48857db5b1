package render

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShorten(t *testing.T) {
	long := strings.Repeat("abcdefghij", 8) // 80 characters
	cases := []struct {
		name             string
		old, cur         string // JSON; "" is absent
		width            int
		wantOld, wantCur string
	}{
		{"no change", `"same"`, `"same"`, 20, `"same"`, `"same"`},
		{"short values are whole", `"a"`, `"b"`, 20, `"a"`, `"b"`},
		{"added", "", `"` + long + `"`, 20, "", `"abcdefghijabcdefg…"`},
		{"removed", `"` + long + `"`, "", 20, `"abcdefghijabcdefg…"`, ""},
		{"long strings around the first difference", `"` + long + `X tail"`, `"` + long + `Y tail"`, 20,
			`"…jabcdefghijX tail"`, `"…jabcdefghijY tail"`},
		{"difference at the start", `"X` + long + `"`, `"Y` + long + `"`, 12, `"Xabcdefgh…"`, `"Yabcdefgh…"`},
		{"escapes are never split", `"` + long + `\n\n\nX"`, `"` + long + `\n\n\nY"`, 24,
			`"…ghijabcdefghij\n\n\nX"`, `"…ghijabcdefghij\n\n\nY"`},
		{"long lists are cut", `[` + strings.Repeat(`"x",`, 30) + `"x"]`, `[]`, 20, `["x","x","x","x","x…`, `[]`},
		{"multi-byte characters count once", `"` + strings.Repeat("é", 30) + `"`, `"` + strings.Repeat("é", 29) + `ü"`, 16,
			`"…ééééééééééééé"`, `"…ééééééééééééü"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var old, cur json.RawMessage
			if c.old != "" {
				old = json.RawMessage(c.old)
			}
			if c.cur != "" {
				cur = json.RawMessage(c.cur)
			}
			gotOld, gotCur := shorten(old, cur, c.width)
			if gotOld != c.wantOld || gotCur != c.wantCur {
				t.Errorf("shorten =\n  %s\n  %s\nwant\n  %s\n  %s", gotOld, gotCur, c.wantOld, c.wantCur)
			}
			for _, s := range []string{gotOld, gotCur} {
				if n := utf8.RuneCountInString(s); n > c.width+1 {
					t.Errorf("%s is %d characters, want about %d", s, n, c.width)
				}
			}
		})
	}
}
