package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Watch tells, through changed, when something in dir (relative to the
// workspace, a directory in it) may have changed: a file written,
// renamed into place or removed there; and once when the sandbox's agent
// exits. At most one wake-up is pending at a time; stop ends the watch. A
// wait for the agent reads its status when the agent writes it, instead
// of reading it again and again, and learns at once of an agent that
// exited without a word.
//
// The exit of an agent this Provider started is told as it is reaped;
// that of one an earlier Provider started (a worker restarted) is looked
// for every exitPoll.
//
// A wake-up is only a hint to read again: what is read still goes
// through CopyFrom's checks. The directory must be a directory in the
// workspace, not a symbolic link.
func (p *Provider) Watch(id, dir string) (changed <-chan struct{}, stop func() error, err error) {
	b, w, err := p.watch(id, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("watch %s in sandbox %s: %w", dir, id, err)
	}
	ch, wake := sandbox.Wakeup()
	quit := make(chan struct{})
	go watchExit(b, wake, quit)
	go func() {
		events, errs := w.Events, w.Errors
		for events != nil || errs != nil {
			select {
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				if wakes(ev) {
					wake()
				}
			case _, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				// An overflowed queue lost events: read again.
				wake()
			}
		}
	}()
	var once sync.Once
	return ch, func() error {
		once.Do(func() { close(quit) })
		return w.Close()
	}, nil
}

// exitPoll is how often a watch asks whether an agent that an earlier
// Provider started still runs.
const exitPoll = time.Second

// watchExit wakes once b's agent has exited, unless quit closes first.
func watchExit(b *box, wake func(), quit <-chan struct{}) {
	if b.done != nil {
		select {
		case <-b.done:
			wake()
		case <-quit:
		}
		return
	}
	t := time.NewTicker(exitPoll)
	defer t.Stop()
	for b.agentAlive() {
		select {
		case <-t.C:
		case <-quit:
			return
		}
	}
	wake()
}

// wakes reports whether ev may have changed what a reader of the
// directory reads. A file whose name starts with a dot is ignored: the
// agent and CopyTo write each file as a hidden temporary file renamed into
// place, and it is the rename that shows the new content (as the creation
// of the file's own name). So is a change of mode alone. Each write then
// wakes the reader once, where its five events (create, write, chmod,
// rename, create) woke it up to three times, each a read of the status.
func wakes(ev fsnotify.Event) bool {
	if strings.HasPrefix(filepath.Base(ev.Name), ".") {
		return false
	}
	return ev.Op&^fsnotify.Chmod != 0
}

// watch starts an fsnotify watch on dir, which must be a directory of
// sandbox id's workspace.
func (p *Provider) watch(id, dir string) (*box, *fsnotify.Watcher, error) {
	b, _, err := p.find(id)
	if err != nil {
		return nil, nil, err
	}
	rel, err := workspacePath(dir)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(b.workspace)
	if err != nil {
		return nil, nil, err
	}
	fi, err := root.Lstat(rel)
	root.Close()
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("not a directory (%s)", fi.Mode().Type())
	}
	if err != nil {
		return nil, nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, nil, err
	}
	if err := w.Add(filepath.Join(b.workspace, rel)); err != nil {
		w.Close()
		return nil, nil, err
	}
	return b, w, nil
}
