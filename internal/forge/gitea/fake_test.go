package gitea_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGitea answers like Gitea's API v1 (the shapes of its swagger
// definitions) for the repository acme/svc of the organization acme.
type fakeGitea struct {
	t      *testing.T
	token  string
	author string
	// maxPerPage caps limit, as MAX_RESPONSE_ITEMS does.
	maxPerPage int
	headSHA    func(branch string) string
	before     func(w http.ResponseWriter, r *http.Request) bool

	mu        sync.Mutex
	calls     []call
	pulls     []*fakePull
	reviews   map[int][]map[string]any
	comments  map[int][]*fakeComment
	labels    []fakeLabel // repository labels
	orgLabels []fakeLabel
	teams     map[int64]string   // id -> name
	members   map[int64][]string // team id -> users
	nextID    int64
}

type call struct {
	Method, Path, Query string
	Body                []byte
}

type fakePull struct {
	Number                  int
	Title, Body, Head, Base string
	State                   string
	Merged                  bool
	LabelIDs                []int64
	Reviewers, Teams        []string
	// Author opened the pull request; empty means the token's user.
	Author string
	// HeadSHA is the head commit; empty means headSHA(Head).
	HeadSHA string
	// MergeSHA is merge_commit_sha, set once merged.
	MergeSHA string
	// MergedHead is refs/pull/{number}/head, the head the pull request
	// was merged at; empty means the head commit.
	MergedHead string
}

type fakeComment struct {
	ID   int64
	Body string
}

type fakeLabel struct {
	ID    int64
	Name  string
	Color string
}

func newFakeGitea(t *testing.T, token string) *fakeGitea {
	return &fakeGitea{
		t: t, token: token, author: "fleetlift-bot", maxPerPage: 50,
		reviews: map[int][]map[string]any{}, comments: map[int][]*fakeComment{},
		teams: map[int64]string{}, members: map[int64][]string{}, nextID: 100,
	}
}

func (s *fakeGitea) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/acme/svc/pulls", s.listPulls)
	mux.HandleFunc("POST /repos/acme/svc/pulls", s.createPull)
	mux.HandleFunc("GET /repos/acme/svc/pulls/{number}", s.getPull)
	mux.HandleFunc("PATCH /repos/acme/svc/pulls/{number}", s.editPull)
	mux.HandleFunc("POST /repos/acme/svc/pulls/{number}/requested_reviewers", s.requestReviewers)
	mux.HandleFunc("GET /repos/acme/svc/pulls/{number}/reviews", s.listReviews)
	mux.HandleFunc("GET /repos/acme/svc/labels", s.listLabels)
	mux.HandleFunc("POST /repos/acme/svc/labels", s.createLabel)
	mux.HandleFunc("GET /orgs/acme/labels", s.listOrgLabels)
	mux.HandleFunc("POST /repos/acme/svc/issues/{number}/labels", s.addLabels)
	mux.HandleFunc("GET /repos/acme/svc/issues/{number}/comments", s.listComments)
	mux.HandleFunc("POST /repos/acme/svc/issues/{number}/comments", s.createComment)
	mux.HandleFunc("PATCH /repos/acme/svc/issues/comments/{id}", s.editComment)
	mux.HandleFunc("POST /repos/acme/svc/statuses/{sha}", s.createStatus)
	mux.HandleFunc("GET /orgs/acme/teams", s.listTeams)
	mux.HandleFunc("GET /teams/{id}/members/{user}", s.teamMember)
	mux.HandleFunc("GET /repos/acme/svc/commits/{sha}/pull", s.commitPull)
	mux.HandleFunc("GET /repos/acme/svc/git/refs/pull/{number}/head", s.pullHeadRef)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.calls = append(s.calls, call{r.Method, r.URL.Path, r.URL.RawQuery, body})
		s.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if s.before != nil && s.before(w, r) {
			return
		}
		if r.Header.Get("Authorization") != "token "+s.token {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "token is required", "url": "https://gitea.example/api/swagger"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]any{"errors": nil, "message": "The target couldn't be found.", "url": "https://gitea.example/api/swagger"})
}

