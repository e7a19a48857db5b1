package forgetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Call is one request a Server received.
type Call struct {
	Method, Path, Query string
	Body                []byte
}

// Pull is a pull request as a Server keeps it. A fake leaves the fields
// its forge does not have at their zero value.
type Pull struct {
	Number                  int
	Title, Body, Head, Base string
	State                   string
	Merged                  bool
	// Draft is GitHub's draft flag; Gitea derives drafts from the title.
	Draft bool
	// Labels are label names, as GitHub adds them.
	Labels []string
	// LabelIDs are label ids, as Gitea adds them.
	LabelIDs         []int64
	Reviewers, Teams []string
	// Created is when the pull request was opened; AddPull sets it when
	// it is zero.
	Created time.Time
	// Author opened the pull request; empty means the token's user.
	Author string
	// HeadSHA is the head commit; empty means the Server's HeadSHA(Head).
	HeadSHA string
	// MergeSHA is merge_commit_sha: the merge commit once merged, on
	// GitHub a test merge commit before.
	MergeSHA string
	// MergedHead is Gitea's refs/pull/{number}/head, the head the pull
	// request was merged at; empty means the head commit.
	MergedHead string
	// ClosedBy is who closed it; closing it through the API sets it to
	// the token's user.
	ClosedBy string
}

// Comment is an issue comment on a pull request.
type Comment struct {
	ID   int64
	Body string
}

// API describes how the forge a Server fakes answers.
type API struct {
	// AuthScheme precedes the token in the Authorization header.
	AuthScheme string
	// ContentType is the Content-Type of JSON answers.
	ContentType string
	// Unauthorized is the body of the 401 answer to a request without
	// the token; Missing is the body of 404 answers.
	Unauthorized, Missing any
	// Author is the login of the token's user.
	Author string
	// MaxPerPage caps the page size a request may ask for; tests lower
	// it to make short lists span pages.
	MaxPerPage int
	// FirstID is where NewID counts up from.
	FirstID int64
	// EditStatus is the status of the answer to PATCH .../pulls/{number}.
	EditStatus int
	// PullJSON shows a pull request as GET .../pulls/{number} does.
	PullJSON func(p *Pull) map[string]any
	// CommentJSON shows an issue comment.
	CommentJSON func(c *Comment) map[string]any
}

// Server is the part of a fake forge API that Gitea and GitHub share. A
// fake embeds the Server New returns, implements Routes and serves
// Handler of Mux with its own routes added.
type Server struct {
	API
	// Token is the token requests must carry.
	Token string
	// HeadSHA reports the commit of a branch in the repository.
	HeadSHA func(branch string) string
	// Before, when set, may answer a request itself and return true.
	Before func(w http.ResponseWriter, r *http.Request) bool
	// LoseAnswer, when set, may return a status (such as 502) to answer
	// an authorised request with after serving it, as a proxy that gave
	// up waiting for the forge does: the request takes effect, and the
	// client learns nothing of it. 0 answers as usual. It runs with Mu
	// held.
	LoseAnswer func(r *http.Request) int

	// Mu guards the fields below; Handler holds it while a route
	// handler runs.
	Mu    sync.Mutex
	Calls []Call
	Pulls []*Pull
	// Reviews are the reviews of each pull request, by number, as the
	// forge shows them.
	Reviews map[int][]map[string]any
	// Comments are the comments on each pull request, by number.
	Comments map[int][]*Comment
	// LastID is the last id NewID gave out.
	LastID int64
}

// New returns a Server of api that accepts token.
func New(token string, api API) *Server {
	return &Server{
		API: api, Token: token, LastID: api.FirstID,
		Reviews: map[int][]map[string]any{}, Comments: map[int][]*Comment{},
	}
}

// Routes are a fake's own handlers for the routes of acme/svc that Gitea
// and GitHub share; RequestReviewers and AddLabels get the pull request
// the route names.
type Routes interface {
	ListPulls(w http.ResponseWriter, r *http.Request)
	CreatePull(w http.ResponseWriter, r *http.Request)
	RequestReviewers(w http.ResponseWriter, r *http.Request, p *Pull)
	ListReviews(w http.ResponseWriter, r *http.Request)
	AddLabels(w http.ResponseWriter, r *http.Request, p *Pull)
	ListComments(w http.ResponseWriter, r *http.Request)
	CreateStatus(w http.ResponseWriter, r *http.Request)
}

