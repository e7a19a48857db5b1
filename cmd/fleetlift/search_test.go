package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/devserver/credential"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

var recordSearchHistories = flag.String("record-search-histories", "", "write the histories of TestSearchAttributes' campaign (bump) and task runs to this directory (the replay tests' fixtures of runs with search attributes)")

// TestSearchAttributes: Temporal's own clients (its UI and CLI, any SDK)
// find fleetlift's runs by each search attribute: a campaign by kind, id,
// campaign and spec digest, its children (which carry a memo saying what
// they are) by campaign, a task awaiting approval by its phase, and the
// same task by its final phase once approved. A campaign whose units open
// pull requests without approval runs them in its own history: it has
// no children to find.
func TestSearchAttributes(t *testing.T) {
	registered := slices.Sorted(maps.Keys(devserver.SearchAttributes))
	if want := slices.Sorted(slices.Values(workflow.SearchAttributeNames())); !slices.Equal(registered, want) {
		t.Fatalf("the embedded server registers %v, the runs carry %v", registered, want)
	}
	root := t.TempDir()
	urls := demoRepos(t, root, 2)
	campaign := writeDef(t, root, "bump.yaml", fmt.Sprintf(`version: 1
kind: Campaign
id: bump
title: Bump go
template:
  execution:
    deterministic: {image: golang, command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]}
  pull_request: {branch_prefix: auto/bump, title: Bump go}
repositories:
  - url: %s
  - url: %s
`, urls[0], urls[1]))
	inventory := writeDef(t, root, "inventory.yaml", fmt.Sprintf(`version: 1
kind: Campaign
id: inventory
title: Inventory
template:
  mode: report
  execution:
    deterministic: {image: golang, command: [sh, -c, "printf -- '---\\nok: true\\n---\\nfine\\n' > REPORT.md"]}
repositories:
  - url: %s
  - url: %s
`, urls[0], urls[1]))
	task := writeDef(t, root, "task.yaml", fmt.Sprintf(`version: 1
id: needs-ok
title: Bump go, approved
repositories: [{url: %s}]
execution:
  deterministic: {image: golang, command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]}
require_approval: true
pull_request: {branch_prefix: auto/ok, title: Bump go}
`, urls[0]))
	addr, state := freeAddr(t), filepath.Join(root, "state")
	for _, def := range []string{campaign, inventory} {
		if out, code := runCLI(t, "run", "--file", def, "--temporal-address", addr, "--state-dir", state); code != 0 {
			t.Fatalf("run %s: exit %d:\n%s", def, code, out)
		}
	}

	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"run", "--file", task, "--temporal-address", addr, "--state-dir", state}, &out, &out)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "awaits approval") {
		if time.Now().After(deadline) {
			t.Fatalf("never awaited approval:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	tlsConf, err := credential.LoadClient(credentialDir(state))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: devserver.Namespace, ConnectionOptions: client.ConnectionOptions{TLS: tlsConf}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	memoDigest := func(id string) string {
		t.Helper()
		d, err := c.DescribeWorkflowExecution(t.Context(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		var digest string
		if err := converterFor().FromPayload(d.WorkflowExecutionInfo.GetMemo().GetFields()[status.MemoDigest], &digest); err != nil || !strings.HasPrefix(digest, "sha256:") {
			t.Fatalf("the memo of %s has no digest: %q %v", id, digest, err)
		}
		return digest
	}
	digest, inventoryDigest := memoDigest("campaign/bump"), memoDigest("campaign/inventory")
	child := regexp.MustCompile(`^campaign/inventory/svc[01]@`)
	for _, q := range []struct {
		query string
		want  []string // workflow ids; "child" stands for each of the two children
	}{
		{`FleetliftKind = "Campaign"`, []string{"campaign/bump", "campaign/inventory"}},
		{`FleetliftID = "bump"`, []string{"campaign/bump"}},
		{`FleetliftCampaign = "bump"`, []string{"campaign/bump"}},
		{`FleetliftKind = "Task" AND FleetliftCampaign = "bump"`, nil},
		{fmt.Sprintf(`FleetliftSpecDigest = %q`, digest), []string{"campaign/bump"}},
		{`FleetliftPhase = "completed" AND FleetliftCampaign = "bump"`, []string{"campaign/bump"}},
		{`FleetliftCampaign = "inventory"`, []string{"campaign/inventory", "child", "child"}},
		{`FleetliftKind = "Task" AND FleetliftCampaign = "inventory"`, []string{"child", "child"}},
		{fmt.Sprintf(`FleetliftSpecDigest = %q`, inventoryDigest), []string{"campaign/inventory", "child", "child"}},
		{`FleetliftPhase = "completed" AND FleetliftCampaign = "inventory"`, []string{"campaign/inventory", "child", "child"}},
		{`FleetliftPhase = "awaiting_approval"`, []string{"task/needs-ok"}},
		{`FleetliftKind = "Task" AND FleetliftID = "needs-ok"`, []string{"task/needs-ok"}},
	} {
		got := waitForList(t, c, q.query, len(q.want))
		var ids []string
		for _, id := range got {
			if child.MatchString(id) {
				id = "child"
			}
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if want := slices.Sorted(slices.Values(q.want)); !slices.Equal(ids, want) {
			t.Errorf("%s: found %v, want %v", q.query, got, q.want)
		}
	}

	// A child's memo says what it is and which campaign it belongs to.
	for _, id := range waitForList(t, c, `FleetliftKind = "Task" AND FleetliftCampaign = "inventory"`, 2) {
		d, err := c.DescribeWorkflowExecution(t.Context(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		memo := map[string]string{}
		for k, p := range d.WorkflowExecutionInfo.GetMemo().GetFields() {
			var s string
			if converterFor().FromPayload(p, &s) == nil {
				memo[k] = s
			}
		}
		if memo[status.MemoKind] != "Task" || memo[workflow.MemoCampaign] != "inventory" || memo[status.MemoDigest] != inventoryDigest || !strings.HasPrefix(memo[status.MemoID], "inventory/svc") {
			t.Errorf("%s: memo %v", id, memo)
		}
	}

	status, code := runCLI(t, "status", "needs-ok", "--temporal-address", addr, "--state-dir", state)
	result := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(status)
	if code != 0 || result == "" {
		t.Fatalf("status while waiting (exit %d):\n%s", code, status)
	}
	if msg, code := runCLI(t, "approve", "needs-ok", "--digest", result, "--temporal-address", addr, "--state-dir", state); code != 0 {
		t.Fatalf("approve: exit %d: %s", code, msg)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run after approval: exit %d:\n%s", code, out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("run did not finish after approval:\n%s", out.String())
	}
	// run stopped the server it started: start it again to look.
	srv := startServer(t, addr, state)
	c2, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := waitForList(t, c2, `FleetliftPhase = "completed" AND FleetliftID = "needs-ok"`, 1); !slices.Equal(got, []string{"task/needs-ok"}) {
		t.Errorf("the approved task by its final phase: %v", got)
	}
	if got := waitForList(t, c2, `FleetliftPhase = "awaiting_approval"`, 0); len(got) != 0 {
		t.Errorf("still listed as awaiting approval: %v", got)
	}
	if *recordSearchHistories != "" {
		// campaign/bump runs its units in its own history (direct
		// units), campaign/inventory as children (reports).
		writeHistory(t, c2, "campaign/bump", filepath.Join(*recordSearchHistories, "campaign-direct-units.history.json"))
		writeHistory(t, c2, "campaign/inventory", filepath.Join(*recordSearchHistories, "campaign-children.history.json"))
		writeHistory(t, c2, "task/needs-ok", filepath.Join(*recordSearchHistories, "task-search-attributes.history.json"))
	}
}

// waitForList lists the workflow ids a visibility query finds, waiting
// (visibility lags the runs) until it finds want of them, or a minute
// has passed.
func waitForList(t *testing.T, c client.Client, query string, want int) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := c.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: devserver.Namespace, Query: query})
		if err != nil {
			t.Fatalf("list %s: %v", query, err)
		}
		var ids []string
		for _, e := range resp.Executions {
			ids = append(ids, e.Execution.WorkflowId)
		}
		if len(ids) == want || time.Now().After(deadline) {
			return ids
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writeHistory writes the latest run of workflow id's history as JSON.
func writeHistory(t *testing.T, c client.Client, id, file string) {
	t.Helper()
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
