package repoquery_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/repoquery"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// lister is a forge's listing, for the pure logic of selecting and
// naming; the adapters are tested against Gitea and recorded GitHub
// answers.
type lister struct {
	repos  map[string][]forge.Repository
	code   map[string][]string
	listed map[string]int
	fail   error
}

func (l *lister) ListRepositories(_ context.Context, owner string) ([]forge.Repository, bool, error) {
	if l.listed == nil {
		l.listed = map[string]int{}
	}
	l.listed[owner]++
	if l.fail != nil {
		return nil, false, l.fail
	}
	rs, ok := l.repos[owner]
	if !ok {
		return nil, false, errors.New("no organisation or user " + owner)
	}
	return rs, true, nil
}

func (l *lister) SearchCode(_ context.Context, owner string, _ bool, query string) ([]string, error) {
	return l.code[owner+" "+query], nil
}

func repo(owner, name string, topics ...string) forge.Repository {
	return forge.Repository{Owner: owner, Name: name, CloneURL: "https://git.example/" + owner + "/" + name + ".git", Topics: topics, Language: "Go"}
}

func load(t *testing.T, body string) spec.Definition {
	t.Helper()
	res, err := (&spec.Loader{Eval: spec.InProcess(1)}).Load(context.Background(), fstest.MapFS{"c.yaml": {Data: []byte(body)}}, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 || len(res.Definitions) != 1 {
		t.Fatalf("load: %v", res.Errors)
	}
	return res.Definitions[0]
}

const campaign = `version: 1
kind: Campaign
id: bump
title: Bump
template:
  execution:
    deterministic: {image: alpine, command: ["true"]}
`

func names(d spec.Definition) []string {
	var out []string
	for _, r := range d.Campaign.Repositories {
		out = append(out, r.Name+"="+r.URL)
	}
	return out
}

func TestQueriesSelectEveryFilterTogether(t *testing.T) {
	old := repo("acme", "svc-old", "go")
	old.Archived = true
	fork := repo("acme", "svc-fork", "go")
	fork.Fork = true
	py := repo("acme", "svc-py", "go")
	py.Language = "Python"
	l := &lister{repos: map[string][]forge.Repository{
		"acme": {repo("acme", "svc-b", "go", "backend"), repo("acme", "svc-a", "Go"), repo("acme", "lib-x", "go"), old, fork, py,
			repo("acme", "svc-tmp", "go"), repo("acme", "api", "go")},
		"other": {repo("other", "api", "go")},
	}}
	d := load(t, campaign+`repositories:
  - url: https://git.example/acme/pinned.git
repositories_from:
  - owner: acme
    topics: [go]
    language: go
    names: ["svc-*", "api"]
    exclude: ["*-tmp"]
  - owner: other
    setup: ["make deps"]
`)
	if !d.Unresolved() {
		t.Fatal("a definition with queries loads resolved")
	}
	rs := &repoquery.Resolver{Forge: l, ForgeName: "gitea"}
	got, errs := rs.Definitions(context.Background(), []spec.Definition{d}, nil)
	if len(errs) > 0 {
		t.Fatal(spec.Errors(errs))
	}
	want := []string{
		"pinned=https://git.example/acme/pinned.git",
		"api=https://git.example/acme/api.git",
		"svc-a=https://git.example/acme/svc-a.git",
		"svc-b=https://git.example/acme/svc-b.git",
		// Another owner's api is told apart by its owner.
		"other-api=https://git.example/other/api.git",
	}
	if n := names(got[0]); !slices.Equal(n, want) {
		t.Errorf("selected\n %v\nwant\n %v", n, want)
	}
	if s := got[0].Campaign.Repositories[4].Setup; !slices.Equal(s, []string{"make deps"}) {
		t.Errorf("the query's setup was not given to its repositories: %v", s)
	}
	if got[0].Unresolved() || got[0].Digest == d.Digest {
		t.Errorf("resolved definition: unresolved %v, digest %s (was %s)", got[0].Unresolved(), got[0].Digest, d.Digest)
	}
	if len(d.Campaign.Repositories) != 1 {
		t.Error("resolving changed the definition it was given")
	}

	// A repository that starts matching changes the digest: the plan
	// sees an update that adds it.
	l.repos["acme"] = append(l.repos["acme"], repo("acme", "svc-c", "go"))
	again, _ := rs.Definitions(context.Background(), []spec.Definition{d}, nil)
	if again[0].Digest == got[0].Digest || len(again[0].Campaign.Repositories) != 6 {
		t.Errorf("a newly matching repository: digest %s, %d repositories", again[0].Digest, len(again[0].Campaign.Repositories))
	}
}

func TestCodeSearchNarrowsTheQuery(t *testing.T) {
	l := &lister{
		repos: map[string][]forge.Repository{"acme": {repo("acme", "a"), repo("acme", "b"), repo("acme", "c")}},
		code:  map[string][]string{"acme slog.Info": {"c", "a", "a"}},
	}
	d := load(t, campaign+"repositories_from: [{owner: acme, code_search: slog.Info}]\n")
	got, errs := (&repoquery.Resolver{Forge: l}).Definitions(context.Background(), []spec.Definition{d}, nil)
	if len(errs) > 0 {
		t.Fatal(spec.Errors(errs))
	}
	if n := names(got[0]); len(n) != 2 || !strings.HasPrefix(n[0], "a=") || !strings.HasPrefix(n[1], "c=") {
		t.Errorf("selected %v, want a and c", n)
	}
}

func TestUnresolvableDefinitionsAreErrorsOfTheirFiles(t *testing.T) {
	ctx := context.Background()
	d := load(t, campaign+"repositories_from:\n  - owner: acme\n  - owner: ghost\n")
	other := load(t, strings.Replace(campaign, "id: bump", "id: other", 1)+"repositories: [{url: https://git.example/acme/a.git}]\n")
	for _, tc := range []struct {
		name string
		rs   *repoquery.Resolver
		want string
	}{
		{"local forge", &repoquery.Resolver{}, "c.yaml:8:1: repositories_from: repository queries need a forge to list repositories: the campaigns repository's fleetlift.yaml selects the local forge"},
		{"no token", &repoquery.Resolver{Unavailable: errors.New("forge gitea needs a token in $FLEETLIFT_FORGE_TOKEN")}, "resolved through the campaigns repository's forge: forge gitea needs a token in $FLEETLIFT_FORGE_TOKEN"},
		{"unknown owner", &repoquery.Resolver{Forge: &lister{repos: map[string][]forge.Repository{"acme": {repo("acme", "a")}}}},
			"c.yaml:10:5: repositories_from[1]: list the repositories of ghost: no organisation or user ghost"},
		{"nothing matches", &repoquery.Resolver{Forge: &lister{repos: map[string][]forge.Repository{"acme": nil, "ghost": nil}}, ForgeName: "gitea"},
			"repositories_from: selects no repository of acme, ghost on gitea, and the definition lists none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := tc.rs.Definitions(ctx, []spec.Definition{d, other}, nil)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("errors %v\nwant one with %q", spec.Errors(errs), tc.want)
			}
			// The other definition is planned; the broken one is not.
			if len(got) != 1 || got[0].ID != "other" {
				t.Errorf("definitions resolved: %d", len(got))
			}
		})
	}
	// A code search on a forge without one says so.
	cs := load(t, campaign+"repositories_from: [{owner: acme, code_search: x}]\n")
	_, errs := (&repoquery.Resolver{Forge: noSearch{}, ForgeName: "gitea"}).Definitions(ctx, []spec.Definition{cs}, nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "repositories_from[0].code_search: gitea has no code search: code_search needs a github forge") {
		t.Errorf("code search on gitea: %v", spec.Errors(errs))
	}
}

