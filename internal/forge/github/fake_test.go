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
	"sync"
	"testing"
	"time"
)

// fakeGitHub answers like GitHub's REST API (the JSON shapes of
// docs.github.com/rest) for one repository, acme/svc, from memory.
type fakeGitHub struct {
	t     *testing.T
	token string
	// author is the login of the token's user.
	author string
	// maxPerPage caps per_page, to make short lists span pages.
	maxPerPage int
	// headSHA reports the commit of a branch in the repository.
	headSHA func(branch string) string
	// before, when set, may answer a request itself and return true.
	before func(w http.ResponseWriter, r *http.Request) bool
	// raceOnCreate makes POST /pulls open the pull request and then
	// answer 422, as if a concurrent call had won.
	raceOnCreate bool

	mu          sync.Mutex
	calls       []call
	pulls       []*fakePull
	reviews     map[int][]map[string]any
	comments    map[int][]*fakeComment
	statuses    []map[string]any
	memberships map[string]string // org/team/user -> state
	nextComment int64
}

type call struct {
	Method, Path, Query string
	Body                []byte
}

type fakePull struct {
	Number                   int
	Title, Body, Head, Base  string
	State                    string
	Merged, Draft            bool
	Labels, Reviewers, Teams []string
	Created                  time.Time
	// Author opened the pull request; empty means the token's user.
	Author string
	// HeadSHA is the head commit; empty means headSHA(Head).
	HeadSHA string
	// MergeSHA is merge_commit_sha: the merge commit once merged, a test
	// merge commit before.
	MergeSHA string
}

type fakeComment struct {
	ID   int64
	Body string
}

func newFakeGitHub(t *testing.T, token string) *fakeGitHub {
	return &fakeGitHub{
		t: t, token: token, author: "fleetlift-bot", maxPerPage: 100,
		reviews: map[int][]map[string]any{}, comments: map[int][]*fakeComment{},
		memberships: map[string]string{}, nextComment: 1000,
	}
}

// handler serves the API at its root.
func (s *fakeGitHub) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/acme/svc/pulls", s.listPulls)
	mux.HandleFunc("POST /repos/acme/svc/pulls", s.createPull)
	mux.HandleFunc("GET /repos/acme/svc/pulls/{number}", s.getPull)
	mux.HandleFunc("PATCH /repos/acme/svc/pulls/{number}", s.editPull)
	mux.HandleFunc("POST /repos/acme/svc/pulls/{number}/requested_reviewers", s.requestReviewers)
	mux.HandleFunc("GET /repos/acme/svc/pulls/{number}/reviews", s.listReviews)
	mux.HandleFunc("POST /repos/acme/svc/issues/{number}/labels", s.addLabels)
	mux.HandleFunc("GET /repos/acme/svc/issues/{number}/comments", s.listComments)
	mux.HandleFunc("POST /repos/acme/svc/issues/{number}/comments", s.createComment)
	mux.HandleFunc("PATCH /repos/acme/svc/issues/comments/{id}", s.editComment)
	mux.HandleFunc("POST /repos/acme/svc/statuses/{sha}", s.createStatus)
	mux.HandleFunc("GET /orgs/{org}/teams/{team}/memberships/{user}", s.membership)
	mux.HandleFunc("GET /repos/acme/svc/commits/{sha}/pulls", s.commitPulls)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.calls = append(s.calls, call{r.Method, r.URL.Path, r.URL.RawQuery, body})
		s.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if s.before != nil && s.before(w, r) {
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+s.token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
			return
		}
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
}

// count is how many requests had method and path.
func (s *fakeGitHub) count(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Method == method && c.Path == path {
			n++
		}
	}
	return n
}

// bodies are the request bodies of method and path, decoded.
func (s *fakeGitHub) bodies(method, path string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, c := range s.calls {
		if c.Method == method && c.Path == path {
			m := map[string]any{}
			if err := json.Unmarshal(c.Body, &m); err != nil {
				var list []any
				if json.Unmarshal(c.Body, &list) == nil {
					m["list"] = list
				}
			}
			out = append(out, m)
		}
	}
	return out
}

