package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestStatusDiffNeutralisesTerminalEscapes: `fleetlift status ID --diff`
// shows a patch's escape sequences and carriage returns instead of
// letting them move the cursor and erase lines, so that the approver sees
// every line the change holds; so do the run's message, repository names
// and paths.
func TestStatusDiffNeutralisesTerminalEscapes(t *testing.T) {
	// The second added line goes up one line, erases it and returns to
	// its start: at a terminal, only "+harmless()" would show.
	patch := "@@ -1 +1,2 @@\n+evil()\x1b[1A\x1b[2K\r+harmless()\n"
	st := &runState{id: "task/t", task: &workflow.TaskState{
		ID: "t", Phase: workflow.TaskAwaitingApproval, Message: "waiting\x1b]0;pwned\x07",
		Result: &protocol.Result{Repositories: []protocol.RepositoryResult{{
			Name: "svc\u009b2J", Status: "success", FilesModified: []string{"main.go"},
			Diffs: []protocol.FileDiff{{Path: "main\r.go", Status: "modified", Additions: 2, Diff: patch}},
		}}},
	}}
	var out bytes.Buffer
	st.write(&out)
	st.writeDiffs(context.Background(), nil, &out)
	got := out.String()
	if i := strings.IndexAny(got, "\x1b\r\a\u009b"); i >= 0 {
		t.Fatalf("a control character reaches the terminal at byte %d:\n%q", i, got)
	}
	for _, want := range []string{
		"+evil()^[[1A^[[2K^M+harmless()\n",
		"waiting^[]0;pwned^G",
		`svc\u009b2J/main^M.go`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status does not show %q:\n%s", want, got)
		}
	}
}