func (s *fakeGitea) count(method, path string) int {
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

func (s *fakeGitea) bodies(method, path string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, c := range s.calls {
		if c.Method == method && c.Path == path {
			m := map[string]any{}
			json.Unmarshal(c.Body, &m)
			out = append(out, m)
		}
	}
	return out
}

func (s *fakeGitea) id() int64 {
	s.nextID++
	return s.nextID
}

func (s *fakeGitea) addPull(p *fakePull) *fakePull {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Number = len(s.pulls) + 1
	if p.State == "" {
		p.State = "open"
	}
	s.pulls = append(s.pulls, p)
	return p
}

func (s *fakeGitea) pull(r *http.Request) *fakePull {
	n, err := strconv.Atoi(r.PathValue("number"))
	if err != nil || n < 1 || n > len(s.pulls) {
		return nil
	}
	return s.pulls[n-1]
}

func (s *fakeGitea) user(login string) map[string]any {
	return map[string]any{"id": len(login), "login": login, "login_name": "", "full_name": "", "email": login + "@noreply.localhost",
		"avatar_url": "", "language": "", "is_admin": false, "last_login": "0001-01-01T00:00:00Z", "created": "2026-01-01T00:00:00Z",
		"restricted": false, "active": true, "prohibit_login": false, "visibility": "public"}
}

func (s *fakeGitea) labelJSON(l fakeLabel, org bool) map[string]any {
	url := "http://gitea.example/api/v1/repos/acme/svc/labels/" + strconv.FormatInt(l.ID, 10)
	if org {
		url = "http://gitea.example/api/v1/orgs/acme/labels/" + strconv.FormatInt(l.ID, 10)
	}
	return map[string]any{"id": l.ID, "name": l.Name, "exclusive": false, "is_archived": false, "color": strings.TrimPrefix(l.Color, "#"), "description": "", "url": url}
}

func (s *fakeGitea) findLabel(id int64) (fakeLabel, bool, bool) {
	for _, l := range s.labels {
		if l.ID == id {
			return l, false, true
		}
	}
	for _, l := range s.orgLabels {
		if l.ID == id {
			return l, true, true
		}
	}
	return fakeLabel{}, false, false
}

// pullJSON is a pull request as Gitea's convert.ToAPIPullRequest shows it.
func (s *fakeGitea) pullJSON(p *fakePull) map[string]any {
	repo := map[string]any{"id": 1, "owner": s.user("acme"), "name": "svc", "full_name": "acme/svc", "private": false,
		"html_url": "http://gitea.example/acme/svc", "clone_url": "http://gitea.example/acme/svc.git", "default_branch": "main",
		"permissions": map[string]any{"admin": true, "push": true, "pull": true}, "internal_tracker": map[string]any{"enable_time_tracker": true}}
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
	for _, id := range p.LabelIDs {
		l, org, _ := s.findLabel(id)
		labels = append(labels, s.labelJSON(l, org))
	}
	reviewers := []any{}
	for _, u := range p.Reviewers {
		reviewers = append(reviewers, s.user(u))
	}
	teams := []any{}
	for _, t := range p.Teams {
		teams = append(teams, map[string]any{"id": 7, "name": t, "permission": "write"})
	}
	var mergedAt, closedAt any
	if p.Merged {
		mergedAt = "2026-01-02T00:00:00Z"
	}
	if p.State == "closed" {
		closedAt = "2026-01-02T00:00:00Z"
	}
	return map[string]any{
		"id": 500 + p.Number, "url": fmt.Sprintf("http://gitea.example/acme/svc/pulls/%d", p.Number), "number": p.Number,
		"user": s.user(author), "title": p.Title, "body": p.Body, "labels": labels, "milestone": nil, "assignee": nil, "assignees": nil,
		"requested_reviewers": reviewers, "requested_reviewers_teams": teams, "state": p.State,
		"draft": strings.HasPrefix(p.Title, "WIP:"), "is_locked": false, "comments": 0,
		"html_url":  fmt.Sprintf("http://gitea.example/acme/svc/pulls/%d", p.Number),
		"diff_url":  fmt.Sprintf("http://gitea.example/acme/svc/pulls/%d.diff", p.Number),
		"mergeable": true, "merged": p.Merged, "merged_at": mergedAt, "merge_commit_sha": mergeSHA, "merged_by": nil,
		"allow_maintainer_edit": false,
		"base":                  map[string]any{"label": p.Base, "ref": p.Base, "sha": strings.Repeat("b", 40), "repo_id": 1, "repo": repo},
		"head":                  map[string]any{"label": p.Head, "ref": p.Head, "sha": sha, "repo_id": 1, "repo": repo},
		"merge_base":            strings.Repeat("b", 40), "due_date": nil,
		"created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "closed_at": closedAt, "pin_order": 0,
	}
}

// page writes the page that page and limit select, with X-Total-Count;
// link adds the Link header (Gitea sets it on some lists only).
func (s *fakeGitea) page(w http.ResponseWriter, r *http.Request, items []any, link bool) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if limit <= 0 {
		limit = 30
	}
	limit = min(limit, s.maxPerPage)
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	start, end := min((page-1)*limit, len(items)), min(page*limit, len(items))
	w.Header().Set("X-Total-Count", strconv.Itoa(len(items)))
	if link && end < len(items) {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page+1))
		w.Header().Set("Link", fmt.Sprintf(`<http://gitea.example/api/v1%s?%s>; rel="next"`, r.URL.Path, q.Encode()))
	}
	writeJSON(w, http.StatusOK, items[start:end])
}