func (s *fakeGitHub) addPull(p *fakePull) *fakePull {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Number = len(s.pulls) + 1
	if p.State == "" {
		p.State = "open"
	}
	if p.Created.IsZero() {
		p.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(p.Number) * time.Hour)
	}
	s.pulls = append(s.pulls, p)
	return p
}

func (s *fakeGitHub) pull(r *http.Request) *fakePull {
	n, err := strconv.Atoi(r.PathValue("number"))
	if err != nil || n < 1 || n > len(s.pulls) {
		return nil
	}
	return s.pulls[n-1]
}

// pullJSON is a pull request as GitHub shows it; single adds the fields
// only GET /pulls/{number} has.
func (s *fakeGitHub) pullJSON(p *fakePull, single bool) map[string]any {
	repo := map[string]any{"id": 1, "name": "svc", "full_name": "acme/svc", "owner": map[string]any{"login": "acme"}}
	sha := p.HeadSHA
	if sha == "" && s.headSHA != nil {
		sha = s.headSHA(p.Head)
	}
	author := p.Author
	if author == "" {
		author = s.author
	}
	var mergeSHA any
	if p.MergeSHA != "" {
		mergeSHA = p.MergeSHA
	}
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
		"created_at": p.Created.Format(time.RFC3339), "merged_at": mergedAt, "merge_commit_sha": mergeSHA,
		"user":   map[string]any{"login": author, "type": "Bot"},
		"head":   map[string]any{"label": "acme:" + p.Head, "ref": p.Head, "sha": sha, "repo": repo},
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
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, s.maxPerPage)
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	start, end := min((page-1)*per, len(items)), min(page*per, len(items))
	if end < len(items) {
		link := func(n int) string {
			u := url.URL{Scheme: "https", Host: "api.github.com", Path: r.URL.Path}
			q := r.URL.Query()
			q.Set("page", strconv.Itoa(n))
			q.Set("per_page", strconv.Itoa(per))
			u.RawQuery = q.Encode()
			return u.String()
		}
		last := (len(items) + per - 1) / per
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <%s>; rel="last"`, link(page+1), link(last)))
	}
	writeJSON(w, http.StatusOK, items[start:end])
}

func (s *fakeGitHub) listPulls(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	state := q.Get("state")
	var items []any
	// sort=created&direction=desc: newest first.
	for _, p := range slices.Backward(s.pulls) {
		if state != "all" && p.State != state && !(state == "" && p.State == "open") {
			continue
		}
		if h := q.Get("head"); h != "" && h != "acme:"+p.Head {
			continue
		}
		if b := q.Get("base"); b != "" && b != p.Base {
			continue
		}
		items = append(items, s.pullJSON(p, false))
	}
	if items == nil {
		items = []any{}
	}
	s.page(w, r, items)
}

func (s *fakeGitHub) createPull(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return
	}
	s.mu.Lock()
	for _, p := range s.pulls {
		if p.Head == in.Head && p.State == "open" {
			s.mu.Unlock()
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
				"message": "Validation Failed",
				"errors":  []any{map[string]any{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:" + in.Head + "."}},
			})
			return
		}
	}
	s.mu.Unlock()
	p := s.addPull(&fakePull{Title: in.Title, Head: in.Head, Base: in.Base, Body: in.Body, Draft: in.Draft})
	if s.raceOnCreate {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"message": "Validation Failed",
			"errors":  []any{map[string]any{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:" + in.Head + "."}},
		})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusCreated, s.pullJSON(p, true))
}

func (s *fakeGitHub) getPull(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(r)
	if p == nil {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, s.pullJSON(p, true))
}

func (s *fakeGitHub) editPull(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(r)
	if p == nil {
		notFound(w)
		return
	}
	var in struct {
		Title, Body, State *string
	}
	json.NewDecoder(r.Body).Decode(&in)
	if in.Title != nil {
		p.Title = *in.Title
	}
	if in.Body != nil {
		p.Body = *in.Body
	}
	if in.State != nil {
		p.State = *in.State
	}
	writeJSON(w, http.StatusOK, s.pullJSON(p, true))
}

func (s *fakeGitHub) requestReviewers(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(r)
	if p == nil {
		notFound(w)
		return
	}
	var in struct {
		Reviewers     []string `json:"reviewers"`
		TeamReviewers []string `json:"team_reviewers"`
	}
	json.NewDecoder(r.Body).Decode(&in)
	for _, u := range in.Reviewers {
		if u == s.author {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Review cannot be requested from pull request author."})
			return
		}
	}
	p.Reviewers = append(p.Reviewers, in.Reviewers...)
	p.Teams = append(p.Teams, in.TeamReviewers...)
	writeJSON(w, http.StatusCreated, s.pullJSON(p, true))
}

func (s *fakeGitHub) addLabels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(r)
	if p == nil {
		notFound(w)
		return
	}
	// GitHub takes {"labels": [...]} or a bare array of names.
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

func (s *fakeGitHub) listReviews(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, _ := strconv.Atoi(r.PathValue("number"))
	items := []any{}
	for _, rv := range s.reviews[n] {
		items = append(items, rv)
	}
	s.page(w, r, items)
}

func (s *fakeGitHub) commentJSON(c *fakeComment) map[string]any {
	return map[string]any{
		"id": c.ID, "body": c.Body, "user": map[string]any{"login": s.author},
		"html_url": fmt.Sprintf("https://github.com/acme/svc/pull/1#issuecomment-%d", c.ID),
	}
}

func (s *fakeGitHub) listComments(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, _ := strconv.Atoi(r.PathValue("number"))
	items := []any{}
	for _, c := range s.comments[n] {
		items = append(items, s.commentJSON(c))
	}
	s.page(w, r, items)
}

func (s *fakeGitHub) addComment(number int, body string) *fakeComment {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextComment++
	c := &fakeComment{ID: s.nextComment, Body: body}
	s.comments[number] = append(s.comments[number], c)
	return c
}

func (s *fakeGitHub) createComment(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	var in struct{ Body string }
	json.NewDecoder(r.Body).Decode(&in)
	c := s.addComment(n, in.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusCreated, s.commentJSON(c))
}

func (s *fakeGitHub) editComment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var in struct{ Body string }
	json.NewDecoder(r.Body).Decode(&in)
	for _, cs := range s.comments {
		for _, c := range cs {
			if c.ID == id {
				c.Body = in.Body
				writeJSON(w, http.StatusOK, s.commentJSON(c))
				return
			}
		}
	}
	notFound(w)
}

func (s *fakeGitHub) createStatus(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	json.NewDecoder(r.Body).Decode(&in)
	in["sha"] = r.PathValue("sha")
	s.mu.Lock()
	s.statuses = append(s.statuses, in)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "state": in["state"], "context": in["context"]})
}

func (s *fakeGitHub) membership(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	state, ok := s.memberships[r.PathValue("org")+"/"+r.PathValue("team")+"/"+r.PathValue("user")]
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "role": "member", "url": "https://api.github.com/teams/1/memberships/" + r.PathValue("user")})
}

// commitPulls lists the pull requests associated with a commit, as
// GitHub does: the one merged as the commit, and those whose head is it.
func (s *fakeGitHub) commitPulls(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sha := r.PathValue("sha")
	items := []any{}
	for _, p := range slices.Backward(s.pulls) {
		head := p.HeadSHA
		if head == "" && s.headSHA != nil {
			head = s.headSHA(p.Head)
		}
		if p.MergeSHA == sha || head == sha {
			items = append(items, s.pullJSON(p, false))
		}
	}
	s.page(w, r, items)
}
