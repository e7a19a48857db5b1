package agent

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

func readStatusFile(t *testing.T, path string) protocol.Status {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st protocol.Status
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestStatusFileWritesPhasesAtOnceAndTheLatestStep(t *testing.T) {
	path := filepath.Join(t.TempDir(), protocol.StatusFile)
	s := &protocolFile{path: path, log: slog.New(slog.DiscardHandler)}
	write := func(phase protocol.Phase, step string, urgent bool) {
		t.Helper()
		if err := s.write(protocol.Status{Phase: phase, Step: step}, urgent, nil); err != nil {
			t.Fatal(err)
		}
	}
	write(protocol.PhaseExecuting, "first", true)
	if st := readStatusFile(t, path); st.Step != "first" {
		t.Fatalf("a new phase is not written at once: %+v", st)
	}
	// A burst of steps: the last one reaches the file without another
	// write to push it out.
	for _, step := range []string{"a", "b", "c", "last"} {
		write(protocol.PhaseExecuting, step, false)
	}
	deadline := time.Now().Add(10 * time.Second)
	for readStatusFile(t, path).Step != "last" {
		if time.Now().After(deadline) {
			t.Fatalf("the latest step never reached status.json: %+v", readStatusFile(t, path))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A step waiting behind a phase change is dropped: the phase, written
	// at once, is the newer news.
	write(protocol.PhaseVerifying, "stale", false)
	write(protocol.PhaseComplete, "done", true)
	if st := readStatusFile(t, path); st.Phase != protocol.PhaseComplete {
		t.Fatalf("the final phase is not written at once: %+v", st)
	}
	time.Sleep(2 * stepEvery)
	if st := readStatusFile(t, path); st.Phase != protocol.PhaseComplete || st.Step != "done" {
		t.Fatalf("a step written before the end replaced it: %+v", st)
	}
}

// News the worker does not wait for, followed at once by news it does,
// is one write: the urgent one, which carries both.
func TestNewsJustBeforeAnUrgentWriteIsOneWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), protocol.ResultFile)
	f := &protocolFile{path: path, log: slog.New(slog.DiscardHandler)}
	if err := f.write(protocol.Result{Status: protocol.PhaseCreatingPRs, Error: "pull request opened"}, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.write(protocol.Result{Status: protocol.PhaseComplete}, true, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * newsSettle)
	var r protocol.Result
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err != nil || r.Status != protocol.PhaseComplete {
		t.Fatalf("result.json %s (%v); want the urgent write's", data, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.writes != 1 {
		t.Fatalf("%d writes; want 1", f.writes)
	}
}

// What the agent says of a phase (the line a Docker sandbox's watch wakes
// on) comes once status.json holds it, not when the write was asked for.
func TestAPhaseIsSaidOnceWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), protocol.StatusFile)
	f := &protocolFile{path: path, log: slog.New(slog.DiscardHandler)}
	said := make(chan protocol.Phase, 4)
	say := func(want protocol.Phase) func() {
		return func() {
			if st := readStatusFile(t, path); st.Phase != want {
				t.Errorf("%s said while status.json holds %s", want, st.Phase)
			}
			said <- want
		}
	}
	if err := f.write(protocol.Status{Phase: protocol.PhaseExecuting}, false, say(protocol.PhaseExecuting)); err != nil {
		t.Fatal(err)
	}
	// A step of the same phase replaces the content, not what is said.
	if err := f.write(protocol.Status{Phase: protocol.PhaseExecuting, Step: "running_command"}, false, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-said:
	case <-time.After(10 * time.Second):
		t.Fatal("the phase was never said")
	}
	if st := readStatusFile(t, path); st.Step != "running_command" {
		t.Errorf("status.json holds %+v; want the latest step", st)
	}
	// A phase replaced by an urgent write is not said: the urgent one's
	// own note is.
	if err := f.write(protocol.Status{Phase: protocol.PhaseCreatingPRs}, false, say(protocol.PhaseCreatingPRs)); err != nil {
		t.Fatal(err)
	}
	if err := f.write(protocol.Status{Phase: protocol.PhaseComplete}, true, say(protocol.PhaseComplete)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * stepEvery)
	close(said)
	var rest []protocol.Phase
	for p := range said {
		rest = append(rest, p)
	}
	if len(rest) != 1 || rest[0] != protocol.PhaseComplete {
		t.Errorf("said %v after the first; want only complete", rest)
	}
}
