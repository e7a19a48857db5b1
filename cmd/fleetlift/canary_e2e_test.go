package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
)

// TestCanaryTokenGoesNowhere runs the whole loop against a real Gitea with
// the forge token, a value found nowhere else, in the worker's environment
// and the operator's forge configuration; and a second canary in the
// worker's environment that fleetlift has no use for. The work in the
// sandbox dumps every environment it can read. Neither canary appears in
// any log line or error, any file under the state directory at any moment
// (sandbox files, protocol files, the embedded server's database), any pull
// request's body, comments or files, any workflow history read back through
// the Temporal client, or the status mirror.
func TestCanaryTokenGoesNowhere(t *testing.T) {
	ctx := context.Background()
	g := giteatest.Start(t)
	bot := g.Admin()
	canary := bot.Token
	unused := "fleetlift-unused-canary-" + fmt.Sprint(time.Now().UnixNano())
	alice := g.CreateUser(t, "alice")

	target := g.CreateRepo(t, bot.Name, "svc", false)
	work := t.TempDir()
	g.Git(t, bot, work, "init", "-q", "-b", "main")
	writeFile(t, work, "go.mod", "module example.com/svc\n\ngo 1.21\n")
	g.Git(t, bot, work, "add", "go.mod")
	g.Git(t, bot, work, "-c", "user.name=bot", "-c", "user.email=bot@example.com", "commit", "-q", "-m", "init")
	g.Git(t, bot, work, "push", "-q", target, "main")

	dump := `env > ENV.txt; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f"; echo; done > PROC.txt 2>/dev/null; sed -i 's/^go 1.21$/go 1.26/' go.mod`
	campaigns := g.CreateRepo(t, bot.Name, "campaigns", false)
	cw := t.TempDir()
	g.Git(t, bot, cw, "init", "-q", "-b", "main")
	writeFile(t, cw, "fleetlift.yaml", `version: 1
kind: Config
watch: {branch: main, path: campaigns, require_reviewed_merge: false}
approvers:
  - path: "campaigns/**"
    users: [alice]
forge:
  type: gitea
`)
	writeFile(t, cw, "campaigns/canary.yaml", fmt.Sprintf(`version: 1
kind: Campaign
id: canary
title: Dump what the work can see
template:
  execution:
    deterministic:
      image: alpine
      command: [sh, -c, %q]
      verifiers:
        - {name: env, command: [sh, -c, "env > VERIFY_ENV.txt; echo verified"]}
  require_approval: true
  pull_request:
    branch_prefix: fleetlift/canary
    title: Canary
repositories:
  - url: %s
    setup: ["env > SETUP_ENV.txt"]
`, dump, target))
	g.Git(t, bot, cw, "add", ".")
	g.Git(t, bot, cw, "-c", "user.name=bot", "-c", "user.email=bot@example.com", "commit", "-q", "-m", "config and campaign")
	g.Git(t, bot, cw, "push", "-q", campaigns, "main")

	t.Setenv("FLEETLIFT_FORGE_TYPE", "gitea")
	t.Setenv("FLEETLIFT_FORGE_URL", g.URL())
	t.Setenv("FLEETLIFT_FORGE_TOKEN", canary)
	t.Setenv("FLEETLIFT_GIT_TOKEN", canary)
	t.Setenv("FLEETLIFT_TEST_UNUSED_SECRET", unused)
	addr, stateDir := freeAddr(t), filepath.Join(t.TempDir(), "state")
	srv := startServer(t, addr, stateDir)

	// Every file under the state directory, read over and over while the
	// loop runs: the sandboxes and their files come and go.
	var mu sync.Mutex
	leaks := map[string]bool{}
	scanDone, stopScan := make(chan struct{}), make(chan struct{})
	scan := func() {
		_ = filepath.WalkDir(stateDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, c := range []string{canary, unused} {
				if bytes.Contains(data, []byte(c)) {
					mu.Lock()
					leaks[p] = true
					mu.Unlock()
				}
			}
			return nil
		})
	}
	go func() {
		defer close(scanDone)
		for {
			scan()
			select {
			case <-stopScan:
				scan()
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	up := startUp(t, "--repo", campaigns, "--temporal-address", addr, "--state-dir", stateDir, "--interval", "1s")
	c, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader := &statetemporal.Reader{Client: c, Namespace: devserver.Namespace}

	// The result awaits approval in a pull request; alice approves it.
	var approval giteaPR
	for deadline := time.Now().Add(3 * time.Minute); approval.Number == 0; time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no approval pull request\n%s", up.out.String())
		}
		var prs []giteaPR
		g.Do(t, bot.Token, "GET", "repos/"+bot.Name+"/campaigns/pulls?state=open", nil, &prs)
		for _, p := range prs {
			if strings.HasPrefix(p.Head.Ref, "fleetlift/approval/") {
				approval = p
			}
		}
	}
	g.Do(t, alice.Token, "POST", fmt.Sprintf("repos/%s/campaigns/pulls/%d/reviews", bot.Name, approval.Number),
		map[string]string{"event": "APPROVED", "body": "", "commit_id": approval.Head.Sha}, nil)
	var rec state.Campaign
	for deadline := time.Now().Add(3 * time.Minute); !rec.Phase.Done(); time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("campaign %s, want done\n%s", rec.Phase, up.out.String())
		}
		rec, _ = reader.Get(ctx, "canary")
	}
	if rec.Phase != state.PhaseCompleted {
		t.Fatalf("campaign %s, want completed\n%s", rec.Phase, up.out.String())
	}
	// Let the status mirror catch up, then stop everything.
	time.Sleep(3 * time.Second)
	up.stop(t)
	close(stopScan)
	<-scanDone

	found := func(where, text string) {
		t.Helper()
		for name, c := range map[string]string{"the forge token": canary, "an unused secret": unused} {
			if strings.Contains(text, c) {
				t.Errorf("%s holds %s", where, name)
			}
		}
	}
	mu.Lock()
	for p := range leaks {
		t.Errorf("%s held a canary", p)
	}
	mu.Unlock()
	found("fleetlift up's output", up.out.String())

	// The work ran and dumped what it could see: none of it is a canary.
	var prs []giteaPR
	g.Do(t, bot.Token, "GET", "repos/"+bot.Name+"/svc/pulls?state=all", nil, &prs)
	if len(prs) != 1 {
		t.Fatalf("pull requests on the target: %+v", prs)
	}
	for _, f := range []string{"ENV.txt", "PROC.txt", "SETUP_ENV.txt", "VERIFY_ENV.txt"} {
		var raw struct {
			Content string `json:"content"`
		}
		g.Do(t, bot.Token, "GET", "repos/"+bot.Name+"/svc/contents/"+f+"?ref="+url.QueryEscape(prs[0].Head.Ref), nil, &raw)
		content := decodeB64(t, raw.Content)
		if !strings.Contains(content, "PATH=") {
			t.Errorf("%s on the pull request's branch is not an environment dump:\n%s", f, content)
		}
		found(f+" on the target's pull request", content)
	}

	// Pull request bodies and comments, on both repositories.
	for _, repo := range []string{"svc", "campaigns"} {
		var all []giteaPR
		g.Do(t, bot.Token, "GET", "repos/"+bot.Name+"/"+repo+"/pulls?state=all", nil, &all)
		for _, p := range all {
			found(fmt.Sprintf("%s pull request #%d's title and body", repo, p.Number), p.Title+p.Body)
			var comments []struct{ Body string }
			g.Do(t, bot.Token, "GET", fmt.Sprintf("repos/%s/%s/issues/%d/comments", bot.Name, repo, p.Number), nil, &comments)
			for _, cm := range comments {
				found(fmt.Sprintf("a comment on %s pull request #%d", repo, p.Number), cm.Body)
			}
		}
	}

	// Every workflow's history, as the Temporal client reads it.
	list, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: devserver.Namespace, PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Executions) < 2 {
		t.Fatalf("%d workflows recorded, want the campaign and its task at least", len(list.Executions))
	}
	for _, e := range list.Executions {
		it := c.GetWorkflowHistory(ctx, e.Execution.WorkflowId, e.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			data, _ := proto.Marshal(ev)
			found("the history of "+e.Execution.WorkflowId, string(data))
		}
	}

	// The status mirror, and everything else pushed to the campaigns
	// repository.
	clone := t.TempDir()
	g.Git(t, bot, clone, "clone", "-q", "--mirror", campaigns, ".")
	history := g.Git(t, bot, clone, "log", "-p", "--all")
	if !strings.Contains(history, "fleetlift/status") && !strings.Contains(g.Git(t, bot, clone, "branch", "--list"), "fleetlift/status") {
		t.Errorf("no status mirror was written to the campaigns repository")
	}
	found("the campaigns repository's history", history)
}
