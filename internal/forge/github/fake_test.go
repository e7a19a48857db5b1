package github_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/forgetest"
)

// contentType is the Content-Type of GitHub's JSON answers.
const contentType = "application/json; charset=utf-8"

// fakeGitHub answers like GitHub's REST API (the JSON shapes of
// docs.github.com/rest) for one repository, acme/svc, from memory.
type fakeGitHub struct {
	*forgetest.Server
	t *testing.T
	// raceOnCreate makes POST /pulls open the pull request and then
	// answer 422, as if a concurrent call had won.
	raceOnCreate bool

	// Guarded by Mu, which the handlers run with.
	statuses    []map[string]any
	memberships map[string]string // org/team/user -> state
}

// call is a request the fake received.
type call = forgetest.Call

// fakePull is a pull request the fake keeps; GitHub's have Labels by
// name, Draft and Created.
type fakePull = forgetest.Pull

func newFakeGitHub(t *testing.T, token string) *fakeGitHub {
	s := &fakeGitHub{t: t, memberships: map[string]string{}}
	s.Server = forgetest.New(token, forgetest.API{
		AuthScheme: "Bearer ", ContentType: contentType, Author: "fleetlift-bot",
		MaxPerPage: 100, FirstID: 1000, EditStatus: http.StatusOK,
		Unauthorized: map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
		Missing:      map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"},
		PullJSON:     func(p *fakePull) map[string]any { return s.pullJSON(p, true) },
		CommentJSON:  s.commentJSON,
	})
	return s
}

// handler serves the API at its root, with the rate limit headers GitHub
// sends on every authenticated answer.
func (s *fakeGitHub) handler() http.Handler {
	mux := s.Mux(s)
	mux.HandleFunc("GET /orgs/{org}/teams/{team}/memberships/{user}", s.membership)
	mux.HandleFunc("GET /repos/acme/svc/commits/{sha}/pulls", s.commitPulls)
	mux.HandleFunc("GET /repos/acme/svc/issues/{number}", s.WithPull(s.issue))
	return s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		mux.ServeHTTP(w, r)
	}))
}

// writeJSON answers with status and v as GitHub's JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	forgetest.WriteJSON(w, contentType, status, v)
}

// pullJSON is a pull request as GitHub shows it; single adds the fields
// only GET /pulls/{number} has.
func (s *fakeGitHub) pullJSON(p *fakePull, single bool) map[string]any {
	repo := map[string]any{"id": 1, "name": "svc", "full_name": "acme/svc", "owner": map[string]any{"login": "acme"}}
	labels := []any{}
	for i, l := range p.Labels {
		labels = append(labels, map[string]any{"id": i + 1, "name": l, "color": "ededed"})
	}
	reviewers := []any{}
	for _, u := range p.Reviewers {
		reviewers = append(reviewers, map[string]any{"login": u, "type": "User"})
	}
	teams := []any{}
	for _, t := range p.Teams {
		teams = append(teams, map[string]any{"slug": t, "name": strings.ToUpper(t[:1]) + t[1:]})
	}
	var mergedAt any
	if p.Merged {
		mergedAt = p.Created.Add(time.Hour).Format(time.RFC3339)
	}
	m := map[string]any{
		"id": 100 + p.Number, "number": p.Number, "state": p.State, "title": p.Title, "body": p.Body,
		"html_url": fmt.Sprintf("https://github.com/acme/svc/pull/%d", p.Number), "draft": p.Draft,
		"created_at": p.Created.Format(time.RFC3339), "merged_at": mergedAt, "merge_commit_sha": s.MergeCommit(p),
		"user":   map[string]any{"login": s.AuthorOf(p), "type": "Bot"},
		"head":   map[string]any{"label": "acme:" + p.Head, "ref": p.Head, "sha": s.HeadCommit(p), "repo": repo},
		"base":   map[string]any{"label": "acme:" + p.Base, "ref": p.Base, "sha": "b" + strings.Repeat("0", 39), "repo": repo},
		"labels": labels, "requested_reviewers": reviewers, "requested_teams": teams,
	}
	if single {
		m["merged"] = p.Merged
		m["mergeable"] = true
	}
	return m
}

