package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
	"github.com/fleetlift/fleetlift/internal/state"
)

// TestWebhooksHintAtPullRequests: on a real Gitea whose target
// repositories send their webhooks to `fleetlift up`, a campaign's pull
// requests are merged as declared (approved, checks green) as soon as a
// reviewer approves and the checks pass, and one whose base moved under
// it with a conflict is made again on the new base (keep_current:
// conflicted), although the followers read them only once an hour: the
// review, the commit status and the push reach the follower as hints,
// through the reconciler's webhook receiver. The status branch shows
// the states read and their burndown.
func TestWebhooksHintAtPullRequests(t *testing.T) {
	g := giteatest.Start(t)
	bot := g.Admin()
	alice := g.CreateUser(t, "alice")
	const secret = "target-hooks-secret"
	hooks := freeAddr(t)
	urls := map[string]string{}
	push := func(work string, user giteatest.User, url, ref string) {
		g.Git(t, user, work, "add", "-A")
		g.Git(t, user, work, "-c", "user.name="+user.Name, "-c", "user.email="+user.Name+"@example.com", "commit", "-q", "-m", "code")
		g.Git(t, user, work, "push", "-q", "origin", ref)
	}
	for _, name := range []string{"api", "web", "lib"} {
		urls[name] = g.CreateRepo(t, bot.Name, name, true)
		work := t.TempDir()
		g.Git(t, bot, work, "clone", "-q", urls[name], ".")
		writeFile(t, work, "main.go", legacyGo)
		push(work, bot, urls[name], "HEAD:main")
		g.AddCollaborator(t, bot.Name, name, alice.Name, "write")
		g.Do(t, bot.Token, http.MethodPost, "repos/"+bot.Name+"/"+name+"/hooks", map[string]any{
			"type": "gitea", "active": true,
			"events": []string{"push", "pull_request", "pull_request_review", "status"},
			"config": map[string]string{"url": "http://" + hooks + "/webhook", "content_type": "json", "secret": secret},
		}, nil)
	}
	def := slogDefinition("hinted", "merge: {}, keep_current: conflicted", "", []string{urls["api"], urls["web"], urls["lib"]})
	campaigns, _ := giteaCampaigns(t, g, "", map[string]string{"campaigns/hinted.yaml": def})
	t.Setenv("FLEETLIFT_FORGE_TYPE", "gitea")
	t.Setenv("FLEETLIFT_FORGE_URL", g.URL())
	t.Setenv("FLEETLIFT_FORGE_TOKEN", bot.Token)
	t.Setenv("FLEETLIFT_GIT_TOKEN", bot.Token)
	t.Setenv("FLEETLIFT_WEBHOOK_SECRET", secret)
	stateDir := t.TempDir()
	addr, _, reader := serverForTest(t, stateDir)
	up := startUp(t, "--repo", campaigns, "--temporal-address", addr, "--state-dir", stateDir, "--interval", "1s",
		"--pull-requests-every", "1h", "--webhook-listen", hooks)
	wait := func(what string, ok func(map[string]state.Repo) bool) map[string]state.Repo {
		t.Helper()
		return waitRepos(t, reader, "hinted", up, what, ok)
	}
	opened := func(r map[string]state.Repo) bool {
		return r["api"].PullRequestURL != "" && r["web"].PullRequestURL != "" && r["lib"].PullRequestURL != ""
	}
	merged := func(repo state.Repo) bool { return repo.PullRequestState == state.PullRequestMerged }
	wait("the pull requests opened", opened)

	pr := func(name string) giteaPR {
		var prs []giteaPR
		g.Do(t, bot.Token, http.MethodGet, "repos/"+bot.Name+"/"+name+"/pulls?state=all", nil, &prs)
		if len(prs) != 1 {
			t.Fatalf("%s has pull requests %+v, want one", name, prs)
		}
		return prs[0]
	}
	setStatus := func(name, state string) {
		g.Do(t, bot.Token, http.MethodPost, "repos/"+bot.Name+"/"+name+"/statuses/"+pr(name).Head.Sha,
			map[string]string{"state": state, "context": "ci", "description": "build"}, nil)
	}
	approve := func(name string) {
		g.Do(t, alice.Token, http.MethodPost, fmt.Sprintf("repos/%s/%s/pulls/%d/reviews", bot.Name, name, pr(name).Number),
			map[string]string{"event": "APPROVED", "body": "looks right"}, nil)
	}
	// alice changes lib's main where the change does: its pull request
	// conflicts, and the push is the hint that has it made again.
	libHead := pr("lib").Head.Sha
	work := t.TempDir()
	g.Git(t, alice, work, "clone", "-q", urls["lib"], ".")
	writeFile(t, work, "main.go", "package svc\n\nfunc f() { log.Printf(\"y\") }\n")
	push(work, alice, urls["lib"], "HEAD:main")
	libBase := strings.TrimSpace(g.Git(t, alice, work, "rev-parse", "HEAD"))

	// web's checks are still running when both are approved: only api
	// merges.
	setStatus("web", "pending")
	approve("api")
	approve("web")
	got := wait("api merged on its review", func(r map[string]state.Repo) bool { return merged(r["api"]) })
	if !pr("api").Merged {
		t.Errorf("api's pull request is not merged on Gitea: %+v", pr("api"))
	}
	if merged(got["web"]) || pr("web").Merged {
		t.Fatalf("web merged with its checks running: %+v", got["web"])
	}
	// Its checks pass: the status is the hint that merges it.
	setStatus("web", "success")
	wait("web merged once its checks passed", func(r map[string]state.Repo) bool { return merged(r["web"]) })
	if !pr("web").Merged {
		t.Errorf("web's pull request is not merged on Gitea: %+v", pr("web"))
	}
	// lib's change was made again on alice's main, and pushed to its
	// pull request's branch.
	wait("lib made again on its new base", func(r map[string]state.Repo) bool {
		p := r["lib"].PullRequest
		return p != nil && p.Head != libHead && p.Mergeable == "mergeable"
	})
	work = t.TempDir()
	g.Git(t, bot, work, "clone", "-q", "-b", pr("lib").Head.Ref, urls["lib"], ".")
	if parent := strings.TrimSpace(g.Git(t, bot, work, "rev-parse", "HEAD^")); parent != libBase {
		t.Errorf("lib's change is on %s, not on alice's main %s", parent, libBase)
	}
	if got := g.Git(t, bot, work, "show", "HEAD:main.go"); !strings.Contains(got, `slog.Info("y")`) {
		t.Errorf("lib's branch holds %q, want alice's line moved to slog", got)
	}
	// The status branch shows the states read, and their burndown.
	var index, page, samples string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		clone := t.TempDir()
		g.Git(t, bot, clone, "clone", "-q", "-b", "fleetlift/status", campaigns, ".")
		index = g.Git(t, bot, clone, "show", "HEAD:README.md")
		page = g.Git(t, bot, clone, "show", "HEAD:campaigns/hinted.md")
		samples = g.Git(t, bot, clone, "show", "HEAD:campaigns/hinted.burndown.json")
		var burndown []struct {
			Merged int `json:"merged"`
			Open   int `json:"open"`
		}
		if json.Unmarshal([]byte(samples), &burndown) == nil && len(burndown) > 0 &&
			burndown[len(burndown)-1].Merged == 2 && burndown[len(burndown)-1].Open == 1 &&
			strings.Contains(index, "1 open, 2 merged") && strings.Contains(page, "(hinted.burndown.svg)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status branch does not show 1 open and 2 merged:\n%s\n%s\n%s", index, page, samples)
		}
	}
	if out := up.out.String(); strings.Contains(out, secret) || strings.Contains(out, bot.Token) {
		t.Errorf("the output shows the webhook secret or the token:\n%s", out)
	}
}
