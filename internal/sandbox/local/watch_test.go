package local

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Watch wakes its reader when a file in the directory is written (as
// CopyTo and the agent write: a temporary file renamed into place), and
// refuses what is not a directory of the workspace.
func TestWatchWakesOnAWrite(t *testing.T) {
	p := newProvider(t, t.TempDir(), standInAgent(t))
	ctx := context.Background()
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "watched"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(ctx, "watched") })
	if err := p.CopyTo(ctx, "watched", bytes.NewReader([]byte("{}")), "proto/status.json"); err != nil {
		t.Fatal(err)
	}
	changed, stop, err := p.Watch("watched", "proto")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case <-changed:
		t.Fatal("woken before anything was written")
	default:
	}
	if err := p.CopyTo(ctx, "watched", bytes.NewReader([]byte(`{"phase":"complete"}`)), "proto/status.json"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("no wake-up after a write")
	}

	for _, dir := range []string{"proto/status.json", "missing", "../outside", "/tmp"} {
		if _, stop, err := p.Watch("watched", dir); err == nil {
			stop()
			t.Errorf("Watch(%q) succeeded; want it refused", dir)
		}
	}
	if _, _, err := p.Watch("never-made", "proto"); err == nil {
		t.Error("Watch in a sandbox that does not exist succeeded")
	}
}

// A write shows in the directory as a hidden temporary file renamed into
// place: only the rename's arrival of the real name, a write to it, or its
// removal wakes the reader.
func TestWatchWakesOnceAWrite(t *testing.T) {
	for _, tc := range []struct {
		ev   fsnotify.Event
		want bool
	}{
		{fsnotify.Event{Name: "/w/proto/.status.json.123", Op: fsnotify.Create}, false},
		{fsnotify.Event{Name: "/w/proto/.status.json.123", Op: fsnotify.Write}, false},
		{fsnotify.Event{Name: "/w/proto/.status.json.123", Op: fsnotify.Chmod}, false},
		{fsnotify.Event{Name: "/w/proto/.status.json.123", Op: fsnotify.Rename}, false},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Create}, true},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Write}, true},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Remove}, true},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Rename}, true},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Chmod}, false},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Write | fsnotify.Chmod}, true},
	} {
		if got := wakes(tc.ev); got != tc.want {
			t.Errorf("wakes(%v) = %v, want %v", tc.ev, got, tc.want)
		}
	}
}

// Watch wakes its reader once the agent exits, with nothing written: a
// wait for the agent learns of an agent that ended without a word as it
// ends. So it does for an agent that an earlier Provider started, which
// a Provider of a restarted worker finds.
func TestWatchWakesWhenTheAgentExits(t *testing.T) {
	for _, adopted := range []bool{false, true} {
		t.Run(map[bool]string{false: "started here", true: "started by an earlier provider"}[adopted], func(t *testing.T) {
			root := t.TempDir()
			// Exits, code 3, once told to through a file in its home.
			agent := []string{"/bin/sh", "-c", `while [ ! -e "$HOME/exit" ]; do sleep 0.02; done; exit 3`}
			p := newProvider(t, root, agent)
			ctx := context.Background()
			if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "quiet"}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Cleanup(ctx, "quiet") })
			if err := p.CopyTo(ctx, "quiet", bytes.NewReader([]byte("{}")), "proto/status.json"); err != nil {
				t.Fatal(err)
			}
			w := p
			if adopted {
				w = newProvider(t, root, agent)
			}
			changed, stop, err := w.Watch("quiet", "proto")
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			select {
			case <-changed:
				t.Fatal("woken while the agent runs and nothing was written")
			default:
			}
			if err := os.WriteFile(filepath.Join(root, "quiet", "home", "exit"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-time.After(time.Minute):
				t.Fatal("no wake-up when the agent exited")
			}
			st, err := w.Status(ctx, "quiet")
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase == sandbox.PhaseRunning {
				t.Errorf("woken, and the sandbox still says %s", st.Phase)
			}
		})
	}
}
