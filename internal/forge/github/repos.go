package github

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fleetlift/fleetlift/internal/forge"
)

var _ forge.Lister = (*Forge)(nil)

// repo is a repository as GitHub and Gitea list it.
type repo struct {
	Name          string   `json:"name"`
	CloneURL      string   `json:"clone_url"`
	DefaultBranch string   `json:"default_branch"`
	Language      string   `json:"language"`
	Topics        []string `json:"topics"`
	Archived      bool     `json:"archived"`
	Fork          bool     `json:"fork"`
	Owner         struct {
		Login string `json:"login"`
	} `json:"owner"`
}

// ListRepositories lists every repository of owner the token can see:
// an organisation's (orgs/{owner}/repos), or when there is no such
// organisation, a user's (users/{owner}/repos: on GitHub, the public
// ones). A repository whose clone URL is not on this forge is refused,
// so that nothing it lists sends a clone elsewhere.
func (f *Forge) ListRepositories(ctx context.Context, owner string) ([]forge.Repository, bool, error) {
	if err := checkName("owner", owner); err != nil {
		return nil, false, err
	}
	var out []forge.Repository
	var bad error
	visit := func(r repo) bool {
		if _, err := parseRepository(f.web, r.CloneURL); err != nil {
			bad = fmt.Errorf("%s lists %s/%s with the clone URL %q: %w", f.name, owner, r.Name, r.CloneURL, err)
			return false
		}
		out = append(out, forge.Repository{
			Owner: r.Owner.Login, Name: r.Name, CloneURL: r.CloneURL, DefaultBranch: r.DefaultBranch,
			Language: r.Language, Topics: r.Topics, Archived: r.Archived, Fork: r.Fork,
		})
		return true
	}
	org := true
	err := List(ctx, f.api, PathEscape("orgs", owner, "repos"), url.Values{"type": {"all"}}, visit)
	if IsNotFound(err) {
		org, out = false, nil
		err = List(ctx, f.api, PathEscape("users", owner, "repos"), url.Values{"type": {"owner"}}, visit)
		if IsNotFound(err) {
			return nil, false, fmt.Errorf("%s has no organisation or user %q", f.name, owner)
		}
	}
	if err != nil {
		return nil, false, f.fail(err, "list the repositories of %s", owner)
	}
	if bad != nil {
		return nil, false, bad
	}
	return out, org, nil
}

// maxCodeResults is the most results GitHub's code search returns for
// one query.
const maxCodeResults = 1000

// SearchCode returns the names of owner's repositories holding code
// that query finds, from GitHub's code search (search/code, one page of
// 100 after another). A search GitHub did not finish (incomplete
// results) or whose matches pass the 1,000 it returns is an error: the
// repositories it left out would silently not be selected.
func (f *Forge) SearchCode(ctx context.Context, owner string, org bool, query string) ([]string, error) {
	if f.dialect.NoCodeSearch {
		return nil, fmt.Errorf("%s: %w", f.name, forge.ErrNoCodeSearch)
	}
	if err := checkName("owner", owner); err != nil {
		return nil, err
	}
	qualifier := "user:"
	if org {
		qualifier = "org:"
	}
	q := url.Values{"q": {query + " " + qualifier + owner}, "per_page": {strconv.Itoa(pageSize)}}
	seen := map[string]bool{}
	var names []string
	for page, read := 1, 0; ; page++ {
		q.Set("page", strconv.Itoa(page))
		var res struct {
			Total      int  `json:"total_count"`
			Incomplete bool `json:"incomplete_results"`
			Items      []struct {
				Repository repo `json:"repository"`
			} `json:"items"`
		}
		if _, err := f.api.Do(ctx, http.MethodGet, "search/code?"+q.Encode(), nil, &res); err != nil {
			return nil, f.fail(err, "search the code of %s for %q", owner, query)
		}
		if res.Incomplete {
			return nil, fmt.Errorf("search the code of %s for %q: GitHub did not finish the search (incomplete results): narrow the query", owner, query)
		}
		if res.Total > maxCodeResults {
			return nil, fmt.Errorf("search the code of %s for %q: %d matches, more than the %d GitHub returns: narrow the query", owner, query, res.Total, maxCodeResults)
		}
		for _, it := range res.Items {
			if n := it.Repository.Name; !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		read += len(res.Items)
		if len(res.Items) == 0 || read >= res.Total {
			return names, nil
		}
	}
}
