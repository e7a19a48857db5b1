package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
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
	st := &status.Run{ID: "task/t", Task: &status.TaskState{
		ID: "t", Phase: status.TaskAwaitingApproval, Message: "waiting\x1b]0;pwned\x07",
		Result: &protocol.Result{Repositories: []protocol.RepositoryResult{{
			Name: "svc\u009b2J", Status: "success", FilesModified: []string{"main.go"},
			Diffs: []protocol.FileDiff{{Path: "main\r.go", Status: "modified", Additions: 2, Diff: patch}},
		}}},
	}}
	var out bytes.Buffer
	Human(&out, st)
	// What the reader finds awaiting approval: the task itself.
	Diffs(&out, []*status.TaskState{st.Task})
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

// TestStatusJSONShape: status ID -o json has the documented fields for a
// campaign and for a task awaiting approval, lists are [] rather than
// null, patches appear only with --diff, and text from the run keeps its
// value with its control characters escaped.
func TestStatusJSONShape(t *testing.T) {
	campaign := &status.Run{ID: "campaign/c", Closed: true, Campaign: &status.CampaignState{
		ID: "c", Phase: status.CampaignCompletedWithFailures, Message: "1 of 2 repositories failed, 1 completed",
		Summary: status.Summary{Total: 2, Completed: 1, Failed: 1, PRsCreated: 1},
		Units: []status.UnitResult{
			{Key: "api", Phase: status.TaskCompleted, Attempts: 1, WorkflowID: "campaign/c/api@1", PRs: []protocol.PullRequestInfo{{URL: "https://git.example.com/acme/api/pulls/3"}}},
			{Key: "web", Phase: status.TaskFailed, Attempts: 2, Error: "verifier build failed\u009b2J", SandboxesLost: 1},
		},
	}}
	task := &status.TaskState{ID: "t", Phase: status.TaskAwaitingApproval, ResultDigest: "sha256:" + strings.Repeat("a", 64),
		Result: &protocol.Result{Repositories: []protocol.RepositoryResult{{
			Name: "svc", Status: "success", FilesModified: []string{"go.mod"},
			Diffs: []protocol.FileDiff{{Path: "go.mod", Status: "modified", Additions: 1, Deletions: 1, Diff: "-go 1.21\n+go 1.26\n"}},
		}}}}
	awaiting := &status.Run{ID: "task/t", Task: task}

	decode := func(st *status.Run, waiting []*status.TaskState, diff bool) map[string]any {
		var b bytes.Buffer
		if err := JSON(&b, st, waiting, diff); err != nil {
			t.Fatal(err)
		}
		if i := strings.IndexAny(b.String(), "\u009b\x1b"); i >= 0 {
			t.Errorf("a control character reaches the terminal at byte %d:\n%s", i, b.String())
		}
		var doc map[string]any
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, b.String())
		}
		return doc
	}
	c := decode(campaign, nil, false)
	if c["format_version"] != float64(1) || c["workflow"] != "Campaign" || c["phase"] != "completed_with_failures" || c["closed"] != true {
		t.Errorf("campaign: %v", c)
	}
	if sm, _ := c["summary"].(map[string]any); sm["failed"] != float64(1) || sm["pull_requests"] != float64(1) {
		t.Errorf("campaign summary: %v", c["summary"])
	}
	repos, _ := c["repositories"].([]any)
	if len(repos) != 2 {
		t.Fatalf("campaign repositories: %v", c["repositories"])
	}
	api, web := repos[0].(map[string]any), repos[1].(map[string]any)
	if api["name"] != "api" || api["status"] != "completed" || len(api["pull_requests"].([]any)) != 1 || web["attempts"] != float64(2) ||
		web["sandboxes_lost"] != float64(1) || api["sandboxes_lost"] != nil {
		t.Errorf("campaign repositories: %v", repos)
	}
	if web["error"] != "verifier build failed\u009b2J" {
		t.Errorf("the error's value changed: %q", web["error"])
	}
	if w, ok := c["awaiting_approval"].([]any); !ok || len(w) != 0 {
		t.Errorf("awaiting_approval = %v, want []", c["awaiting_approval"])
	}

	for _, diff := range []bool{false, true} {
		a := decode(awaiting, []*status.TaskState{task}, diff)
		w, _ := a["awaiting_approval"].([]any)
		if a["workflow"] != "Task" || a["phase"] != "awaiting_approval" || len(w) != 1 {
			t.Fatalf("task: %v", a)
		}
		first := w[0].(map[string]any)
		change := first["changes"].([]any)[0].(map[string]any)
		if first["task"] != "t" || first["result_digest"] != task.ResultDigest || change["path"] != "go.mod" || change["additions"] != float64(1) {
			t.Errorf("awaiting_approval: %v", first)
		}
		if _, has := change["diff"]; has != diff {
			t.Errorf("with --diff %v the patch is there: %v", diff, has)
		}
	}
}

// A long error is cut between characters in a table cell: the cell stays
// valid UTF-8 whatever the error is written in.
func TestOneLineCutsBetweenCharacters(t *testing.T) {
	// An even prefix puts byte 117 inside an é.
	long := "errors: " + strings.Repeat("é", 80)
	got := OneLine(long)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "...") || len(got) > 120 || !strings.HasPrefix(long, strings.TrimSuffix(got, "...")) {
		t.Errorf("OneLine(%q) = %q; want a valid prefix of at most 120 bytes ending in ...", long, got)
	}
	if got := OneLine("first line\nsecond"); got != "first line …" {
		t.Errorf("oneLine of two lines = %q", got)
	}
}

// TestStatusShowsModelUsage: what a run's agents used of their models,
// as the gateway counted it, is in status: per repository and for the
// whole campaign, and for a task with why the gateway refused it.
func TestStatusShowsModelUsage(t *testing.T) {
	campaign := &status.Run{ID: "campaign/c", Closed: true, Campaign: &status.CampaignState{
		ID: "c", Phase: status.CampaignCompleted, Summary: status.Summary{Total: 3, Completed: 3},
		Units: []status.UnitResult{
			{Key: "api", Phase: status.TaskCompleted, ModelUsage: &protocol.ModelUsage{Requests: 3, InputTokens: 1000, OutputTokens: 200, CacheReadInputTokens: 50}},
			{Key: "web", Phase: status.TaskCompleted, ModelUsage: &protocol.ModelUsage{Requests: 2, InputTokens: 500, OutputTokens: 100, Refused: "limits.max_tokens spent"}},
			{Key: "docs", Phase: status.TaskCompleted},
		},
	}}
	var b bytes.Buffer
	Human(&b, campaign)
	if want := "model: 5 requests, 1850 tokens (1500 input, 300 output, 0 cache writes, 50 cache reads)"; !strings.Contains(b.String(), want) {
		t.Errorf("campaign status:\n%s\nwant the line %q", b.String(), want)
	}
	j := runJSON(campaign, nil, false)
	if u := j.ModelUsage; u == nil || u.Requests != 5 || u.Tokens() != 1850 || u.Refused != "" {
		t.Errorf("campaign model_usage = %+v; want 5 requests, 1850 tokens", u)
	}
	if u := j.Repositories[1].ModelUsage; u == nil || u.Refused == "" || j.Repositories[2].ModelUsage != nil {
		t.Errorf("repositories' model_usage: %+v, %+v", u, j.Repositories[2].ModelUsage)
	}

	task := &status.Run{ID: "task/t", Closed: true, Task: &status.TaskState{ID: "t", Phase: status.TaskFailed,
		Final: &status.TaskResult{Phase: status.TaskFailed, ModelUsage: &protocol.ModelUsage{Requests: 9, InputTokens: 90000, OutputTokens: 11000, Refused: "the task's limits.max_tokens (100000) is spent"}}}}
	b.Reset()
	Human(&b, task)
	for _, want := range []string{"model: 9 requests, 101000 tokens", "the gateway refused a request: the task's limits.max_tokens (100000) is spent"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("task status:\n%s\nwant %q", b.String(), want)
		}
	}
}