// Mux routes the requests for acme/svc that Gitea and GitHub share to the
// Server and to routes; the fake adds the routes only its forge has.
func (s *Server) Mux(routes Routes) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/acme/svc/pulls", routes.ListPulls)
	mux.HandleFunc("POST /repos/acme/svc/pulls", routes.CreatePull)
	mux.HandleFunc("GET /repos/acme/svc/pulls/{number}", s.WithPull(s.getPull))
	mux.HandleFunc("PATCH /repos/acme/svc/pulls/{number}", s.WithPull(s.editPull))
	mux.HandleFunc("POST /repos/acme/svc/pulls/{number}/requested_reviewers", s.WithPull(routes.RequestReviewers))
	mux.HandleFunc("GET /repos/acme/svc/pulls/{number}/reviews", routes.ListReviews)
	mux.HandleFunc("POST /repos/acme/svc/issues/{number}/labels", s.WithPull(routes.AddLabels))
	mux.HandleFunc("GET /repos/acme/svc/issues/{number}/comments", routes.ListComments)
	mux.HandleFunc("POST /repos/acme/svc/issues/{number}/comments", s.createComment)
	mux.HandleFunc("PATCH /repos/acme/svc/issues/comments/{id}", s.editComment)
	mux.HandleFunc("POST /repos/acme/svc/statuses/{sha}", routes.CreateStatus)
	return mux
}

// Handler serves api after what every request goes through: it is
// recorded in Calls, Before may answer it, a request without the token is
// refused with 401 and Unauthorized, and LoseAnswer may replace the
// answer. api serves one request at a time, with Mu held.
func (s *Server) Handler(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.Mu.Lock()
		s.Calls = append(s.Calls, Call{r.Method, r.URL.Path, r.URL.RawQuery, body})
		s.Mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if s.Before != nil && s.Before(w, r) {
			return
		}
		if r.Header.Get("Authorization") != s.AuthScheme+s.Token {
			s.JSON(w, http.StatusUnauthorized, s.Unauthorized)
			return
		}
		s.Mu.Lock()
		defer s.Mu.Unlock()
		if s.LoseAnswer != nil {
			if status := s.LoseAnswer(r); status != 0 {
				api.ServeHTTP(httptest.NewRecorder(), r)
				http.Error(w, http.StatusText(status), status)
				return
			}
		}
		api.ServeHTTP(w, r)
	})
}

// WriteJSON answers with status and v as JSON, under contentType.
func WriteJSON(w http.ResponseWriter, contentType string, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// JSON answers with status and v as JSON.
func (s *Server) JSON(w http.ResponseWriter, status int, v any) {
	WriteJSON(w, s.ContentType, status, v)
}

// NotFound answers 404 with Missing.
func (s *Server) NotFound(w http.ResponseWriter) {
	s.JSON(w, http.StatusNotFound, s.Missing)
}

// Count is how many requests had method and path.
func (s *Server) Count(method, path string) int {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	n := 0
	for _, c := range s.Calls {
		if c.Method == method && c.Path == path {
			n++
		}
	}
	return n
}

// Bodies are the request bodies of method and path, decoded; a JSON array
// is under the key "list".
func (s *Server) Bodies(method, path string) []map[string]any {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	var out []map[string]any
	for _, c := range s.Calls {
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

// NewID is the next id of a created object. Callers hold Mu.
func (s *Server) NewID() int64 {
	s.LastID++
	return s.LastID
}

// AddPull numbers p, opens it unless it has a state and keeps it.
func (s *Server) AddPull(p *Pull) *Pull {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.AddPullLocked(p)
}

// AddPullLocked is AddPull for callers that hold Mu.
func (s *Server) AddPullLocked(p *Pull) *Pull {
	p.Number = len(s.Pulls) + 1
	if p.State == "" {
		p.State = "open"
	}
	if p.Created.IsZero() {
		p.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(p.Number) * time.Hour)
	}
	s.Pulls = append(s.Pulls, p)
	return p
}

// WithPull adapts f to a route with {number}: f runs with the pull
// request of that number; without one the answer is NotFound.
func (s *Server) WithPull(f func(w http.ResponseWriter, r *http.Request, p *Pull)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("number"))
		if err != nil || n < 1 || n > len(s.Pulls) {
			s.NotFound(w)
			return
		}
		f(w, r, s.Pulls[n-1])
	}
}

// NewestPulls are the pull requests in state, newest first: "" means
// open, "all" any state. Callers hold Mu.
func (s *Server) NewestPulls(state string) []*Pull {
	if state == "" {
		state = "open"
	}
	var out []*Pull
	for _, p := range slices.Backward(s.Pulls) {
		if state == "all" || p.State == state {
			out = append(out, p)
		}
	}
	return out
}

