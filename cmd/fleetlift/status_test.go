package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

// TestStatusJSON: a script follows a run with `fleetlift status -o json`:
// the list shows the task awaiting approval, the run shows the digest to
// approve, and once approved with it, the run shows the task completed
// with its branch.
func TestStatusJSON(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 1)
	def := writeDef(t, root, "task.yaml", fmt.Sprintf(`version: 1
id: scripted
title: Bump go
repositories: [{url: %s}]
execution:
  deterministic: {image: golang, command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]}
require_approval: true
pull_request: {branch_prefix: auto/scripted, title: Bump go}
`, urls[0]))
	addr, state := freeAddr(t), filepath.Join(root, "state")
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"run", "--file", def, "--temporal-address", addr, "--state-dir", state}, &out, &out)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "awaits approval") {
		if time.Now().After(deadline) {
			t.Fatalf("never awaited approval:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	status := func(args ...string) map[string]any {
		t.Helper()
		got, code := runCLI(t, append(append([]string{"status"}, args...), "-o", "json", "--temporal-address", addr, "--state-dir", state)...)
		var doc map[string]any
		if err := json.Unmarshal([]byte(got), &doc); err != nil || code != 0 {
			t.Fatalf("status %v -o json: exit %d, %v:\n%s", args, code, err, got)
		}
		return doc
	}
	// The list: visibility shows the run's phase once it has caught up.
	var entry map[string]any
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		runs, _ := status()["runs"].([]any)
		if len(runs) == 1 {
			entry = runs[0].(map[string]any)
		}
		if entry["phase"] == "awaiting_approval" || time.Now().After(deadline) {
			break
		}
	}
	if entry["id"] != "task/scripted" || entry["workflow"] != "Task" || entry["kind"] != "Task" || entry["definition"] != "scripted" ||
		entry["status"] != "running" || entry["phase"] != "awaiting_approval" || !strings.HasPrefix(fmt.Sprint(entry["digest"]), "sha256:") || entry["generation"] != float64(1) {
		t.Errorf("list entry: %v", entry)
	}
	waiting, _ := status("scripted")["awaiting_approval"].([]any)
	if len(waiting) != 1 {
		t.Fatalf("awaiting_approval: %v", waiting)
	}
	digest, _ := waiting[0].(map[string]any)["result_digest"].(string)
	if msg, code := runCLI(t, "approve", "scripted", "--digest", digest, "--temporal-address", addr, "--state-dir", state); code != 0 {
		t.Fatalf("approve with the digest status -o json gave: exit %d: %s", code, msg)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run after approval: exit %d:\n%s", code, out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("run did not finish after approval:\n%s", out.String())
	}
	startServer(t, addr, state)
	doc := status("task/scripted")
	repos, _ := doc["repositories"].([]any)
	if doc["phase"] != "completed" || doc["closed"] != true || len(repos) != 1 {
		t.Fatalf("after approval: %v", doc)
	}
	if prs, _ := repos[0].(map[string]any)["pull_requests"].([]any); len(prs) != 1 || !strings.Contains(fmt.Sprint(prs[0]), "auto/scripted/scripted") {
		t.Errorf("the task's pull request: %v", repos[0])
	}
}
