package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// WatchRepository sends a hint whenever branch may have moved in the
// local repository at dir (a work tree or a bare repository): its ref
// file or packed-refs changed. It watches only the directories that hold
// those files, so a change to other branches (the status mirror's, say)
// or to the work tree does not wake the loop. The channel is closed when
// ctx is done or the watcher fails.
func WatchRepository(ctx context.Context, dir, branch string) (Hints, error) {
	gitDir, err := findGitDir(dir)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	refFile := filepath.Join(gitDir, "refs", "heads", filepath.FromSlash(branch))
	watched := map[string]bool{}
	// The ref file's directory (refs/heads or a subdirectory for a
	// branch with slashes), and the git dir for packed-refs and HEAD.
	for _, d := range []string{gitDir, filepath.Dir(refFile)} {
		if watched[d] {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			w.Close()
			return nil, fmt.Errorf("watch %s: %w", d, err)
		}
		if err := w.Add(d); err != nil {
			w.Close()
			return nil, fmt.Errorf("watch %s: %w", d, err)
		}
		watched[d] = true
	}
	relevant := func(name string) bool {
		switch filepath.Clean(name) {
		case refFile, refFile + ".lock", filepath.Join(gitDir, "packed-refs"), filepath.Join(gitDir, "HEAD"):
			return true
		}
		return false
	}
	hints := make(chan struct{}, 1)
	go func() {
		defer close(hints)
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if !relevant(ev.Name) {
					continue
				}
				select {
				case hints <- struct{}{}:
				default: // a hint is already pending
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
			}
		}
	}()
	return hints, nil
}

// findGitDir returns the git directory of the repository at dir.
func findGitDir(dir string) (string, error) {
	dot := filepath.Join(dir, ".git")
	fi, err := os.Stat(dot)
	switch {
	case err == nil && fi.IsDir():
		return filepath.Abs(dot)
	case err == nil:
		// A .git file: "gitdir: <path>" (a linked work tree).
		b, err := os.ReadFile(dot)
		if err != nil {
			return "", err
		}
		p := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "gitdir:"))
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return filepath.Abs(p)
	}
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		if _, err := os.Stat(filepath.Join(dir, "objects")); err == nil {
			return filepath.Abs(dir)
		}
	}
	return "", fmt.Errorf("%s is not a git repository", dir)
}

// Merge returns hints that fire when any of hs fires.
func Merge(ctx context.Context, hs ...Hints) Hints {
	out, hint := NewHints()
	for _, h := range hs {
		if h == nil {
			continue
		}
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case _, ok := <-h:
					if !ok {
						return
					}
					hint()
				}
			}
		}()
	}
	return out
}
