package devserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fleetlift/fleetlift/cmd/fleetlift-agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/sandbox/local"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

var (
	recordHistory      = flag.String("record-history", "", "write the task run's history as JSON to this file (refreshes the replay test's fixture)")
	recordPagesHistory = flag.String("record-pages-histories", "", "write the histories of the paged campaign and of its second page as JSON to this directory (refreshes the replay test's fixtures)")
)

// TestMain lets the test binary serve as the in-sandbox agent, as the
// fleetlift binary does with its hidden `agent` command, and as a first
// start killed midway (firstStart).
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "first-start" {
		os.Exit(firstStart(os.Args[2], os.Args[3]))
	}
	if code, ok := agentcmd.RunAgent(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// bareRepos makes n bare repositories, each with a go.mod saying go 1.21.
func bareRepos(t *testing.T, root string, n int) []string {
	t.Helper()
	var urls []string
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		src := filepath.Join(root, "src", name)
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		gitRun(t, src, "init", "-q", "-b", "main")
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/"+name+"\n\ngo 1.21\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitRun(t, src, "add", ".")
		gitRun(t, src, "commit", "-qm", "init")
		bare := filepath.Join(root, name+".git")
		gitRun(t, root, "clone", "-q", "--bare", src, bare)
		urls = append(urls, "file://"+bare)
	}
	return urls
}

type env struct {
	srv  *devserver.Server
	c    client.Client
	root string
}

