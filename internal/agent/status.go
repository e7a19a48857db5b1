package agent

import (
	"log/slog"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// stepEvery is how often, at most, status.json is rewritten for a new step
// or progress within a phase. The worker reads it every 100ms; a task
// over many repositories moves on in milliseconds, and every rewrite is a
// new file.
const stepEvery = 200 * time.Millisecond

// statusFile writes status.json: a new phase at once, a new step or
// progress within a phase at most every stepEvery, the latest one last.
type statusFile struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	last    time.Time        // when status.json was last written
	pending *protocol.Status // a step waiting for its turn
	timer   *time.Timer      // writes pending
}

// write writes st now when urgent (a new phase) or when the last write is
// long enough ago; otherwise st waits for the next write, at most until
// stepEvery after the last.
func (s *statusFile) write(st protocol.Status, urgent bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !urgent && time.Since(s.last) < stepEvery {
		s.pending = &st
		if s.timer == nil {
			s.timer = time.AfterFunc(stepEvery-time.Since(s.last), s.flush)
		}
		return nil
	}
	s.pending = nil
	s.last = time.Now()
	return writeJSON(s.path, st)
}

// flush writes the step waiting, if any.
func (s *statusFile) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	if s.pending == nil {
		return
	}
	st := *s.pending
	s.pending = nil
	s.last = time.Now()
	if err := writeJSON(s.path, st); err != nil {
		s.log.Error("write status", "err", err)
	}
}
