package logging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// Formats --log-format takes.
const (
	Text = "text"
	JSON = "json"
)

// Formats are the formats New accepts, in the order help lists them.
var Formats = []string{Text, JSON}

// Levels are the levels ParseLevel accepts, least severe first.
var Levels = []string{"debug", "info", "warn", "error"}

// ParseLevel is the slog level named debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: want %s", s, strings.Join(Levels, ", "))
}

// New is a logger writing records of level and above to w, as
// logfmt-style text or as one JSON object a line.
func New(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case Text, "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case JSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want %s", format, strings.Join(Formats, " or "))
}

// Lines is a writer that logs every line written to it as one record of
// l at level, the line its message (without its newline). A line not
// ended when Flush is called is logged then. It is safe for concurrent
// use; a line is logged whole however it was written.
func Lines(l *slog.Logger, level slog.Level) *LineWriter {
	return &LineWriter{log: l, level: level}
}

// LineWriter is what Lines returns.
type LineWriter struct {
	log   *slog.Logger
	level slog.Level
	mu    sync.Mutex
	buf   []byte
}

// Write logs each complete line of p; a partial line waits for its end.
func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Flush logs what is left of a line not ended.
func (w *LineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}

func (w *LineWriter) emit(line []byte) {
	s := strings.TrimRight(string(line), "\r")
	if strings.TrimSpace(s) == "" {
		return
	}
	w.log.Log(context.Background(), w.level, s)
}
