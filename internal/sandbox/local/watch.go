package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Watch tells, through changed, when something in dir (relative to the
// workspace, a directory in it) may have changed: a file written,
// renamed into place or removed there. At most one wake-up is pending at
// a time; stop ends the watch. A wait for the agent reads its status when
// the agent writes it, instead of reading it again and again.
//
// A wake-up is only a hint to read again: what is read still goes
// through CopyFrom's checks. The directory must be a directory in the
// workspace, not a symbolic link.
func (p *Provider) Watch(id, dir string) (changed <-chan struct{}, stop func() error, err error) {
	w, err := p.watch(id, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("watch %s in sandbox %s: %w", dir, id, err)
	}
	ch, wake := sandbox.Wakeup()
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
	return ch, w.Close, nil
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
func (p *Provider) watch(id, dir string) (*fsnotify.Watcher, error) {
	b, _, err := p.find(id)
	if err != nil {
		return nil, err
	}
	rel, err := workspacePath(dir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(b.workspace)
	if err != nil {
		return nil, err
	}
	fi, err := root.Lstat(rel)
	root.Close()
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("not a directory (%s)", fi.Mode().Type())
	}
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(filepath.Join(b.workspace, rel)); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}
