package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
	"github.com/fleetlift/fleetlift/internal/state"
)

// TestDoneWhenOnGitea is done_when under `fleetlift up` on a real
// Gitea: a campaign moves two repositories off log.Printf, its pull
// requests merge as declared, and its done_when finds one done and the
// other merged but not done (log.Printf in a file the change does not
// reach). A person brings log.Printf back to the done one: its push
// reaches `up` as a webhook, done_when runs there again within a minute
// although it is due only hourly, the repository regresses, the
// reconciler reopens it on its own, and a second pull request is
// opened, merged and found done; the other is left as it is.
func TestDoneWhenOnGitea(t *testing.T) {
	g := giteatest.Start(t)
	bot := g.Admin()
	old := legacyGo
	push := func(url string, files map[string]string) {
		t.Helper()
		work := t.TempDir()
		g.Git(t, bot, work, "clone", "-q", url, ".")
		for name, body := range files {
			writeFile(t, work, name, body)
		}
		g.Git(t, bot, work, "add", "-A")
		g.Git(t, bot, work, "-c", "user.name=bot", "-c", "user.email=bot@example.com", "commit", "-q", "-m", "code")
		g.Git(t, bot, work, "push", "-q", "origin", "HEAD:main")
	}
	const secret = "target-hooks-secret"
	hooks := freeAddr(t)
	urls := map[string]string{}
	for _, name := range []string{"api", "web"} {
		urls[name] = g.CreateRepo(t, bot.Name, name, true)
		push(urls[name], map[string]string{"main.go": old})
		g.Do(t, bot.Token, http.MethodPost, "repos/"+bot.Name+"/"+name+"/hooks", map[string]any{
			"type": "gitea", "active": true, "events": []string{"push"},
			"config": map[string]string{"url": "http://" + hooks + "/webhook", "content_type": "json", "secret": secret},
		}, nil)
	}
	push(urls["web"], map[string]string{"internal/legacy.go": old})

	def := slogDefinition("slog", "merge: {require_review: false}", `{command: [sh, -c, "! grep -rq log.Printf ."], every: 1h}`, []string{urls["api"], urls["web"]})
	campaigns, _ := giteaCampaigns(t, g, "", map[string]string{"campaigns/slog.yaml": def})
	t.Setenv("FLEETLIFT_FORGE_TYPE", "gitea")
	t.Setenv("FLEETLIFT_FORGE_URL", g.URL())
	t.Setenv("FLEETLIFT_FORGE_TOKEN", bot.Token)
	t.Setenv("FLEETLIFT_GIT_TOKEN", bot.Token)
	t.Setenv("FLEETLIFT_WEBHOOK_SECRET", secret)
	stateDir := t.TempDir()
	addr, _, reader := serverForTest(t, stateDir)
	up := startUp(t, "--repo", campaigns, "--temporal-address", addr, "--state-dir", stateDir, "--interval", "1s",
		"--pull-requests-every", "1s", "--webhook-listen", hooks)
	wait := func(what string, ok func(map[string]state.Repo) bool) map[string]state.Repo {
		t.Helper()
		return waitRepos(t, reader, "slog", up, what, ok)
	}
	done := func(repo state.Repo, want string) bool {
		return repo.PullRequestState == state.PullRequestMerged && repo.PullRequest != nil && repo.PullRequest.Done == want
	}
	first := wait("api done, web merged but not done", func(r map[string]state.Repo) bool {
		return done(r["api"], "done") && done(r["web"], "not_done")
	})["api"].PullRequestURL

	// log.Printf comes back to api's main: the push's webhook has
	// done_when run again (a minute after its last run at most), api
	// regresses, and the reconciler reopens it by itself.
	push(urls["api"], map[string]string{"main.go": old})
	// Two runs of done_when, each at least a minute after the one
	// before on the branch (donePushSpacing), a run of the task and a
	// merge: the whole test took 155 and 184 s on a quiet machine, and
	// this wait alone passed three minutes under the full suite.
	waitReposWithin(t, 5*time.Minute, reader, "slog", up, "api reopened, its new pull request merged and done", func(r map[string]state.Repo) bool {
		return done(r["api"], "done") && r["api"].PullRequestURL != first && done(r["web"], "not_done")
	})
	var prs []giteaPR
	g.Do(t, bot.Token, http.MethodGet, "repos/"+bot.Name+"/api/pulls?state=all", nil, &prs)
	if len(prs) != 2 || !prs[0].Merged || !prs[1].Merged {
		t.Errorf("api's pull requests: %+v, want two, merged; fleetlift up said:\n%s", prs, up.out.String())
	}
	g.Do(t, bot.Token, http.MethodGet, "repos/"+bot.Name+"/web/pulls?state=all", nil, &prs)
	if len(prs) != 1 {
		t.Errorf("web's pull requests: %+v, want the one (it was never done, so never reopened)", prs)
	}
	if !strings.Contains(up.out.String(), "reopen") {
		t.Errorf("the reconciler never said it reopened slog:\n%s", up.out.String())
	}
}
