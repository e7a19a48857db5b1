package agent

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"
)

// stepEvery is how often, at most, status.json and result.json are
// rewritten with news the worker does not wait for (a step, a phase on the
// way): the worker only shows it, a task over many repositories moves on
// in milliseconds, and every rewrite is a new file.
var stepEvery = time.Second

// newsSettle is how long such news waits at least: what comes right after it
// (the next step, the end and its urgent write) takes its place, so that
// a step is one write, not one each.
const newsSettle = 100 * time.Millisecond

// protocolFile writes one of the agent's JSON files: at once when urgent
// (what the worker waits for), otherwise newsSettle later at the soonest and
// at most every stepEvery, the latest content last.
type protocolFile struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	last    time.Time   // when the file was last written
	pending []byte      // content waiting for its turn
	note    func()      // what to do once pending is written
	timer   *time.Timer // writes pending
	writes  int         // files written
}

// write records v (encoded now, so later changes to it do not count).
// note, when not nil, runs once v is in the file, or content that
// replaced it before its turn; an urgent write drops the note of what it
// replaces.
func (f *protocolFile) write(v any, urgent bool, note func()) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(f.path), err)
	}
	data = append(data, '\n')
	f.mu.Lock()
	defer f.mu.Unlock()
	if !urgent {
		f.pending = data
		if note != nil {
			f.note = note
		}
		if f.timer == nil {
			f.timer = time.AfterFunc(max(newsSettle, stepEvery-time.Since(f.last)), f.flush)
		}
		return nil
	}
	f.pending, f.note = nil, nil
	err = f.writeLocked(data)
	if err == nil && note != nil {
		note()
	}
	return err
}

func (f *protocolFile) writeLocked(data []byte) error {
	f.last = time.Now()
	f.writes++
	return writeFileAtomic(f.path, data)
}

// flush writes the content waiting, if any.
func (f *protocolFile) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.timer = nil
	if f.pending == nil {
		return
	}
	data, note := f.pending, f.note
	f.pending, f.note = nil, nil
	if err := f.writeLocked(data); err != nil {
		f.log.Error("write "+filepath.Base(f.path), "err", err)
	} else if note != nil {
		note()
	}
}
