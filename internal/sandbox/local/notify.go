package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// NotifyChanges returns a channel that receives whenever the file at path,
// relative to the sandbox's workspace, may have been created, written,
// replaced (renamed over) or removed. Notifications coalesce (the channel
// holds one) and may be spurious: the reader re-reads the file. They stop
// when ctx ends. An error means there will be none (the file's directory
// does not exist yet, or inotify is unavailable): then poll.
//
// A notification only wakes the reader: what it then reads still goes
// through CopyFrom's checks, so a directory the agent swapped for a
// symbolic link can cause wake-ups, never reads outside the workspace.
func (p *Provider) NotifyChanges(ctx context.Context, id, path string) (<-chan struct{}, error) {
	b, err := p.box(id)
	if err != nil {
		return nil, fmt.Errorf("watch %s in sandbox: %w", path, err)
	}
	rel, err := workspacePath(path)
	if err == nil && rel == "." {
		err = errors.New("names the workspace, not a file")
	}
	if err != nil {
		return nil, fmt.Errorf("watch %s in sandbox %s: %w", path, id, err)
	}
	root, err := os.OpenRoot(b.workspace)
	if err != nil {
		return nil, fmt.Errorf("watch %s in sandbox %s: %w", path, id, err)
	}
	fi, err := root.Lstat(filepath.Dir(rel))
	root.Close()
	if err == nil && !fi.IsDir() {
		err = errors.New("its directory is not a directory")
	}
	if err != nil {
		return nil, fmt.Errorf("watch %s in sandbox %s: %w", path, id, err)
	}
	ch := make(chan struct{}, 1)
	file := filepath.Join(b.workspace, rel)
	if err := p.notify.subscribe(file, ch); err != nil {
		return nil, fmt.Errorf("watch %s in sandbox %s: %w", path, id, err)
	}
	go func() {
		<-ctx.Done()
		p.notify.unsubscribe(file, ch)
	}()
	return ch, nil
}

// notifier shares one inotify instance among every watch of a Provider
// (the number of instances per user is small; watches are plenty). It
// watches the directories of the files subscribed to, and exists while
// someone watches.
type notifier struct {
	mu   sync.Mutex
	w    *fsnotify.Watcher
	subs map[string]map[chan struct{}]bool // file -> subscribers
	dirs map[string]int                    // watched directory -> files subscribed in it
}

func (n *notifier) subscribe(file string, ch chan struct{}) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.w == nil {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return err
		}
		n.w = w
		n.subs = map[string]map[chan struct{}]bool{}
		n.dirs = map[string]int{}
		go n.dispatch(w)
	}
	dir := filepath.Dir(file)
	if n.dirs[dir] == 0 {
		if err := n.w.Add(dir); err != nil {
			n.closeIfIdle()
			return err
		}
	}
	if n.subs[file] == nil {
		n.subs[file] = map[chan struct{}]bool{}
	}
	n.subs[file][ch] = true
	n.dirs[dir]++
	return nil
}

func (n *notifier) unsubscribe(file string, ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.subs[file][ch] {
		return
	}
	delete(n.subs[file], ch)
	if len(n.subs[file]) == 0 {
		delete(n.subs, file)
	}
	dir := filepath.Dir(file)
	if n.dirs[dir]--; n.dirs[dir] == 0 {
		delete(n.dirs, dir)
		// The directory may be gone already (Cleanup), taking its
		// watch with it.
		_ = n.w.Remove(dir)
	}
	n.closeIfIdle()
}

// closeIfIdle closes the inotify instance when nobody watches. Call with
// n.mu held.
func (n *notifier) closeIfIdle() {
	if len(n.subs) == 0 && n.w != nil {
		_ = n.w.Close()
		n.w, n.subs, n.dirs = nil, nil, nil
	}
}

// dispatch hands w's events to the subscribers of the files they name,
// until w is closed. When the kernel dropped events, every subscriber
// hears of it.
func (n *notifier) dispatch(w *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			n.wake(ev.Name, w)
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
			n.wake("", w)
		}
	}
}

// wake notifies file's subscribers, or everyone when file is "".
func (n *notifier) wake(file string, w *fsnotify.Watcher) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.w != w {
		return
	}
	for f, subs := range n.subs {
		if file != "" && f != file {
			continue
		}
		for ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
