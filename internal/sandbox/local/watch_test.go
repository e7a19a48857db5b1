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
// CopyTo and the agent write: a temporary file renamed into place); a
// watch of one file, only when that file is; and it refuses what is not
// a directory of the workspace or a file in one.
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

	// A watch of status.json, which is not there yet: a write of another
	// file beside it does not wake it, one of status.json does.
	if err := os.Remove(filepath.Join(p.root, "watched", "workspace", "proto", "status.json")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("no wake-up of the directory's watch after a removal")
	}
	status, stopStatus, err := p.Watch("watched", "proto/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer stopStatus()
	if err := p.CopyTo(ctx, "watched", bytes.NewReader([]byte(`{}`)), "proto/result.json"); err != nil {
		t.Fatal(err)
	}
	// The result's write wakes the directory's watch: once it has, the
	// file's has had its events too.
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("no wake-up of the directory's watch after a write")
	}
	select {
	case <-status:
		t.Fatal("the watch of status.json woke at a write of result.json")
	default:
	}
	if err := p.CopyTo(ctx, "watched", bytes.NewReader([]byte(`{"phase":"complete"}`)), "proto/status.json"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-status:
	case <-time.After(time.Minute):
		t.Fatal("no wake-up of the watch of status.json after its write")
	}

	for _, dir := range []string{"missing/status.json", "proto/status.json/inside", "../outside", "/tmp"} {
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
		name string
		want bool
	}{
		{fsnotify.Event{Name: "/w/proto/.status.json.123", Op: fsnotify.Create}, "", false},
		{fsnotify.Event{Name: "/w/proto/.status.json.123", Op: fsnotify.Write}, "", false},
		{fsnotify.Event{Name: "/w/proto/.status.json.123", Op: fsnotify.Chmod}, "", false},
		{fsnotify.Event{Name: "/w/proto/.status.json.123", Op: fsnotify.Rename}, "", false},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Create}, "", true},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Write}, "", true},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Remove}, "", true},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Rename}, "", true},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Chmod}, "", false},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Write | fsnotify.Chmod}, "", true},
		// A watch of status.json alone.
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Create}, "status.json", true},
		{fsnotify.Event{Name: "/w/proto/status.json", Op: fsnotify.Remove}, "status.json", true},
		{fsnotify.Event{Name: "/w/proto/result.json", Op: fsnotify.Create}, "status.json", false},
		{fsnotify.Event{Name: "/w/proto/.status.json.123", Op: fsnotify.Write}, "status.json", false},
	} {
		if got := wakes(tc.ev, tc.name); got != tc.want {
			t.Errorf("wakes(%v, %q) = %v, want %v", tc.ev, tc.name, got, tc.want)
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
