package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Watch tells, through changed, when what path (relative to the
// workspace) names may have changed: for a directory of the workspace, a
// file written, renamed into place or removed there; for a file in one
// (which need not be there yet), that file; and once when the sandbox's
// agent exits. At most one wake-up is pending at a time; stop ends the
// watch. A wait for the agent reads its status when the agent writes it,
// instead of reading it again and again, and not when the agent writes
// its other files; and it learns at once of an agent that exited without
// a word.
//
// The exit of an agent this Provider started is told as it is reaped;
// that of one an earlier Provider started (a worker restarted) is looked
// for every exitPoll.
//
// A wake-up is only a hint to read again: what is read still goes
// through CopyFrom's checks. The directory, or the file's, must be a
// directory in the workspace, not a symbolic link.
func (p *Provider) Watch(id, path string) (changed <-chan struct{}, stop func() error, err error) {
	b, w, name, err := p.watch(id, path)
	if err != nil {
		return nil, nil, fmt.Errorf("watch %s in sandbox %s: %w", path, id, err)
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
				if wakes(ev, name) {
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
	if b.proc != nil {
		select {
		case <-b.proc.done:
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
// directory reads, or of its file name when name is set. A file whose
// name starts with a dot is ignored: the
// agent and CopyTo write each file as a hidden temporary file renamed into
// place, and it is the rename that shows the new content (as the creation
// of the file's own name). So is a change of mode alone. Each write then
// wakes the reader once, where its five events (create, write, chmod,
// rename, create) woke it up to three times, each a read of the status.
func wakes(ev fsnotify.Event, name string) bool {
	base := filepath.Base(ev.Name)
	if strings.HasPrefix(base, ".") || (name != "" && base != name) {
		return false
	}
	return ev.Op&^fsnotify.Chmod != 0
}

// watch starts an fsnotify watch on the directory path names in sandbox
// id's workspace, or on the directory of the file it names, and returns
// that file's name (empty for a directory).
func (p *Provider) watch(id, path string) (b *box, w *fsnotify.Watcher, name string, err error) {
	b, _, err = p.find(id)
	if err != nil {
		return nil, nil, "", err
	}
	dir, err := workspacePath(path)
	if err != nil {
		return nil, nil, "", err
	}
	root, err := os.OpenRoot(b.workspace)
	if err != nil {
		return nil, nil, "", err
	}
	defer root.Close()
	fi, err := root.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
	case err == nil && !fi.Mode().IsRegular():
		err = fmt.Errorf("not a directory or a regular file (%s)", fi.Mode().Type())
	case err == nil || errors.Is(err, fs.ErrNotExist):
		dir, name = filepath.Dir(dir), filepath.Base(dir)
		if fi, err = root.Lstat(dir); err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory (%s)", dir, fi.Mode().Type())
		}
	}
	if err != nil {
		return nil, nil, "", err
	}
	w, err = fsnotify.NewWatcher()
	if err != nil {
		return nil, nil, "", err
	}
	if err := w.Add(filepath.Join(b.workspace, dir)); err != nil {
		w.Close()
		return nil, nil, "", err
	}
	return b, w, name, nil
}
