// Package syncbuf is a buffer that goroutines or a child process write
// while another reads it: a command's output in a test, a controller's
// log, the demo's reconciler log shown when the demo fails.
package syncbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writes and reads. The zero
// value is empty and ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Tail is the last n lines written.
func (s *Buffer) Tail(n int) string {
	lines := strings.Split(strings.TrimSuffix(s.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
