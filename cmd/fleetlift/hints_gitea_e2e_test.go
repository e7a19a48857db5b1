package main

import (
	"context"
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
// reviewer approves and the checks pass, although the followers read
// them only once an hour: the review and the commit status reach the
// follower as hints, through the reconciler's webhook receiver.
func TestWebhooksHintAtPullRequests(t *testing.T) {
	ctx := context.Background()
	g := giteatest.Start(t)
	bot := g.Admin()
	alice := g.CreateUser(t, "alice")
	const secret = "target-hooks-secret"
	hooks := freeAddr(t)
	urls := map[string]string{}
	for _, name := range []string{"api", "web"} {
		urls[name] = g.CreateRepo(t, bot.Name, name, true)
		work := t.TempDir()
		g.Git(t, bot, work, "clone", "-q", urls[name], ".")
		writeFile(t, work, "main.go", legacyGo)
		g.Git(t, bot, work, "add", "-A")
		g.Git(t, bot, work, "-c", "user.name=bot", "-c", "user.email=bot@example.com", "commit", "-q", "-m", "code")
		g.Git(t, bot, work, "push", "-q", "origin", "HEAD:main")
		g.AddCollaborator(t, bot.Name, name, alice.Name, "write")
		g.Do(t, bot.Token, http.MethodPost, "repos/"+bot.Name+"/"+name+"/hooks", map[string]any{
			"type": "gitea", "active": true,
			"events": []string{"push", "pull_request", "pull_request_review", "status"},
			"config": map[string]string{"url": "http://" + hooks + "/webhook", "content_type": "json", "secret": secret},
		}, nil)
	}
	def := fmt.Sprintf(`version: 1
kind: Campaign
id: hinted
title: Move to slog
template:
  execution:
    deterministic:
      image: golang
      command: [sh, -c, "sed -i s/log.Printf/slog.Info/ *.go"]
  pull_request: {branch_prefix: auto/hinted, title: Move to slog, merge: {}}
repositories:
  - url: %s
  - url: %s
`, urls["api"], urls["web"])
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
		var got map[string]state.Repo
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			r, err := reader.Get(ctx, "hinted")
			got = map[string]state.Repo{}
			for _, repo := range r.Repos {
				got[repo.Name] = repo
			}
			if err == nil && ok(got) {
				return got
			}
		}
		t.Fatalf("%s: %+v\n%s", what, got, up.out.String())
		return nil
	}
	opened := func(r map[string]state.Repo) bool {
		return r["api"].PullRequestURL != "" && r["web"].PullRequestURL != ""
	}
	merged := func(repo state.Repo) bool { return repo.PullRequestState == state.PullRequestMerged }
	wait("both pull requests opened", opened)

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
	if out := up.out.String(); strings.Contains(out, secret) || strings.Contains(out, bot.Token) {
		t.Errorf("the output shows the webhook secret or the token:\n%s", out)
	}
}
