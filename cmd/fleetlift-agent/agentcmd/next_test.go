package agentcmd

import (
	"io"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// The agent says it is idle, then takes the next sandbox only as a whole
// line of absolute paths: anything else ends it with an error naming
// what is wrong, and a socket that closes ends it without one.
func TestAwaitNext(t *testing.T) {
	for _, c := range []struct {
		name, in string
		ok       bool
		err      string
	}{
		{"a sandbox", `{"workspace":"/s/w","home":"/s/h","log":"/s/log"}` + "\n", true, ""},
		{"closed", "", false, ""},
		{"closed mid-line", `{"workspace":"/s/w"`, false, ""},
		{"not JSON", "next\n", false, "next sandbox: invalid character"},
		{"a relative HOME", `{"workspace":"/s/w","home":"h"}` + "\n", false, `home "h" is not an absolute path`},
		{"no workspace", `{"home":"/s/h"}` + "\n", false, `workspace "" is not an absolute path`},
		{"a relative lease", `{"workspace":"/s/w","home":"/s/h","lease":"l"}` + "\n", false, `lease "l" is not an absolute path`},
		{"too long", `{"workspace":"/` + strings.Repeat("w", maxNextBytes) + `","home":"/h"}` + "\n", false, "over 65536 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var said strings.Builder
			n, ok, err := awaitNext(&said, newNextReader(strings.NewReader(c.in)))
			if said.String() != protocol.Idle+"\n" {
				t.Errorf("said %q; want %q", said.String(), protocol.Idle+"\n")
			}
			if ok != c.ok || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("awaitNext: %+v, %v, %v; want ok %v, error with %q", n, ok, err, c.ok, c.err)
			}
			if ok && (n.Workspace != "/s/w" || n.Home != "/s/h" || n.Log != "/s/log") {
				t.Errorf("next sandbox %+v", n)
			}
		})
	}
	// A provider that is gone hears nothing: no sandbox, no error.
	if _, ok, err := awaitNext(failingWriter{}, newNextReader(strings.NewReader(""))); ok || err != nil {
		t.Errorf("with nobody to tell: %v, %v; want no sandbox and no error", ok, err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }
