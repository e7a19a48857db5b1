package github_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/github"
)

func TestListRepositoriesAndSearchCodeOnGitHub(t *testing.T) {
	srv, asked := replay(t, "testdata/repos.json")
	f, err := github.New(github.Options{BaseURL: srv.URL + "/api/v3/", WebURL: "https://ghe.example/", Token: token,
		Budget: github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	repos, org, err := f.ListRepositories(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	want := []forge.Repository{
		{Owner: "acme", Name: "svc-a", CloneURL: "https://ghe.example/acme/svc-a.git", DefaultBranch: "main", Language: "Go", Topics: []string{"go", "backend"}},
		{Owner: "acme", Name: "svc-b", CloneURL: "https://ghe.example/acme/svc-b.git", DefaultBranch: "trunk", Language: "Go", Topics: []string{"go"}, Archived: true},
		{Owner: "acme", Name: "web", CloneURL: "https://ghe.example/acme/web.git", DefaultBranch: "main", Language: "TypeScript", Topics: []string{}, Fork: true},
	}
	if !org || !reflect.DeepEqual(repos, want) {
		t.Errorf("acme (organisation %v):\n got %+v\nwant %+v", org, repos, want)
	}
	// A user: the organisation's list answers 404, the user's is read.
	repos, org, err = f.ListRepositories(ctx, "octo")
	if err != nil || org || len(repos) != 1 || repos[0].Name != "dotfiles" {
		t.Errorf("octo: %+v, organisation %v, %v", repos, org, err)
	}
	if _, _, err := f.ListRepositories(ctx, "ghost"); err == nil || !strings.Contains(err.Error(), `no organisation or user "ghost"`) {
		t.Errorf("ghost: %v", err)
	}
	// A listing that would send a clone to another host is refused.
	if _, _, err := f.ListRepositories(ctx, "evil"); err == nil || !strings.Contains(err.Error(), "https://elsewhere.example/evil/x.git") {
		t.Errorf("evil: %v", err)
	}
	// Names that are not names never reach a path.
	if _, _, err := f.ListRepositories(ctx, "../admin"); err == nil {
		t.Error("an owner of ../admin was asked about")
	}

	found, err := f.SearchCode(ctx, "acme", true, "slog.Info")
	if err != nil || !reflect.DeepEqual(found, []string{"svc-a", "web"}) {
		t.Errorf("code search: %v, %v", found, err)
	}
	// Searches whose answers leave repositories out are errors, not
	// short selections.
	if _, err := f.SearchCode(ctx, "octo", false, "slow"); err == nil || !strings.Contains(err.Error(), "incomplete results") {
		t.Errorf("incomplete search: %v", err)
	}
	if _, err := f.SearchCode(ctx, "acme", true, "fmt"); err == nil || !strings.Contains(err.Error(), "4711 matches, more than the 1000") {
		t.Errorf("search past 1000: %v", err)
	}
	for k, n := range asked() {
		if n != 1 {
			t.Errorf("%s asked %d times", k, n)
		}
	}
}
