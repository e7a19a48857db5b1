package gitea_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/gitea"
	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
)

// TestListRepositoriesOnGitea lists an organisation's and a user's
// repositories on a real Gitea: topics, archived and fork as Gitea
// reports them, a private repository only to a token that may see it,
// and no code search.
func TestListRepositoriesOnGitea(t *testing.T) {
	s := giteatest.Start(t)
	admin := s.Admin()
	alice, bob := s.CreateUser(t, "alice"), s.CreateUser(t, "bob")
	s.CreateOrg(t, "platform")
	for _, name := range []string{"svc-a", "svc-old", "lib"} {
		s.CreateRepo(t, "platform", name, true)
	}
	s.Do(t, admin.Token, http.MethodPut, "repos/platform/svc-a/topics", map[string]any{"topics": []string{"go", "backend"}}, nil)
	s.Do(t, admin.Token, http.MethodPut, "repos/platform/svc-old/topics", map[string]any{"topics": []string{"go"}}, nil)
	s.Do(t, admin.Token, http.MethodPatch, "repos/platform/svc-old", map[string]any{"archived": true}, nil)
	s.Do(t, admin.Token, http.MethodPost, "orgs/platform/repos", map[string]any{"name": "secret", "private": true, "default_branch": "main"}, nil)
	s.CreateRepo(t, "alice", "dotfiles", true)
	s.Do(t, alice.Token, http.MethodPost, "repos/platform/svc-a/forks", map[string]any{}, nil)

	ctx := context.Background()
	list := func(token, owner string) ([]forge.Repository, bool) {
		t.Helper()
		f, err := gitea.New(gitea.Options{URL: s.URL(), Token: token})
		if err != nil {
			t.Fatal(err)
		}
		repos, org, err := f.ListRepositories(ctx, owner)
		if err != nil {
			t.Fatalf("list %s: %v", owner, err)
		}
		return repos, org
	}
	byName := func(repos []forge.Repository) map[string]forge.Repository {
		m := map[string]forge.Repository{}
		for _, r := range repos {
			m[r.Name] = r
		}
		return m
	}

	repos, org := list(admin.Token, "platform")
	got := byName(repos)
	if !org || len(got) != 4 {
		t.Fatalf("platform as its owner sees it (organisation %v): %+v", org, repos)
	}
	if a := got["svc-a"]; !slices.Equal(a.Topics, []string{"backend", "go"}) && !slices.Equal(a.Topics, []string{"go", "backend"}) ||
		a.Archived || a.Fork || a.Owner != "platform" || a.DefaultBranch != "main" || a.CloneURL != s.CloneURL("platform", "svc-a") {
		t.Errorf("svc-a: %+v", a)
	}
	if !got["svc-old"].Archived {
		t.Errorf("svc-old is not archived: %+v", got["svc-old"])
	}
	// bob is not in the organisation: its private repository is not his
	// to select.
	if repos, _ := list(bob.Token, "platform"); len(repos) != 3 || byName(repos)["secret"].Name != "" {
		t.Errorf("platform as bob sees it: %+v", repos)
	}
	// A user's repositories, a fork among them.
	repos, org = list(bob.Token, "alice")
	got = byName(repos)
	if org || len(got) != 2 || !got["svc-a"].Fork || got["dotfiles"].Fork {
		t.Errorf("alice's repositories (organisation %v): %+v", org, repos)
	}
	f, err := gitea.New(gitea.Options{URL: s.URL(), Token: bob.Token})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.ListRepositories(ctx, "nobody"); err == nil || !strings.Contains(err.Error(), `no organisation or user "nobody"`) {
		t.Errorf("an owner that does not exist: %v", err)
	}
	if _, err := f.SearchCode(ctx, "platform", true, "x"); !errors.Is(err, forge.ErrNoCodeSearch) {
		t.Errorf("code search on Gitea: %v", err)
	}
}
