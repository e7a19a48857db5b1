package gitea_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/forgetest"
)

// contentType is the Content-Type of Gitea's JSON answers.
const contentType = "application/json;charset=utf-8"

// fakeGitea answers like Gitea's API v1 (the shapes of its swagger
// definitions) for the repository acme/svc of the organization acme.
type fakeGitea struct {
	*forgetest.Server
	t *testing.T

	// Guarded by Mu, which the handlers run with.
	labels    []fakeLabel // repository labels
	orgLabels []fakeLabel
	teams     map[int64]string   // id -> name
	members   map[int64][]string // team id -> users
}

// fakePull is a pull request the fake keeps; Gitea's have LabelIDs and
// MergedHead.
type fakePull = forgetest.Pull

type fakeLabel struct {
	ID    int64
	Name  string
	Color string
}

func newFakeGitea(t *testing.T, token string) *fakeGitea {
	s := &fakeGitea{t: t, teams: map[int64]string{}, members: map[int64][]string{}}
	s.Server = forgetest.New(token, forgetest.API{
		AuthScheme: "token ", ContentType: contentType, Author: "fleetlift-bot",
		// MAX_RESPONSE_ITEMS caps limit.
		MaxPerPage: 50, FirstID: 100, EditStatus: http.StatusCreated,
		Unauthorized: map[string]any{"message": "token is required", "url": "https://gitea.example/api/swagger"},
		Missing:      map[string]any{"errors": nil, "message": "The target couldn't be found.", "url": "https://gitea.example/api/swagger"},
		PullJSON:     s.pullJSON, CommentJSON: s.commentJSON,
	})
	return s
}

// handler serves the API at its root.
func (s *fakeGitea) handler() http.Handler {
	mux := s.Mux(s)
	mux.HandleFunc("GET /repos/acme/svc/labels", s.listLabels)
	mux.HandleFunc("POST /repos/acme/svc/labels", s.createLabel)
	mux.HandleFunc("GET /orgs/acme/labels", s.listOrgLabels)
	mux.HandleFunc("GET /orgs/acme/teams", s.listTeams)
	mux.HandleFunc("GET /teams/{id}/members/{user}", s.teamMember)
	mux.HandleFunc("GET /repos/acme/svc/commits/{sha}/pull", s.commitPull)
	mux.HandleFunc("GET /repos/acme/svc/git/refs/pull/{number}/head", s.WithPull(s.pullHeadRef))
	mux.HandleFunc("GET /repos/acme/svc/issues/{number}/timeline", s.WithPull(s.timeline))
	return s.Handler(mux)
}

// writeJSON answers with status and v as Gitea's JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	forgetest.WriteJSON(w, contentType, status, v)
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
		"user": s.user(s.AuthorOf(p)), "title": p.Title, "body": p.Body, "labels": labels, "milestone": nil, "assignee": nil, "assignees": nil,
		"requested_reviewers": reviewers, "requested_reviewers_teams": teams, "state": p.State,
		"draft": strings.HasPrefix(p.Title, "WIP:"), "is_locked": false, "comments": 0,
		"html_url":  fmt.Sprintf("http://gitea.example/acme/svc/pulls/%d", p.Number),
		"diff_url":  fmt.Sprintf("http://gitea.example/acme/svc/pulls/%d.diff", p.Number),
		"mergeable": true, "merged": p.Merged, "merged_at": mergedAt, "merge_commit_sha": s.MergeCommit(p), "merged_by": nil,
		"allow_maintainer_edit": false,
		"base":                  map[string]any{"label": p.Base, "ref": p.Base, "sha": strings.Repeat("b", 40), "repo_id": 1, "repo": repo},
		"head":                  map[string]any{"label": p.Head, "ref": p.Head, "sha": s.HeadCommit(p), "repo_id": 1, "repo": repo},
		"merge_base":            strings.Repeat("b", 40), "due_date": nil,
		"created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "closed_at": closedAt, "pin_order": 0,
	}
}

// page writes the page that page and limit select, with X-Total-Count;
// link adds the Link header (Gitea sets it on some lists only).
func (s *fakeGitea) page(w http.ResponseWriter, r *http.Request, items []any, link bool) {
	pg := s.PageOf(r, "limit", len(items))
	w.Header().Set("X-Total-Count", strconv.Itoa(len(items)))
	if link && pg.End < len(items) {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(pg.Number+1))
		w.Header().Set("Link", fmt.Sprintf(`<http://gitea.example/api/v1%s?%s>; rel="next"`, r.URL.Path, q.Encode()))
	}
	writeJSON(w, http.StatusOK, items[pg.Start:pg.End])
}