type noSearch struct{}

func (noSearch) ListRepositories(context.Context, string) ([]forge.Repository, bool, error) {
	return []forge.Repository{repo("acme", "a")}, true, nil
}

func (noSearch) SearchCode(context.Context, string, bool, string) ([]string, error) {
	return nil, forge.ErrNoCodeSearch
}

func TestARunKeepsTheRepositoriesItStartedWith(t *testing.T) {
	ctx := context.Background()
	l := &lister{repos: map[string][]forge.Repository{"acme": {repo("acme", "a"), repo("acme", "b")}}}
	d := load(t, campaign+"repositories_from: [{owner: acme}]\n")
	rs := &repoquery.Resolver{Forge: l}
	started, _ := rs.Definitions(ctx, []spec.Definition{d}, nil)
	specJSON, _ := json.Marshal(started[0].Campaign)
	rec := []state.Campaign{{ID: "bump", Kind: state.KindCampaign, SpecDigest: started[0].Digest, Spec: specJSON, SourceRevision: "rev1", Generation: 1}}

	// c is created after the run started.
	l.repos["acme"] = append(l.repos["acme"], repo("acme", "c"))
	l.listed = nil
	pinned, errs := rs.Definitions(ctx, []spec.Definition{d}, repoquery.Pinned(rec, "rev1"))
	if len(errs) > 0 || pinned[0].Digest != started[0].Digest || len(pinned[0].Campaign.Repositories) != 2 {
		t.Fatalf("at the run's revision: %v, %d repositories, digest changed %v", errs, len(pinned[0].Campaign.Repositories), pinned[0].Digest != started[0].Digest)
	}
	if l.listed["acme"] != 0 {
		t.Error("the forge was asked about a pinned definition")
	}
	// At the next revision, c joins.
	moved, _ := rs.Definitions(ctx, []spec.Definition{d}, repoquery.Pinned(rec, "rev2"))
	if len(moved[0].Campaign.Repositories) != 3 {
		t.Errorf("at the next revision: %v", names(moved[0]))
	}
	// A recorded spec that is not this definition's resolution pins
	// nothing: a query changed at the same revision is impossible, but
	// a record of another spec must never be taken for it.
	rec[0].SpecDigest = "sha256:other"
	if _, ok := repoquery.Pinned(rec, "rev1")(d); ok {
		t.Error("a record whose digest differs pinned the definition")
	}
}