func start(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(root, "temporal.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &env{srv: srv, c: c, root: root}
}

// newWorker starts a worker with a new local provider on the shared
// sandbox root, as a restarted `fleetlift worker` would.
func (e *env) newWorker(t *testing.T) worker.Worker {
	t.Helper()
	p, err := local.New(local.Options{Root: filepath.Join(e.root, "sandboxes"), AgentCommand: []string{os.Args[0], "agent"}, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(e.c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflow.Task)
	w.RegisterWorkflow(workflow.Campaign)
	w.RegisterWorkflow(workflow.CampaignPage)
	g := &git.Git{}
	forges, lf := activity.LocalForges(g)
	// It keeps a scratch repository for its next pull request.
	t.Cleanup(func() { lf.Close() })
	w.RegisterActivity(&activity.Activities{Sandbox: p, PollInterval: 100 * time.Millisecond,
		// The test's repositories are local.
		SandboxEnv: map[string]string{protocol.EnvAllowFileRoots: os.TempDir()},
		Forges:     forges, Git: g, FileRoots: []string{os.TempDir()}})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	return w
}

func bumpTemplate(sleep string) workflow.TaskInput {
	return workflow.TaskInput{
		Timeout:          5 * time.Minute,
		HeartbeatTimeout: 3 * time.Second,
		Manifest: protocol.Manifest{
			Mode:           protocol.ModeTransform,
			Title:          "bump go",
			TimeoutSeconds: 300,
			Execution: protocol.Execution{Type: protocol.ExecutionDeterministic,
				Command: []string{"sh", "-c", "sleep " + sleep + "; sed -i 's/^go 1.21$/go 1.26/' go.mod"}},
			Verifiers:   []protocol.Verifier{{Name: "bumped", Command: []string{"grep", "-q", "^go 1.26$", "go.mod"}}},
			PullRequest: &protocol.PullRequest{BranchPrefix: "auto/bump", Title: "Bump go"},
			GitConfig:   workflow.DefaultGit,
			Forge:       "local",
		},
	}
}

func campaignOf(id string, urls []string, sleep string) workflow.CampaignInput {
	in := workflow.CampaignInput{ID: id, Template: bumpTemplate(sleep), BatchSize: 5, MaxParallel: 2, ThresholdPercent: 100}
	for i, u := range urls {
		name := fmt.Sprintf("svc-%d", i)
		in.Units = append(in.Units, workflow.Unit{Key: name, Repositories: []protocol.Repository{{URL: u, Branch: "main", Name: name}}})
	}
	return in
}

// branches lists a bare repository's branches other than main.
func branches(t *testing.T, bare string) []string {
	t.Helper()
	var out []string
	for _, b := range strings.Fields(gitRun(t, bare, "for-each-ref", "--format=%(refname:short)", "refs/heads/")) {
		if b != "main" {
			out = append(out, b)
		}
	}
	return out
}

func checkBumped(t *testing.T, urls []string, branch string) {
	t.Helper()
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		got := branches(t, bare)
		if len(got) != 1 || got[0] != branch {
			t.Errorf("%s: branches %v, want exactly [%s]", bare, got, branch)
			continue
		}
		if mod := gitRun(t, bare, "show", branch+":go.mod"); !strings.Contains(mod, "go 1.26") {
			t.Errorf("%s: go.mod on %s not bumped:\n%s", bare, branch, mod)
		}
	}
}

func runCampaign(t *testing.T, e *env, in workflow.CampaignInput) client.WorkflowRun {
	t.Helper()
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: "campaign/" + in.ID, TaskQueue: workflow.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}, workflow.Campaign, in)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func TestCampaignAcrossFiveRepositories(t *testing.T) {
	lookups := recordLookups(t)
	before := runtime.NumGoroutine()
	e := start(t)
	// The server's task schedulers run a few workers each, not Temporal's
	// 512 (2,530 goroutines in all with them, about 400 without).
	if n := runtime.NumGoroutine() - before; n > 800 {
		t.Errorf("the embedded server started %d goroutines, want at most 800", n)
	}
	urls := bareRepos(t, e.root, 5)
	w := e.newWorker(t)
	defer w.Stop()
	run := runCampaign(t, e, campaignOf("bump", urls, "0"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var st status.CampaignState
	if err := run.Get(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if st.Summary.Completed != 5 || st.Summary.PRsCreated != 5 {
		t.Fatalf("campaign: %+v", st.Summary)
	}
	checkBumped(t, urls, "auto/bump/bump")
	if left, _ := os.ReadDir(filepath.Join(e.root, "sandboxes")); len(left) != 0 {
		t.Errorf("%d sandboxes left behind", len(left))
	}
	// Everything here is on loopback, by address: the server calls no
	// one (Temporal's version check would ask version-info.temporal.io).
	if names := lookups(); len(names) > 0 {
		t.Errorf("the server, the worker or the agents looked up %d names: %v", len(names), names)
	}
}

// TestWorkerRestartMidCampaign stops the worker while tasks run and starts
// a new one (with a new sandbox provider on the same root): the campaign
// still ends with exactly one branch per repository.
func TestWorkerRestartMidCampaign(t *testing.T) {
	e := start(t)
	urls := bareRepos(t, e.root, 5)
	w1 := e.newWorker(t)
	run := runCampaign(t, e, campaignOf("restart", urls, "2"))

	// Wait until some tasks are running in their sandboxes.
	deadline := time.Now().Add(time.Minute)
	for {
		entries, _ := os.ReadDir(filepath.Join(e.root, "sandboxes"))
		if len(entries) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no sandbox started")
		}
		time.Sleep(100 * time.Millisecond)
	}
	w1.Stop()
	w2 := e.newWorker(t)
	defer w2.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var st status.CampaignState
	if err := run.Get(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if st.Summary.Completed != 5 {
		t.Fatalf("campaign after a worker restart: %+v %+v", st.Summary, st.Units)
	}
	checkBumped(t, urls, "auto/bump/restart")
	for _, u := range st.Units {
		if u.Attempts != 1 {
			t.Errorf("%s ran %d times; a worker restart must not start it again", u.Key, u.Attempts)
		}
	}
}

// TestTaskApprovalOnServer runs one task that needs approval, approves it
// by signal, and (with -record-history) records its history for the
// replay test.
func TestTaskApprovalOnServer(t *testing.T) {
	e := start(t)
	urls := bareRepos(t, e.root, 1)
	w := e.newWorker(t)
	defer w.Stop()
	in := bumpTemplate("0")
	in.ID = "approve-me"
	in.Manifest.TaskID = "approve-me"
	in.Manifest.RequireApproval = true
	in.Manifest.Repositories = []protocol.Repository{{URL: urls[0], Branch: "main", Name: "svc-0"}}
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "task/approve-me", TaskQueue: workflow.TaskQueue}, workflow.Task, in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var digest string
	for {
		v, err := e.c.QueryWorkflow(ctx, run.GetID(), "", status.QueryStatus)
		if err != nil {
			t.Fatal(err)
		}
		var st status.TaskState
		if err := v.Get(&st); err != nil {
			t.Fatal(err)
		}
		if st.Phase == status.TaskAwaitingApproval {
			digest = st.ResultDigest
			if st.Result == nil || len(st.Result.Repositories[0].Diffs) != 1 || st.Result.Repositories[0].Diffs[0].Path != "go.mod" {
				t.Fatalf("awaiting approval without the diff: %+v", st.Result)
			}
			break
		}
		if st.Phase.Done() {
			t.Fatalf("finished without waiting for approval: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	bare := strings.TrimPrefix(urls[0], "file://")
	if b := branches(t, bare); len(b) != 0 {
		t.Fatalf("branches pushed before approval: %v", b)
	}
	if err := e.c.SignalWorkflow(ctx, run.GetID(), "", workflow.SignalApprove, workflow.DecisionSignal{ResultDigest: digest}); err != nil {
		t.Fatal(err)
	}
	var res status.TaskResult
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Phase != status.TaskCompleted || res.Repositories[0].PullRequest == nil {
		t.Fatalf("after approval: %+v", res)
	}
	checkBumped(t, urls, "auto/bump/approve-me")
	if *recordHistory != "" {
		writeHistory(t, e.c, run.GetID(), run.GetRunID(), *recordHistory)
	}
}

// writeHistory writes the history of run runID of wid as JSON to file.
func writeHistory(t *testing.T, c client.Client, wid, runID, file string) {
	t.Helper()
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(context.Background(), wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
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

// TestStateFromTemporal reads recorded state back from a finished
// campaign's memo and result, as `fleetlift plan --state temporal` does.
func TestStateFromTemporal(t *testing.T) {
	e := start(t)
	urls := bareRepos(t, e.root, 2)
	w := e.newWorker(t)
	defer w.Stop()
	in := campaignOf("recorded", urls, "0")
	run, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: "campaign/recorded", TaskQueue: workflow.TaskQueue,
		Memo: map[string]any{
			statetemporal.MemoID: "recorded", statetemporal.MemoKind: "Campaign", statetemporal.MemoFile: "campaigns/recorded.yaml",
			statetemporal.MemoDigest: "sha256:abc", statetemporal.MemoGeneration: int64(3),
			statetemporal.MemoSpec: json.RawMessage(`{"id":"recorded","suspend":false,"sync_policy":{"prune":true,"update":"in_place"}}`),
		},
	}, workflow.Campaign, in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	r := &statetemporal.Reader{Client: e.c, Namespace: devserver.Namespace}
	all, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("want the one campaign, got %+v", all)
	}
	c := all[0]
	if c.ID != "recorded" || c.Kind != state.KindCampaign || c.SpecDigest != "sha256:abc" || c.Generation != 3 ||
		c.Phase != state.PhaseCompleted || !c.Prune || c.File != "campaigns/recorded.yaml" || c.WorkflowID != "campaign/recorded" {
		t.Errorf("recorded campaign: %+v", c)
	}
	if len(c.Repos) != 2 || c.Repos[0].Status != state.RepoCompleted || !strings.HasSuffix(c.Repos[0].PullRequestURL, "#auto/bump/recorded") {
		t.Errorf("repos: %+v", c.Repos)
	}
	got, err := r.Get(ctx, "recorded")
	if err != nil || got.SpecDigest != c.SpecDigest || string(got.Spec) != string(c.Spec) {
		t.Errorf("Get: %+v %v", got, err)
	}
	if _, err := r.Get(ctx, "missing"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get(missing): %v", err)
	}
}

// A campaign of more units than a page holds runs them in pages on the
// server: while it runs, the reader shows the units of the pages that
// started and counts every repository; once it ends, every unit as its
// page ended, and the run list shows the campaign, not its pages.
func TestCampaignInPagesOnServer(t *testing.T) {
	e := start(t)
	urls := bareRepos(t, e.root, 5)
	w := e.newWorker(t)
	defer w.Stop()
	in := campaignOf("paged", urls, "1")
	in.PageSize, in.MaxParallel = 2, 1
	run := runCampaign(t, e, in)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := &statetemporal.Reader{Client: e.c, Namespace: devserver.Namespace, QueryCache: -1}
	var mid *status.CampaignState
	for mid == nil {
		st, err := r.Status(ctx, "campaign/paged")
		if err != nil {
			t.Fatal(err)
		}
		if st.Closed {
			t.Fatal("the campaign ended before its second page was seen at work")
		}
		if c := st.Campaign; len(c.Pages) == 3 && c.Pages[0].Done && c.Pages[1].WorkflowID != "" && !c.Pages[1].Done {
			mid = c
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if mid.Summary.Total != 5 || mid.Summary.Completed < 2 || len(mid.Units) < 3 || len(mid.Units) > 4 {
		t.Errorf("while the second page works: %+v, %d units; want 5 in all, the first page's 2 completed, the first two pages' units", mid.Summary, len(mid.Units))
	}
	var final status.CampaignState
	if err := run.Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	if len(final.Units) != 0 || len(final.Pages) != 3 {
		t.Errorf("the campaign's result: %d units, %d pages; want none and 3", len(final.Units), len(final.Pages))
	}
	checkBumped(t, urls, "auto/bump/paged")
	st, err := r.Status(ctx, "campaign/paged")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, u := range st.Campaign.Units {
		keys = append(keys, u.Key+"="+string(u.Phase))
	}
	if got := strings.Join(keys, " "); got != "svc-0=completed svc-1=completed svc-2=completed svc-3=completed svc-4=completed" || st.Campaign.Summary.PRsCreated != 5 {
		t.Errorf("after the end: %s, %+v", got, st.Campaign.Summary)
	}
	runs, err := r.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != "campaign/paged" {
		t.Errorf("runs listed: %+v; want the campaign alone", runs)
	}
	if dir := *recordPagesHistory; dir != "" {
		writeHistory(t, e.c, run.GetID(), run.GetRunID(), filepath.Join(dir, "campaign-pages.history.json"))
		writeHistory(t, e.c, final.Pages[1].WorkflowID, "", filepath.Join(dir, "campaign-page.history.json"))
	}
}

// A paged campaign that ended with a failed repository starts again as
// `fleetlift retry --failed-only` starts it (its units in page order, its
// last run's pages as Previous): each new page reads on the server what
// its units did in the page before it, and only the failed repository
// runs again.
func TestCampaignInPagesStartsAgainOnServer(t *testing.T) {
	e := start(t)
	urls := bareRepos(t, e.root, 5)
	// svc-3's repository is not there yet: its unit fails at the clone.
	missing := strings.TrimPrefix(urls[3], "file://")
	moved := missing + ".later"
	if err := os.Rename(missing, moved); err != nil {
		t.Fatal(err)
	}
	w := e.newWorker(t)
	defer w.Stop()
	in := campaignOf("again", urls, "0")
	in.PageSize = 2
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var first status.CampaignState
	if err := runCampaign(t, e, in).Get(ctx, &first); err != nil {
		t.Fatal(err)
	}
	if first.Summary.Failed != 1 || first.Summary.Completed != 4 || len(first.Pages) != 3 {
		t.Fatalf("first run: %+v, %d pages; want 1 failed, 4 completed, 3 pages", first.Summary, len(first.Pages))
	}
	if err := os.Rename(moved, missing); err != nil {
		t.Fatal(err)
	}
	heads := map[string]string{}
	for i, u := range urls {
		if i != 3 {
			heads[u] = gitRun(t, strings.TrimPrefix(u, "file://"), "rev-parse", "auto/bump/again")
		}
	}

	again := campaignOf("again", urls, "0")
	again.PageSize, again.Previous = 2, first.Pages
	run, err := e.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "campaign/again", TaskQueue: workflow.TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflow.Campaign, again)
	if err != nil {
		t.Fatal(err)
	}
	var final status.CampaignState
	if err := run.Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	r := &statetemporal.Reader{Client: e.c, Namespace: devserver.Namespace, QueryCache: -1}
	st, err := r.Status(ctx, "campaign/again")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range st.Campaign.Units {
		got = append(got, fmt.Sprintf("%s=%s/%d", u.Key, u.Phase, u.Attempts))
	}
	if s := strings.Join(got, " "); s != "svc-0=completed/1 svc-1=completed/1 svc-2=completed/1 svc-3=completed/2 svc-4=completed/1" {
		t.Errorf("after the second run: %s; want every unit completed, svc-3 in its second attempt", s)
	}
	if s := st.Campaign.Summary; s.Completed != 5 || s.Failed != 0 || s.PRsCreated != 5 {
		t.Errorf("after the second run: %+v", s)
	}
	checkBumped(t, urls, "auto/bump/again")
	// The repositories that passed were not pushed again.
	for u, head := range heads {
		if now := gitRun(t, strings.TrimPrefix(u, "file://"), "rev-parse", "auto/bump/again"); now != head {
			t.Errorf("%s: pushed again (%s, was %s)", u, now, head)
		}
	}
}

// A campaign of one page that takes in place a spec of more units than
// a page holds goes on in pages on the server: the units that ran stay
// as they ran, the new ones run once each, and what it returns is its
// pages.
func TestCampaignGrownPastAPageOnServer(t *testing.T) {
	e := start(t)
	urls := bareRepos(t, e.root, 5)
	w := e.newWorker(t)
	defer w.Stop()
	in := campaignOf("grown", urls[:2], "1")
	in.PageSize, in.MaxParallel = 2, 1
	run := runCampaign(t, e, in)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := &statetemporal.Reader{Client: e.c, Namespace: devserver.Namespace, QueryCache: -1}
	for {
		st, err := r.Status(ctx, "campaign/grown")
		if err != nil {
			t.Fatal(err)
		}
		if st.Closed {
			t.Fatal("the pilot ended before it took the spec of five")
		}
		if st.Campaign.Summary.Completed >= 1 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// As UpdateInPlace sends it: the first page's units with the update,
	// the others in pieces.
	next := campaignOf("grown", urls, "1")
	next.PageSize, next.MaxParallel, next.Generation = 2, 1, 2
	head, pieces := workflow.Split(next)
	if err := e.c.SignalWorkflow(ctx, run.GetID(), "", workflow.SignalUpdate, workflow.UpdateSignal{Input: head}); err != nil {
		t.Fatal(err)
	}
	for _, pc := range pieces {
		if err := e.c.SignalWorkflow(ctx, run.GetID(), "", workflow.SignalUnits, pc); err != nil {
			t.Fatal(err)
		}
	}
	var final status.CampaignState
	if err := run.Get(ctx, &final); err != nil {
		t.Fatal(err)
	}
	if len(final.Units) != 0 || len(final.Pages) != 3 || final.Summary.Total != 5 || final.Summary.Completed != 5 {
		t.Fatalf("the grown campaign's result: %d units, %d pages, %+v; want none, 3, 5 completed", len(final.Units), len(final.Pages), final.Summary)
	}
	st, err := r.Status(ctx, "campaign/grown")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range st.Campaign.Units {
		got = append(got, fmt.Sprintf("%s=%s/%d", u.Key, u.Phase, u.Attempts))
	}
	if s := strings.Join(got, " "); s != "svc-0=completed/1 svc-1=completed/1 svc-2=completed/1 svc-3=completed/1 svc-4=completed/1" {
		t.Errorf("after the grown run: %s", s)
	}
	checkBumped(t, urls, "auto/bump/grown")
}
