package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

func writeManifest(t *testing.T, ws string, data []byte) {
	t.Helper()
	dir := filepath.Join(ws, protocol.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".manifest.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, protocol.ManifestFile)); err != nil {
		t.Fatal(err)
	}
}

func serve(t *testing.T, o agent.Options) chan error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- agent.Serve(ctx, o) }()
	return done
}

func TestServe(t *testing.T) {
	tests := []struct {
		name     string
		manifest func(t *testing.T) []byte
		phase    protocol.Phase
		message  string
	}{
		{"runs the manifest once it appears", func(t *testing.T) []byte {
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("svc", remote))
			m.Execution.Command = sh(`echo served >> README.md`)
			data, _ := json.Marshal(m)
			return data
		}, protocol.PhaseComplete, "1 succeeded"},
		{"an invalid manifest fails the run", func(*testing.T) []byte {
			return []byte(`{"task_id": "x", "mode": `)
		}, protocol.PhaseFailed, "invalid manifest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			done := serve(t, o)
			time.Sleep(100 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("Serve returned before there was a manifest: %v", err)
			default:
			}
			writeManifest(t, o.Workspace, tt.manifest(t))
			if err := <-done; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			st := status(t, o.Workspace)
			if st.Phase != tt.phase || !strings.Contains(st.Message, tt.message) {
				t.Fatalf("status %s %q, want %s %q", st.Phase, st.Message, tt.phase, tt.message)
			}

			// A restarted agent finds the run finished and does nothing.
			if err := <-serve(t, o); err != nil {
				t.Fatalf("Serve after the end: %v", err)
			}
			if again := status(t, o.Workspace); !again.UpdatedAt.Equal(st.UpdatedAt) {
				t.Fatalf("a finished run was touched again: %+v", again)
			}
		})
	}
}

// Serve tells how many repositories the manifest works on at once before
// the run starts (the serve command sizes its process with it): one for
// a task of one repository, the group's parallelism for a group, never
// more than its repositories.
func TestServeSaysHowManyRepositoriesRunAtOnce(t *testing.T) {
	for _, c := range []struct {
		name     string
		repos    int
		parallel int
		want     int
	}{
		{"one repository", 1, 0, 1},
		{"a group one at a time", 3, 1, 1},
		{"a group three at a time", 4, 3, 3},
		{"fewer repositories than its parallelism", 2, 8, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := options(t)
			var told []int
			o.Workers = func(n int) { told = append(told, n) }
			m := manifest()
			for i := range c.repos {
				name := fmt.Sprintf("svc%d", i)
				m.Repositories = append(m.Repositories, repo(name, gittest.NewRemote(t, "", name, map[string]string{"README.md": "# " + name + "\n"})))
			}
			m.Parallel = c.parallel
			data, _ := json.Marshal(m)
			done := serve(t, o)
			writeManifest(t, o.Workspace, data)
			if err := <-done; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			if !slices.Equal(told, []int{c.want}) {
				t.Errorf("told %v; want %d once, before the run", told, c.want)
			}
		})
	}
}