func (s *fakeGitea) listPulls(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	items := []any{}
	// Gitea's default order: newest first. No head filter.
	for _, p := range slices.Backward(s.pulls) {
		if state != "all" && p.State != state {
			continue
		}
		if b := q.Get("base_branch"); b != "" && b != p.Base {
			continue
		}
		items = append(items, s.pullJSON(p))
	}
	s.page(w, r, items, true)
}

func (s *fakeGitea) createPull(w http.ResponseWriter, r *http.Request) {
	var in struct{ Title, Head, Base, Body string }
	json.NewDecoder(r.Body).Decode(&in)
	s.mu.Lock()
	for _, p := range s.pulls {
		if p.Head == in.Head && p.Base == in.Base && p.State == "open" {
			s.mu.Unlock()
			writeJSON(w, http.StatusConflict, map[string]any{"message": "pull request already exists for these targets", "url": "https://gitea.example/api/swagger"})
			return
		}
	}
	s.mu.Unlock()
	p := s.addPull(&fakePull{Title: in.Title, Head: in.Head, Base: in.Base, Body: in.Body})
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusCreated, s.pullJSON(p))
}

func (s *fakeGitea) getPull(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pull(r); p != nil {
		writeJSON(w, http.StatusOK, s.pullJSON(p))
		return
	}
	notFound(w)
}

func (s *fakeGitea) editPull(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(r)
	if p == nil {
		notFound(w)
		return
	}
	var in struct{ Title, Body, State *string }
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
	writeJSON(w, http.StatusCreated, s.pullJSON(p))
}

func (s *fakeGitea) requestReviewers(w http.ResponseWriter, r *http.Request) {
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
	p.Reviewers = append(p.Reviewers, in.Reviewers...)
	p.Teams = append(p.Teams, in.TeamReviewers...)
	// Gitea answers with the review requests it made.
	var out []any
	for _, u := range in.Reviewers {
		out = append(out, map[string]any{"id": s.id(), "user": s.user(u), "team": nil, "state": "REQUEST_REVIEW", "body": "", "dismissed": false})
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *fakeGitea) listReviews(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, _ := strconv.Atoi(r.PathValue("number"))
	items := []any{}
	for _, rv := range s.reviews[n] {
		items = append(items, rv)
	}
	// ListPullReviews sets X-Total-Count and no Link header.
	s.page(w, r, items, false)
}

func (s *fakeGitea) listLabels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := []any{}
	for _, l := range s.labels {
		items = append(items, s.labelJSON(l, false))
	}
	s.page(w, r, items, true)
}

func (s *fakeGitea) listOrgLabels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	items := []any{}
	for _, l := range s.orgLabels {
		items = append(items, s.labelJSON(l, true))
	}
	s.page(w, r, items, true)
}

func (s *fakeGitea) createLabel(w http.ResponseWriter, r *http.Request) {
	var in struct{ Name, Color, Description string }
	json.NewDecoder(r.Body).Decode(&in)
	if in.Name == "" || in.Color == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "[Name Color]: Required"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := fakeLabel{ID: s.id(), Name: in.Name, Color: in.Color}
	s.labels = append(s.labels, l)
	writeJSON(w, http.StatusCreated, s.labelJSON(l, false))
}

