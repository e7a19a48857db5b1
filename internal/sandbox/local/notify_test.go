package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// notified reports whether ch receives within d.
func notified(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func TestNotifyChangesOfAFile(t *testing.T) {
	ctx := t.Context()
	p := newProvider(t, t.TempDir(), standInAgent(t))
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "notify"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cleanup(context.Background(), "notify") })
	if err := os.Mkdir(filepath.Join(sb.WorkingDir, ".fleetlift"), 0o755); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	status, err := p.NotifyChanges(wctx, "notify", ".fleetlift/status.json")
	if err != nil {
		t.Fatal(err)
	}
	other, err := p.NotifyChanges(ctx, "notify", ".fleetlift/result.json")
	if err != nil {
		t.Fatal(err)
	}

	// Replaced the way the agent does it: a temporary file renamed over.
	if err := p.CopyTo(ctx, "notify", strings.NewReader(`{"phase":"executing"}`), ".fleetlift/status.json"); err != nil {
		t.Fatal(err)
	}
	if !notified(status, 5*time.Second) {
		t.Fatal("no notification after status.json was replaced")
	}
	if notified(other, 200*time.Millisecond) {
		t.Error("a watcher of result.json heard of status.json")
	}

	// Written in place.
	if err := os.WriteFile(filepath.Join(sb.WorkingDir, ".fleetlift", "result.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !notified(other, 5*time.Second) {
		t.Fatal("no notification after result.json was written")
	}

	// Once its context ends, a subscription hears nothing more; the
	// other goes on.
	cancel()
	time.Sleep(100 * time.Millisecond)
	for len(status) > 0 {
		<-status
	}
	if err := p.CopyTo(ctx, "notify", strings.NewReader(`{"phase":"complete"}`), ".fleetlift/status.json"); err != nil {
		t.Fatal(err)
	}
	if err := p.CopyTo(ctx, "notify", strings.NewReader(`{}`), ".fleetlift/result.json"); err != nil {
		t.Fatal(err)
	}
	if !notified(other, 5*time.Second) {
		t.Fatal("the remaining subscription stopped hearing")
	}
	if notified(status, 200*time.Millisecond) {
		t.Error("a notification after the subscription ended")
	}
}

func TestNotifyChangesEndsWithTheLastWatcher(t *testing.T) {
	ctx := t.Context()
	p := newProvider(t, t.TempDir(), standInAgent(t))
	if _, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "idle"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cleanup(context.Background(), "idle") })
	wctx, cancel := context.WithCancel(ctx)
	if _, err := p.NotifyChanges(wctx, "idle", "status.json"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if !eventually(5*time.Second, func() bool {
		p.notify.mu.Lock()
		defer p.notify.mu.Unlock()
		return p.notify.w == nil
	}) {
		t.Error("the inotify instance outlived its last watcher")
	}
}

func TestNotifyChangesRefusals(t *testing.T) {
	ctx := t.Context()
	p := newProvider(t, t.TempDir(), standInAgent(t))
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "refuse"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cleanup(context.Background(), "refuse") })
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(sb.WorkingDir, "out")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, id, path string }{
		{"unknown sandbox", "never-made", "status.json"},
		{"absolute path", "refuse", "/etc/passwd"},
		{"leaves by ..", "refuse", "../home/x"},
		{"the workspace itself", "refuse", ""},
		{"missing directory", "refuse", "nowhere/status.json"},
		{"directory is a link out", "refuse", "out/status.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := p.NotifyChanges(ctx, tc.id, tc.path); err == nil {
				t.Errorf("NotifyChanges(%q, %q) succeeded", tc.id, tc.path)
			}
		})
	}
}