// OpenPull is the open pull request from head into base (any base when
// base is empty), or nil. Callers hold Mu.
func (s *Server) OpenPull(head, base string) *Pull {
	for _, p := range s.Pulls {
		if p.Head == head && (base == "" || p.Base == base) && p.State == "open" {
			return p
		}
	}
	return nil
}

// HeadCommit is the head commit of p.
func (s *Server) HeadCommit(p *Pull) string {
	if p.HeadSHA == "" && s.HeadSHA != nil {
		return s.HeadSHA(p.Head)
	}
	return p.HeadSHA
}

// AuthorOf is the login of the user who opened p.
func (s *Server) AuthorOf(p *Pull) string {
	if p.Author == "" {
		return s.Author
	}
	return p.Author
}

// MergeCommit is p's merge_commit_sha: null when it has none.
func (s *Server) MergeCommit(p *Pull) any {
	if p.MergeSHA == "" {
		return nil
	}
	return p.MergeSHA
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request, p *Pull) {
	s.JSON(w, http.StatusOK, s.PullJSON(p))
}

// editPull sets the title, body and state the request gives.
func (s *Server) editPull(w http.ResponseWriter, r *http.Request, p *Pull) {
	var in struct{ Title, Body, State *string }
	json.NewDecoder(r.Body).Decode(&in)
	if in.Title != nil {
		p.Title = *in.Title
	}
	if in.Body != nil {
		p.Body = *in.Body
	}
	if in.State != nil {
		if *in.State == "closed" && p.State != "closed" {
			p.ClosedBy = s.Author
		}
		p.State = *in.State
	}
	s.JSON(w, s.EditStatus, s.PullJSON(p))
}

// ReviewRequest is the body of POST .../pulls/{number}/requested_reviewers.
type ReviewRequest struct {
	Reviewers     []string `json:"reviewers"`
	TeamReviewers []string `json:"team_reviewers"`
}

// Request adds the users and teams that in asks for to p's reviewers.
func (p *Pull) Request(in ReviewRequest) {
	p.Reviewers = append(p.Reviewers, in.Reviewers...)
	p.Teams = append(p.Teams, in.TeamReviewers...)
}

// ReviewList is every review of the pull request r names by {number}.
// Callers hold Mu.
func (s *Server) ReviewList(r *http.Request) []any {
	n, _ := strconv.Atoi(r.PathValue("number"))
	items := []any{}
	for _, rv := range s.Reviews[n] {
		items = append(items, rv)
	}
	return items
}

// AddComment adds a comment with body to the pull request number.
func (s *Server) AddComment(number int, body string) *Comment {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.addComment(number, body)
}

func (s *Server) addComment(number int, body string) *Comment {
	c := &Comment{ID: s.NewID(), Body: body}
	s.Comments[number] = append(s.Comments[number], c)
	return c
}

// CommentList is every comment on the pull request r names by {number},
// as CommentJSON shows them. Callers hold Mu.
func (s *Server) CommentList(r *http.Request) []any {
	n, _ := strconv.Atoi(r.PathValue("number"))
	items := []any{}
	for _, c := range s.Comments[n] {
		items = append(items, s.CommentJSON(c))
	}
	return items
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	var in struct{ Body string }
	json.NewDecoder(r.Body).Decode(&in)
	s.JSON(w, http.StatusCreated, s.CommentJSON(s.addComment(n, in.Body)))
}

func (s *Server) editComment(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var in struct{ Body string }
	json.NewDecoder(r.Body).Decode(&in)
	for _, cs := range s.Comments {
		for _, c := range cs {
			if c.ID == id {
				c.Body = in.Body
				s.JSON(w, http.StatusOK, s.CommentJSON(c))
				return
			}
		}
	}
	s.NotFound(w)
}

// Page is the part of a list a request asks for.
type Page struct {
	// Number is the page, from 1; Size is how many items a page holds.
	Number, Size int
	// Start and End bound the page's items in the list.
	Start, End int
	// Last is the number of the last page.
	Last int
}

// PageOf is the page of a list of n items that r asks for with the query
// parameters page and sizeParam: 30 items a page unless sizeParam says
// otherwise, and at most MaxPerPage.
func (s *Server) PageOf(r *http.Request, sizeParam string, n int) Page {
	size, _ := strconv.Atoi(r.URL.Query().Get(sizeParam))
	if size <= 0 {
		size = 30
	}
	size = min(size, s.MaxPerPage)
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	return Page{
		Number: page, Size: size,
		Start: min((page-1)*size, n), End: min(page*size, n),
		Last: (n + size - 1) / size,
	}
}