// addLabels takes label ids only, as Gitea before 1.20 did.
func (s *fakeGitea) addLabels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(r)
	if p == nil {
		notFound(w)
		return
	}
	var in struct {
		Labels []int64 `json:"labels"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "labels must be ids: " + err.Error()})
		return
	}
	for _, id := range in.Labels {
		if _, _, ok := s.findLabel(id); !ok {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": fmt.Sprintf("label %d does not exist", id)})
			return
		}
		if !slices.Contains(p.LabelIDs, id) {
			p.LabelIDs = append(p.LabelIDs, id)
		}
	}
	writeJSON(w, http.StatusOK, s.pullJSON(p)["labels"])
}

func (s *fakeGitea) addComment(number int, body string) *fakeComment {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &fakeComment{ID: s.id(), Body: body}
	s.comments[number] = append(s.comments[number], c)
	return c
}

func (s *fakeGitea) commentJSON(c *fakeComment) map[string]any {
	return map[string]any{"id": c.ID, "html_url": "http://gitea.example/acme/svc/pulls/1#issuecomment-" + strconv.FormatInt(c.ID, 10),
		"user": s.user(s.author), "original_author": "", "original_author_id": 0, "body": c.Body, "assets": []any{},
		"created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}
}

// listComments returns every comment: Gitea does not page this list.
func (s *fakeGitea) listComments(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, _ := strconv.Atoi(r.PathValue("number"))
	items := []any{}
	for _, c := range s.comments[n] {
		items = append(items, s.commentJSON(c))
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(len(items)))
	writeJSON(w, http.StatusOK, items)
}

func (s *fakeGitea) createComment(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	var in struct{ Body string }
	json.NewDecoder(r.Body).Decode(&in)
	c := s.addComment(n, in.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusCreated, s.commentJSON(c))
}

func (s *fakeGitea) editComment(w http.ResponseWriter, r *http.Request) {
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

func (s *fakeGitea) createStatus(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	json.NewDecoder(r.Body).Decode(&in)
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "status": in["state"], "target_url": in["target_url"],
		"description": in["description"], "context": in["context"], "creator": s.user(s.author),
		"created_at": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339), "updated_at": "2026-01-01T00:00:00Z"})
}

func (s *fakeGitea) listTeams(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for id := range s.teams {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	items := []any{}
	for _, id := range ids {
		items = append(items, map[string]any{"id": id, "name": s.teams[id], "description": "", "permission": "write", "units": []string{"repo.code"}})
	}
	s.page(w, r, items, false)
}

func (s *fakeGitea) teamMember(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	user := r.PathValue("user")
	if slices.Contains(s.members[id], user) {
		writeJSON(w, http.StatusOK, s.user(user))
		return
	}
	notFound(w)
}

// commitPull answers GET .../commits/{sha}/pull as Gitea does: the pull
// request whose merge commit is sha, else 404.
func (s *fakeGitea) commitPull(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pulls {
		if p.Merged && p.MergeSHA == r.PathValue("sha") {
			writeJSON(w, http.StatusOK, s.pullJSON(p))
			return
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]any{
		"message": "pull request does not exist [id: 0, issue_id: 0, head_repo_id: 0, base_repo_id: 1, head_branch: , base_branch: ]",
		"url":     "https://gitea.example/api/swagger"})
}

// pullHeadRef answers GET .../git/refs/pull/{number}/head as Gitea does:
// a list of the references under that name.
func (s *fakeGitea) pullHeadRef(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pull(r)
	if p == nil {
		notFound(w)
		return
	}
	sha := p.MergedHead
	if sha == "" {
		sha = p.HeadSHA
	}
	name := "refs/pull/" + strconv.Itoa(p.Number) + "/head"
	writeJSON(w, http.StatusOK, []any{map[string]any{
		"ref": name, "url": "http://gitea.example/api/v1/repos/acme/svc/git/" + name,
		"object": map[string]any{"type": "commit", "sha": sha, "url": "http://gitea.example/api/v1/repos/acme/svc/git/commits/" + sha},
	}})
}