func TestMatch(t *testing.T) {
	r := repo("acme", "Svc-API", "go")
	for _, tc := range []struct {
		q    spec.RepositoryQuery
		want bool
	}{
		{spec.RepositoryQuery{Owner: "acme"}, true},
		{spec.RepositoryQuery{Owner: "acme", Names: []string{"svc-*"}}, true},
		{spec.RepositoryQuery{Owner: "acme", Names: []string{"lib-*"}}, false},
		{spec.RepositoryQuery{Owner: "acme", Exclude: []string{"*-api"}}, false},
		{spec.RepositoryQuery{Owner: "acme", Topics: []string{"go", "backend"}}, false},
		{spec.RepositoryQuery{Owner: "acme", Language: "rust"}, false},
		{spec.RepositoryQuery{Owner: "acme", Names: []string{"["}}, false},
	} {
		if got := repoquery.Match(tc.q, r, nil); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.q, got, tc.want)
		}
	}
}

// A Resolver made by Once lists each owner, and makes each code search,
// once for all of its calls (plan --base resolves two revisions); a
// plain one lists again on each call, as the reconciler needs at each
// new revision.
func TestOnceListsEachOwnerOnce(t *testing.T) {
	ctx := context.Background()
	l := &lister{repos: map[string][]forge.Repository{"acme": {repo("acme", "a"), repo("acme", "b")}}}
	d := load(t, campaign+"repositories_from: [{owner: acme}]\n")
	for _, tc := range []struct {
		name string
		rs   *repoquery.Resolver
		want int
	}{
		{"plain", &repoquery.Resolver{Forge: l}, 2},
		{"once", (&repoquery.Resolver{Forge: l}).Once(), 1},
	} {
		l.listed = nil
		for range 2 {
			got, errs := tc.rs.Definitions(ctx, []spec.Definition{d}, nil)
			if len(errs) > 0 || len(got[0].Campaign.Repositories) != 2 {
				t.Fatalf("%s: %v %v", tc.name, errs, names(got[0]))
			}
		}
		if l.listed["acme"] != tc.want {
			t.Errorf("%s: two calls listed acme %d times, want %d", tc.name, l.listed["acme"], tc.want)
		}
	}
}
