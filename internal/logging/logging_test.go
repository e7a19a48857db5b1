package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestLinesAreJSONRecords: text another part of the program writes to
// standard error, in pieces or several lines at once, comes out one JSON
// record a line, its text the message, and nothing below the level.
func TestLinesAreJSONRecords(t *testing.T) {
	var out bytes.Buffer
	l, err := New(&out, JSON, slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	w := Lines(l, slog.LevelWarn)
	_, _ = w.Write([]byte("starting the embedded "))
	_, _ = w.Write([]byte("server\nrepaired the namespace\n\npartial"))
	w.Flush()
	l.Debug("not shown")
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		if rec.Level != "WARN" {
			t.Errorf("%q: level %s, want WARN", line, rec.Level)
		}
		msgs = append(msgs, rec.Msg)
	}
	want := []string{"starting the embedded server", "repaired the namespace", "partial"}
	if strings.Join(msgs, "|") != strings.Join(want, "|") {
		t.Errorf("messages %q, want %q", msgs, want)
	}
}

func TestParseLevel(t *testing.T) {
	for _, c := range []struct {
		in   string
		want slog.Level
		err  bool
	}{
		{"debug", slog.LevelDebug, false},
		{"info", slog.LevelInfo, false},
		{"WARN", slog.LevelWarn, false},
		{"error", slog.LevelError, false},
		{"verbose", 0, true},
	} {
		got, err := ParseLevel(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
	if _, err := New(nil, "xml", slog.LevelInfo); err == nil {
		t.Error("New with format xml: no error")
	}
}
