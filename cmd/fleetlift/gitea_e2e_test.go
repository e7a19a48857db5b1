package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
)

// giteaGoModule creates the repository name of owner on g, a Go module
// on go 1.21 with one commit on branch, and returns its clone URL.
func giteaGoModule(t *testing.T, g *giteatest.Server, owner giteatest.User, name, branch string) string {
	t.Helper()
	url := g.CreateRepo(t, owner.Name, name, false)
	work := t.TempDir()
	g.Git(t, owner, work, "init", "-q", "-b", branch)
	writeFile(t, work, "go.mod", "module example.com/"+name+"\n\ngo 1.21\n")
	g.Git(t, owner, work, "add", "go.mod")
	g.Git(t, owner, work, "-c", "user.name=bot", "-c", "user.email=bot@example.com", "commit", "-q", "-m", "init")
	g.Git(t, owner, work, "push", "-q", url, branch)
	return url
}

type giteaPR struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Merged bool   `json:"merged"`
	Head   struct {
		Ref string `json:"ref"`
		Sha string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

// TestGiteaEndToEnd is the loop against a real Gitea: a pull request on
// the campaigns repository gets the plan as a comment; after the merge the
// campaign starts; an approval pull request appears; a review by someone
// who may not approve does nothing; CHANGES_REQUESTED by an approver steers
// the agent with its text; APPROVED by the approver on the new head opens
// the pull request on the target, with its labels.
func TestGiteaEndToEnd(t *testing.T) {
	ctx := context.Background()
	g := giteatest.Start(t)
	bot := g.Admin()
	alice, mallory := g.CreateUser(t, "alice"), g.CreateUser(t, "mallory")
	casey := g.CreateUser(t, "casey")

	// The target repository: a Go module on go 1.21.
	target := giteaGoModule(t, g, bot, "svc", "main")

	// The campaigns repository: config on main; casey may push branches.
	campaigns := g.CreateRepo(t, bot.Name, "campaigns", false)
	g.AddCollaborator(t, bot.Name, "campaigns", casey.Name, "write")
	cw := t.TempDir()
	g.Git(t, bot, cw, "init", "-q", "-b", "main")
	writeFile(t, cw, "fleetlift.yaml", fmt.Sprintf(`version: 1
kind: Config
watch: {branch: main, path: campaigns}
approvers:
  - path: "campaigns/**"
    users: [alice]
forge:
  type: gitea
  url: %s
`, g.URL()))
	writeFile(t, cw, "campaigns/.gitkeep", "")
	g.Git(t, bot, cw, "add", ".")
	g.Git(t, bot, cw, "-c", "user.name=bot", "-c", "user.email=bot@example.com", "commit", "-q", "-m", "config")
	g.Git(t, bot, cw, "push", "-q", campaigns, "main")

	// fleetlift up against the Gitea campaigns repository, the forge the
	// operator allows.
	t.Setenv("FLEETLIFT_FORGE_TYPE", "gitea")
	t.Setenv("FLEETLIFT_FORGE_URL", g.URL())
	t.Setenv("FLEETLIFT_FORGE_TOKEN", bot.Token)
	t.Setenv("FLEETLIFT_GIT_TOKEN", bot.Token)
	addr, stateDir := freeAddr(t), filepath.Join(t.TempDir(), "state")
	srv := startServer(t, addr, stateDir)
	agentCLI, err := filepath.Abs("../../internal/agent/testdata/stand-in-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	up := startUp(t, "--repo", campaigns, "--temporal-address", addr, "--state-dir", stateDir, "--interval", "1s",
		"--agent-cli", fmt.Sprintf(`[%q]`, agentCLI))

	// casey proposes a campaign in a pull request; its plan is commented.
	g.Git(t, casey, cw, "checkout", "-q", "-b", "add-campaign")
	writeFile(t, cw, "campaigns/go-version.yaml", fmt.Sprintf(`version: 1
kind: Campaign
id: go-version
title: Raise the go directive
template:
  execution:
    agentic:
      prompt: "Raise the go directive to 1.26."
  require_approval: true
  pull_request:
    branch_prefix: fleetlift/go-version
    title: Raise the go directive
    labels: [automated, go]
repositories:
  - url: %s
`, target))
	g.Git(t, casey, cw, "add", ".")
	g.Git(t, casey, cw, "-c", "user.name=casey", "-c", "user.email=casey@example.com", "commit", "-q", "-m", "Add go-version")
	g.Git(t, casey, cw, "push", "-q", campaigns, "add-campaign")
	var pr giteaPR
	g.Do(t, casey.Token, "POST", "repos/"+bot.Name+"/campaigns/pulls", map[string]string{"head": "add-campaign", "base": "main", "title": "Add go-version"}, &pr)
	out, code := runCLI(t, "plan", "--repo", campaigns, "--ref", "add-campaign", "--base", "main", "-o", "markdown",
		"--state", "none", "--comment-on", fmt.Sprint(pr.Number))
	if code != 0 {
		t.Fatalf("plan --comment-on exited %d:\n%s", code, out)
	}
	var comments []struct{ Body string }
	g.Do(t, bot.Token, "GET", fmt.Sprintf("repos/%s/campaigns/issues/%d/comments", bot.Name, pr.Number), nil, &comments)
	if len(comments) != 1 || !strings.Contains(comments[0].Body, "go-version") || !strings.Contains(comments[0].Body, "1 to create") {
		t.Fatalf("plan comment on the pull request: %+v", comments)
	}
	// And the fleetlift/plan commit status on its head: pending while it
	// planned, then success (Gitea lists them oldest first).
	var statuses []struct {
		Context     string `json:"context"`
		Status      string `json:"status"`
		Description string `json:"description"`
	}
	g.Do(t, bot.Token, "GET", fmt.Sprintf("repos/%s/campaigns/commits/%s/statuses?sort=oldest", bot.Name, pr.Head.Sha), nil, &statuses)
	if n := len(statuses); n != 2 || statuses[0].Status != "pending" || statuses[1].Context != "fleetlift/plan" ||
		statuses[1].Status != "success" || !strings.Contains(statuses[1].Description, "1 to create") {
		t.Errorf("fleetlift/plan statuses on %s: %+v", pr.Head.Sha, statuses)
	}
	// Nothing starts from a pull request's branch.
	c, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader := &statetemporal.Reader{Client: c, Namespace: devserver.Namespace}
	time.Sleep(2 * time.Second)
	if _, err := reader.Get(ctx, "go-version"); err == nil {
		t.Fatal("a campaign started from an unmerged pull request")
	}

	// With a forge, a launch needs a merge that someone other than its
	// author approved (watch.require_reviewed_merge's default): alice
	// reviews casey's pull request before it is merged.
	g.Do(t, alice.Token, "POST", fmt.Sprintf("repos/%s/campaigns/pulls/%d/reviews", bot.Name, pr.Number),
		map[string]string{"event": "APPROVED", "body": "lgtm", "commit_id": pr.Head.Sha}, nil)
	g.Do(t, bot.Token, "POST", fmt.Sprintf("repos/%s/campaigns/pulls/%d/merge", bot.Name, pr.Number), map[string]string{"Do": "merge"}, nil)

	// The campaign starts and its result awaits approval in a pull request.
	approvalPR := func(want func(giteaPR) bool) giteaPR {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			var prs []giteaPR
			g.Do(t, bot.Token, "GET", "repos/"+bot.Name+"/campaigns/pulls?state=all", nil, &prs)
			for _, p := range prs {
				if strings.HasPrefix(p.Head.Ref, "fleetlift/approval/") && want(p) {
					return p
				}
			}
			time.Sleep(300 * time.Millisecond)
		}
		t.Fatalf("no such approval pull request\n%s", up.out.String())
		return giteaPR{}
	}
	first := approvalPR(func(p giteaPR) bool { return p.State == "open" })
	if !strings.Contains(first.Body, "`svc` | `AGENT_LOG.md` | 2 | 0 |") {
		t.Errorf("the approval pull request does not show the diff summary:\n%s", first.Body)
	}
	review := func(u giteaUser, p giteaPR, event, body string) {
		g.Do(t, u.Token, "POST", fmt.Sprintf("repos/%s/campaigns/pulls/%d/reviews", bot.Name, p.Number),
			map[string]string{"event": event, "body": body, "commit_id": p.Head.Sha}, nil)
	}

	// mallory may not approve: nothing happens.
	review(mallory, first, "APPROVED", "lgtm")
	time.Sleep(3 * time.Second)
	if rec, err := reader.Get(ctx, "go-version"); err != nil || len(rec.PendingApprovals) != 1 {
		t.Fatalf("after mallory's approval: %+v, %v (want still awaiting approval)", rec, err)
	}

	// alice requests changes: the agent goes back to work with her text.
	// The new result gets an approval pull request of its own, and the
	// first result's is closed: no review of one counts for the other.
	review(alice, first, "REQUEST_CHANGES", "Also note the toolchain-please-steer change.")
	second := approvalPR(func(p giteaPR) bool { return p.State == "open" && p.Number != first.Number })
	approvalPR(func(p giteaPR) bool { return p.Number == first.Number && p.State == "closed" })

	// alice approves the new result.
	review(alice, second, "APPROVED", "")
	deadline := time.Now().Add(2 * time.Minute)
	var rec state.Campaign
	for time.Now().Before(deadline) {
		if rec, err = reader.Get(ctx, "go-version"); err == nil && rec.Phase.Done() {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if rec.Phase != state.PhaseCompleted {
		t.Fatalf("campaign %s, want completed\n%s", rec.Phase, up.out.String())
	}

	// The target has the pull request, with its labels and the agent's
	// log showing the steer reached it.
	var prs []giteaPR
	g.Do(t, bot.Token, "GET", "repos/"+bot.Name+"/svc/pulls?state=open", nil, &prs)
	if len(prs) != 1 || prs[0].Head.Ref != "fleetlift/go-version/go-version" {
		t.Fatalf("pull requests on the target: %+v", prs)
	}
	var labels []string
	for _, l := range prs[0].Labels {
		labels = append(labels, l.Name)
	}
	if strings.Join(labels, ",") != "automated,go" {
		t.Errorf("labels %v, want automated, go", labels)
	}
	var raw struct {
		Content string `json:"content"`
	}
	g.Do(t, bot.Token, "GET", "repos/"+bot.Name+"/svc/contents/AGENT_LOG.md?ref="+url.QueryEscape(prs[0].Head.Ref), nil, &raw)
	if log := decodeB64(t, raw.Content); !strings.Contains(log, "toolchain-please-steer") {
		t.Errorf("the agent never saw alice's request:\n%s", log)
	}
	// The approval pull request is closed once carried out.
	approvalPR(func(p giteaPR) bool { return p.Number == second.Number && p.State == "closed" })
}

type giteaUser = giteatest.User

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func decodeB64(t *testing.T, s string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return string(b)
}