// page writes the slice of items that page and per_page select, with a
// Link header to the next and last pages as GitHub sends it.
func (s *fakeGitHub) page(w http.ResponseWriter, r *http.Request, items []any) {
	pg := s.PageOf(r, "per_page", len(items))
	if pg.End < len(items) {
		link := func(n int) string {
			u := url.URL{Scheme: "https", Host: "api.github.com", Path: r.URL.Path}
			q := r.URL.Query()
			q.Set("page", strconv.Itoa(n))
			q.Set("per_page", strconv.Itoa(pg.Size))
			u.RawQuery = q.Encode()
			return u.String()
		}
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <%s>; rel="last"`, link(pg.Number+1), link(pg.Last)))
	}
	writeJSON(w, http.StatusOK, items[pg.Start:pg.End])
}

// ListPulls lists as sort=created&direction=desc does: newest first.
func (s *fakeGitHub) ListPulls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	items := []any{}
	for _, p := range s.NewestPulls(q.Get("state")) {
		if h := q.Get("head"); h != "" && h != "acme:"+p.Head {
			continue
		}
		if b := q.Get("base"); b != "" && b != p.Base {
			continue
		}
		items = append(items, s.pullJSON(p, false))
	}
	s.page(w, r, items)
}

// exists answers 422 as GitHub does when head already has an open pull
// request.
func exists(w http.ResponseWriter, head string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message": "Validation Failed",
		"errors":  []any{map[string]any{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:" + head + "."}},
	})
}

func (s *fakeGitHub) CreatePull(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return
	}
	if s.OpenPull(in.Head, "") != nil {
		exists(w, in.Head)
		return
	}
	p := s.AddPullLocked(&fakePull{Title: in.Title, Head: in.Head, Base: in.Base, Body: in.Body, Draft: in.Draft})
	if s.raceOnCreate {
		exists(w, in.Head)
		return
	}
	writeJSON(w, http.StatusCreated, s.pullJSON(p, true))
}

func (s *fakeGitHub) RequestReviewers(w http.ResponseWriter, r *http.Request, p *fakePull) {
	var in forgetest.ReviewRequest
	json.NewDecoder(r.Body).Decode(&in)
	if slices.Contains(in.Reviewers, s.Author) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Review cannot be requested from pull request author."})
		return
	}
	p.Request(in)
	writeJSON(w, http.StatusCreated, s.pullJSON(p, true))
}

// AddLabels takes {"labels": [...]} or a bare array of names, as GitHub
// does.
func (s *fakeGitHub) AddLabels(w http.ResponseWriter, r *http.Request, p *fakePull) {
	var names []string
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &names); err != nil {
		var in struct{ Labels []string }
		json.Unmarshal(data, &in)
		names = in.Labels
	}
	for _, n := range names {
		if !slices.Contains(p.Labels, n) {
			p.Labels = append(p.Labels, n)
		}
	}
	writeJSON(w, http.StatusOK, s.pullJSON(p, true)["labels"])
}

func (s *fakeGitHub) ListReviews(w http.ResponseWriter, r *http.Request) {
	s.page(w, r, s.ReviewList(r))
}

func (s *fakeGitHub) commentJSON(c *forgetest.Comment) map[string]any {
	return map[string]any{
		"id": c.ID, "body": c.Body, "user": map[string]any{"login": s.Author},
		"html_url": fmt.Sprintf("https://github.com/acme/svc/pull/1#issuecomment-%d", c.ID),
	}
}

func (s *fakeGitHub) ListComments(w http.ResponseWriter, r *http.Request) {
	s.page(w, r, s.CommentList(r))
}

func (s *fakeGitHub) CreateStatus(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	json.NewDecoder(r.Body).Decode(&in)
	in["sha"] = r.PathValue("sha")
	s.statuses = append(s.statuses, in)
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "state": in["state"], "context": in["context"]})
}

func (s *fakeGitHub) membership(w http.ResponseWriter, r *http.Request) {
	state, ok := s.memberships[r.PathValue("org")+"/"+r.PathValue("team")+"/"+r.PathValue("user")]
	if !ok {
		s.NotFound(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "role": "member", "url": "https://api.github.com/teams/1/memberships/" + r.PathValue("user")})
}

// commitPulls lists the pull requests associated with a commit, as
// GitHub does: the one merged as the commit, and those whose head is it.
func (s *fakeGitHub) commitPulls(w http.ResponseWriter, r *http.Request) {
	sha := r.PathValue("sha")
	items := []any{}
	for _, p := range s.NewestPulls("all") {
		if p.MergeSHA == sha || s.HeadCommit(p) == sha {
			items = append(items, s.pullJSON(p, false))
		}
	}
	s.page(w, r, items)
}

// issue answers GET .../issues/{number} for a pull request: GitHub's
// issue, whose closed_by says who closed it.
func (s *fakeGitHub) issue(w http.ResponseWriter, _ *http.Request, p *fakePull) {
	var closedBy any
	if p.State == "closed" && p.ClosedBy != "" {
		closedBy = map[string]any{"login": p.ClosedBy, "type": "User"}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": 100 + p.Number, "number": p.Number, "state": p.State, "title": p.Title, "body": p.Body,
		"user": map[string]any{"login": s.AuthorOf(p)}, "closed_by": closedBy,
		"pull_request": map[string]any{"url": fmt.Sprintf("https://api.github.com/repos/acme/svc/pulls/%d", p.Number)},
	})
}