// ListPulls lists newest first, Gitea's default order, with no head
// filter.
func (s *fakeGitea) ListPulls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	items := []any{}
	for _, p := range s.NewestPulls(q.Get("state")) {
		if b := q.Get("base_branch"); b == "" || b == p.Base {
			items = append(items, s.pullJSON(p))
		}
	}
	s.page(w, r, items, true)
}

func (s *fakeGitea) CreatePull(w http.ResponseWriter, r *http.Request) {
	var in struct{ Title, Head, Base, Body string }
	json.NewDecoder(r.Body).Decode(&in)
	if s.OpenPull(in.Head, in.Base) != nil {
		writeJSON(w, http.StatusConflict, map[string]any{"message": "pull request already exists for these targets", "url": "https://gitea.example/api/swagger"})
		return
	}
	p := s.AddPullLocked(&fakePull{Title: in.Title, Head: in.Head, Base: in.Base, Body: in.Body})
	writeJSON(w, http.StatusCreated, s.pullJSON(p))
}

// RequestReviewers answers with the review requests it made, as Gitea
// does.
func (s *fakeGitea) RequestReviewers(w http.ResponseWriter, r *http.Request, p *fakePull) {
	var in forgetest.ReviewRequest
	json.NewDecoder(r.Body).Decode(&in)
	p.Request(in)
	var out []any
	for _, u := range in.Reviewers {
		out = append(out, map[string]any{"id": s.NewID(), "user": s.user(u), "team": nil, "state": "REQUEST_REVIEW", "body": "", "dismissed": false})
	}
	writeJSON(w, http.StatusCreated, out)
}

// ListReviews sets X-Total-Count and no Link header, as ListPullReviews
// does.
func (s *fakeGitea) ListReviews(w http.ResponseWriter, r *http.Request) {
	s.page(w, r, s.ReviewList(r), false)
}

func (s *fakeGitea) listLabels(w http.ResponseWriter, r *http.Request) {
	items := []any{}
	for _, l := range s.labels {
		items = append(items, s.labelJSON(l, false))
	}
	s.page(w, r, items, true)
}

func (s *fakeGitea) listOrgLabels(w http.ResponseWriter, r *http.Request) {
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
	l := fakeLabel{ID: s.NewID(), Name: in.Name, Color: in.Color}
	s.labels = append(s.labels, l)
	writeJSON(w, http.StatusCreated, s.labelJSON(l, false))
}

// AddLabels takes label ids only, as Gitea before 1.20 did.
func (s *fakeGitea) AddLabels(w http.ResponseWriter, r *http.Request, p *fakePull) {
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

func (s *fakeGitea) commentJSON(c *forgetest.Comment) map[string]any {
	return map[string]any{"id": c.ID, "html_url": "http://gitea.example/acme/svc/pulls/1#issuecomment-" + strconv.FormatInt(c.ID, 10),
		"user": s.user(s.Author), "original_author": "", "original_author_id": 0, "body": c.Body, "assets": []any{},
		"created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}
}

// ListComments returns every comment: Gitea does not page this list.
func (s *fakeGitea) ListComments(w http.ResponseWriter, r *http.Request) {
	items := s.CommentList(r)
	w.Header().Set("X-Total-Count", strconv.Itoa(len(items)))
	writeJSON(w, http.StatusOK, items)
}

func (s *fakeGitea) CreateStatus(w http.ResponseWriter, r *http.Request) {
	var in map[string]any
	json.NewDecoder(r.Body).Decode(&in)
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "status": in["state"], "target_url": in["target_url"],
		"description": in["description"], "context": in["context"], "creator": s.user(s.Author),
		"created_at": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339), "updated_at": "2026-01-01T00:00:00Z"})
}

func (s *fakeGitea) listTeams(w http.ResponseWriter, r *http.Request) {
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
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	user := r.PathValue("user")
	if slices.Contains(s.members[id], user) {
		writeJSON(w, http.StatusOK, s.user(user))
		return
	}
	s.NotFound(w)
}

// commitPull answers GET .../commits/{sha}/pull as Gitea does: the pull
// request whose merge commit is sha, else 404.
func (s *fakeGitea) commitPull(w http.ResponseWriter, r *http.Request) {
	for _, p := range s.Pulls {
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
func (s *fakeGitea) pullHeadRef(w http.ResponseWriter, r *http.Request, p *fakePull) {
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

// timeline answers GET .../issues/{number}/timeline: the pull request's
// opening comment and, once closed, a "close" event by who closed it.
func (s *fakeGitea) timeline(w http.ResponseWriter, r *http.Request, p *fakePull) {
	items := []any{map[string]any{"id": 1, "type": "comment", "user": s.user(s.AuthorOf(p)), "body": "opened"}}
	if p.State == "closed" && p.ClosedBy != "" {
		items = append(items, map[string]any{"id": 2, "type": "close", "user": s.user(p.ClosedBy), "body": ""})
	}
	s.page(w, r, items, true)
}
