package file_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/state/file"
	"github.com/fleetlift/fleetlift/internal/state/statetest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.Store {
		return file.New(filepath.Join(t.TempDir(), "state.json"))
	})
}

func TestMissingFileIsEmptyState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	s := file.New(path)
	list, err := s.List(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("List of a missing file = %v, %v; want no campaigns and no error", list, err)
	}
	if _, err := s.Get(ctx, "slog"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get from a missing file: error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "slog"); err != nil {
		t.Errorf("Delete from a missing file: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Delete of nothing created the file (stat: %v)", err)
	}
	if err := s.Put(ctx, statetest.Example("slog")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Put did not create the file: %v", err)
	}
}

func TestMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "state.json")
	err := file.New(path).Put(context.Background(), statetest.Example("slog"))
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Put into a missing directory: error = %v, want one naming %s", err, path)
	}
}

func TestCorruptFile(t *testing.T) {
	cases := []struct {
		name, content, want string
	}{
		{"empty file", "", "file is empty (a truncated write?)"},
		{"truncated", "{\n  \"version\": 1,\n  \"campaigns\": [\n    {\"id\": \"slog\",", "not valid JSON: unexpected end of the file (a truncated write?)"},
		{"not JSON", "version: 1\n", "not valid JSON: line 1, column 1: invalid character 'v' looking for beginning of value"},
		{"syntax error on line 3", "{\n  \"version\": 1,\n  \"campaigns\": [}\n", "not valid JSON: line 3, column 17: invalid character '}' looking for beginning of value"},
		{"no version", `{"campaigns": []}`, `no "version" field; this build reads version 1`},
		{"newer version", `{"version": 2, "campaigns": [], "owners": {}}`, "format version 2; this build reads version 1"},
		{"misspelt field", `{"version": 1, "campaigns": [{"id": "slog", "kind": "Campaign", "spec_digets": "sha256:1"}]}`, `not a valid state file: unknown field "spec_digets"`},
		{"wrong type", "{\"version\": 1,\n \"campaigns\": [{\"id\": \"slog\", \"generation\": \"3\"}]}", "not a valid state file: line 2, column 47: field campaigns.generation: got a JSON string, want int64"},
		{"no id", `{"version": 1, "campaigns": [{"kind": "Campaign"}]}`, "campaigns[0]: campaign has no id"},
		{"unknown kind", `{"version": 1, "campaigns": [{"id": "slog", "kind": "Config"}]}`, `campaigns[0]: campaign slog: kind "Config" is neither Task nor Campaign`},
		{"duplicate id", `{"version": 1, "campaigns": [{"id": "slog", "kind": "Campaign"}, {"id": "slog", "kind": "Task"}]}`, `campaigns[1]: id "slog" is also campaigns[0]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			s := file.New(path)
			_, err := s.List(context.Background())
			if err == nil {
				t.Fatal("List: want an error")
			}
			prefix := "state file " + path + ": "
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("List error =\n  %v\nwant it to start %q and contain %q", err, prefix, c.want)
			}
			// A corrupt file is never overwritten by a write.
			if err := s.Put(context.Background(), statetest.Example("other")); err == nil {
				t.Error("Put over a corrupt file: want an error")
			}
			if got, _ := os.ReadFile(path); string(got) != c.content {
				t.Errorf("Put changed the corrupt file to:\n%s", got)
			}
		})
	}
}

// TestAtomicWrite reads the file while another store rewrites it: every
// read must see a whole file, the old state or the new.
func TestAtomicWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	writer, reader := file.New(path), file.New(path)
	big := statetest.Example("big")
	for i := range 2000 {
		big.Repos = append(big.Repos, state.Repo{Name: fmt.Sprintf("repo-%04d", i), Status: state.RepoPending})
	}
	if err := writer.Put(ctx, big); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			list, err := reader.List(ctx)
			if err == nil && (len(list) == 0 || len(list[0].Repos) != 2002) {
				err = fmt.Errorf("read %d campaigns, want the whole big one", len(list))
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	for i := range 30 {
		big.Generation = int64(i)
		if err := writer.Put(ctx, big); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-readErr:
		t.Fatalf("a reader saw a partial write: %v", err)
	default:
	}

	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "state.json" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only state.json (temporary files left behind)", names)
	}
}

func TestWriteKeepsPermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(`{"version": 1, "campaigns": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := file.New(path).Put(context.Background(), statetest.Example("slog")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after Put = %v, want -rw-------", fi.Mode().Perm())
	}
}

// TestFormat pins the documented format: what Put writes, and that a file
// written by hand in that format reads back.
func TestFormat(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	s := file.New(path)
	task := state.Campaign{ID: "go-bump", Kind: state.KindTask, SpecDigest: "sha256:" + strings.Repeat("1", 64), Generation: 1, Phase: state.PhaseCompleted}
	// A campaign that ended with a failed repository.
	failed := state.Campaign{ID: "tls-upgrade", Kind: state.KindCampaign, SpecDigest: "sha256:" + strings.Repeat("2", 64), Generation: 2,
		Phase: state.PhaseCompletedWithFailures, Message: "1 of 2 repositories failed, 1 completed",
		Repos: []state.Repo{{Name: "api", Status: state.RepoCompleted}, {Name: "billing", Status: state.RepoFailed}}}
	for _, c := range []state.Campaign{statetest.Example("slog-rollout"), task, failed} {
		if err := s.Put(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "state.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("state file differs from %s (run go test -update if the change is intended):\n%s", golden, got)
	}

	cs, err := file.New(golden).List(ctx)
	if err != nil {
		t.Fatalf("read %s: %v", golden, err)
	}
	if len(cs) != 3 || !statetest.Equal(cs[0], task) || !statetest.Equal(cs[1], statetest.Example("slog-rollout")) || !statetest.Equal(cs[2], failed) {
		t.Errorf("read back %+v", cs)
	}
	if !cs[2].Phase.Done() {
		t.Errorf("%s read back as %s, a phase that is not done", cs[2].ID, cs[2].Phase)
	}
}
