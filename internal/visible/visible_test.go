package visible_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/fleetlift/fleetlift/internal/visible"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no change: plain text, tabs and newlines", "+\tfmt.Println(\"héllo ✓\")\n-old line\n", "+\tfmt.Println(\"héllo ✓\")\n-old line\n"},
		{"empty", "", ""},
		{"an escape sequence that erases the line above", "+ok\n\x1b[1A\x1b[2K+evil", "+ok\n^[[1A^[[2K+evil"},
		{"a carriage return that overwrites a line", "rm -rf /\r# harmless", "rm -rf /^M# harmless"},
		{"colours and a terminal title", "\x1b[8mhidden\x1b[0m \x1b]0;title\x07", "^[[8mhidden^[[0m ^[]0;title^G"},
		{"NUL, backspace and DEL", "a\x00b\bc\x7f", "a^@b^Hc^?"},
		{"a C1 control sequence introducer", "x\u009b2Jy", `x\u009b2Jy`},
		{"bidirectional overrides", "if x \u202e} \u2066{\u2069", `if x \u202e} \u2066{\u2069`},
		{"bytes that are not UTF-8", "a\xff\xfeb\xe2\x82", `a\xff\xfeb\xe2\x82`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := visible.String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestWriter(t *testing.T) {
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 0, 1, ' ', 0)
	w := visible.Writer(tw)
	n, err := fmt.Fprintf(w, "%s\t%s\n", "svc\x1b[2K", "done\r")
	if err != nil || n != len("svc\x1b[2K\tdone\r\n") {
		t.Fatalf("Fprintf = %d, %v", n, err)
	}
	fmt.Fprintf(w, "%s\t%s\n", "ledger", "failed")
	tw.Flush()
	want := "svc^[[2K done^M\nledger   failed\n"
	if out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
	if visible.Writer(w) != w {
		t.Error("a visible writer is wrapped again")
	}
}

// TestJSON: JSON text keeps its value, and shows no character a terminal
// would act on.
func TestJSON(t *testing.T) {
	in := map[string]string{"message": "pay\u009b2Jment \u202eevil\u2066 \x1b[2J ok é"}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got := visible.JSON(b)
	if i := strings.IndexAny(string(got), "\u009b\u202e\u2066\x1b"); i >= 0 {
		t.Errorf("a control character remains at byte %d: %q", i, got)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["message"] != in["message"] {
		t.Errorf("the value changed: %q, %v", back["message"], err)
	}
	if plain := []byte(`{"a":"é b"}`); string(visible.JSON(plain)) != string(plain) {
		t.Errorf("plain JSON changed: %s", visible.JSON(plain))
	}
}
