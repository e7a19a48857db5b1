package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/devserver"
)

// TestLargeSpecMemoStartsWithoutAWarning: a run's memo carries its spec,
// so a campaign of a hundred repositories has a memo of several KiB; its
// start logs no memo-size warning from the Temporal SDK (whose own
// threshold is 2 KiB), while a memo past 512 KiB still does.
func TestLargeSpecMemoStartsWithoutAWarning(t *testing.T) {
	state := t.TempDir()
	addr := freeAddr(t)
	startServer(t, addr, state)
	var logs bytes.Buffer
	tf := &temporalFlags{address: addr, namespace: devserver.Namespace, stateDir: state, tls: temporalTLSFlags{mode: "auto"},
		log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	c, err := tf.dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := func(id string, memo int) {
		t.Helper()
		// Random text: fleetlift's converter stores what compresses
		// compressed, and a spec's repositories barely do.
		spec := make([]byte, memo*3/4)
		if _, err := rand.Read(spec); err != nil {
			t.Fatal(err)
		}
		_, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls",
			Memo: map[string]any{"spec": base64.StdEncoding.EncodeToString(spec)}}, "Campaign")
		if err != nil {
			t.Fatal(err)
		}
	}
	start("campaign/hundred", 8<<10)
	if strings.Contains(logs.String(), "memo with size") {
		t.Errorf("a start with an 8 KiB memo logged:\n%s", logs.String())
	}
	start("campaign/huge", 900<<10)
	if !strings.Contains(logs.String(), "memo with size that exceeded the warning limit") {
		t.Errorf("a start with a 900 KiB memo logged no warning:\n%s", logs.String())
	}
}