// A run whose calls were priced shows each repository's cost and the
// campaign's, and names the models its price table did not price.
func TestStatusShowsCost(t *testing.T) {
	campaign := &status.Run{ID: "campaign/c", Campaign: &status.CampaignState{
		ID: "c", Phase: status.CampaignPaused, Summary: status.Summary{Total: 3, Completed: 2},
		Message: "the campaign's model calls cost $5.00, reaching max_cost_per_campaign $3.00: paused until `fleetlift continue` or `abort`",
		Units: []status.UnitResult{
			{Key: "api", Phase: status.TaskCompleted, ModelUsage: &protocol.ModelUsage{Requests: 3, InputTokens: 1000, OutputTokens: 200, CostUSD: 4.5}},
			{Key: "web", Phase: status.TaskCompleted, ModelUsage: &protocol.ModelUsage{Requests: 1, InputTokens: 100, OutputTokens: 10, CostUSD: 0.0123, Unpriced: "local-llama"}},
			{Key: "docs", Phase: "pending"},
		},
	}}
	var b bytes.Buffer
	Human(&b, campaign)
	lines := strings.Split(b.String(), "\n")
	for _, want := range []string{
		"REPOSITORY  STATUS     PULL REQUEST  COST     ERROR",
		"api         completed                $4.50",
		"web         completed                $0.0123",
		"docs        pending                  -",
		"model: 4 requests, 1310 tokens (1100 input, 210 output, 0 cache writes, 0 cache reads), costing $4.51",
		"model: the worker's price table has no price for local-llama: the cost leaves those calls out",
	} {
		found := false
		for _, l := range lines {
			found = found || strings.TrimRight(l, " ") == want
		}
		if !found {
			t.Errorf("campaign status:\n%s\nwant the line %q", b.String(), want)
		}
	}
	if u := runJSON(campaign, nil, false).ModelUsage; u == nil || u.CostUSD != 4.5123 || u.Unpriced != "local-llama" {
		t.Errorf("campaign model_usage = %+v; want $4.5123 and the unpriced model", u)
	}
}

// TestLongErrorsInFull: an error too long for its table cell, or of
// several lines, is printed whole below the table, so that its end (often
// what to do about it) is never cut; one that fits is printed once.
func TestLongErrorsInFull(t *testing.T) {
	long := "clone file:///srv/repos/svc.git: local repository file:///srv/repos/svc.git is outside the directories this worker may use: start the worker with --allow-file-root DIR"
	twoLines := "verify: exit status 1\nFAIL: TestX"
	for _, tc := range []struct {
		name string
		run  *status.Run
	}{
		{"campaign", &status.Run{ID: "campaign/c", Closed: true, Campaign: &status.CampaignState{
			ID: "c", Phase: status.CampaignCompleted, Summary: status.Summary{Total: 3, Failed: 2, Completed: 1},
			Units: []status.UnitResult{
				{Key: "svc", Phase: status.TaskFailed, Error: long},
				{Key: "api", Phase: status.TaskFailed, Error: twoLines},
				{Key: "web", Phase: status.TaskFailed, Error: "short and whole"},
			},
		}}},
		{"task", &status.Run{ID: "task/t", Closed: true, Task: &status.TaskState{ID: "t", Phase: status.TaskFailed,
			Final: &status.TaskResult{Phase: status.TaskFailed, Repositories: []status.RepoResult{
				{Name: "svc", Status: "failed", Error: long},
				{Name: "api", Status: "failed", Error: twoLines},
				{Name: "web", Status: "failed", Error: "short and whole"},
			}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			Human(&b, tc.run)
			out := b.String()
			for _, want := range []string{"  svc: " + long + "\n", "  api: verify: exit status 1\n    FAIL: TestX\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("the output lacks %q:\n%s", want, out)
				}
			}
			if n := strings.Count(out, "short and whole"); n != 1 {
				t.Errorf("an error that fits its cell is printed %d times:\n%s", n, out)
			}
		})
	}
}
