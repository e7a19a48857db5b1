package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
)

// DefaultBaseURL is GitHub's API root.
const DefaultBaseURL = "https://api.github.com/"

// Options configure a Forge.
type Options struct {
	// BaseURL is the API root; empty means DefaultBaseURL. GitHub
	// Enterprise serves it at https://host/api/v3/, Gitea at
	// https://host/api/v1/. It must be https, or http to a loopback
	// address.
	BaseURL string
	// WebURL is the root that clone URLs start with; empty means derived
	// from BaseURL (api.github.com serves github.com; otherwise BaseURL
	// without its api/v3/ or api/v1/ suffix). Repository arguments on
	// any other host are refused.
	WebURL string
	// Token authenticates API calls and, through git's credential helper
	// (see git.Git.TokenVariable), HTTPS pushes. It is never logged, put
	// into a URL or an error.
	Token string
	// Git pushes branches for CreatePullRequest when the request names a
	// clone (PullRequestRequest.Dir). The forge uses a copy that holds
	// Token in the git token variable; nil means requests must name
	// already pushed branches.
	Git *git.Git
	// PushURL maps a repository's clone URL to the URL its branches are
	// pushed to; nil means the clone URL itself. Tests point it at a
	// local repository.
	PushURL func(repository string) string
	// HTTPClient sends API requests; its transport is wrapped with the
	// budget and the token. Nil means a client with
	// http.DefaultTransport. A client Timeout also bounds the time a
	// request waits for the budget.
	HTTPClient *http.Client
	// Budget is the request allowance shared by every Forge of the same
	// account; nil means a budget of this Forge's own with the defaults.
	Budget *Budget
	// Dialect says how the forge differs from GitHub; nil means GitHub.
	Dialect *Dialect
	// Logger receives what the forge did; nil means no logging.
	Logger *slog.Logger
	// Now and Sleep are the clock and the wait of the budget made when
	// Budget is nil; nil means the real ones.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Forge opens and follows pull requests through the GitHub REST API, or
// an API shaped like it (see Dialect).
type Forge struct {
	name    string
	dialect Dialect
	api     *API
	web     *url.URL
	token   string
	git     *git.Git
	pushURL func(string) string
	log     *slog.Logger
}

var _ forge.Hub = (*Forge)(nil)

// New returns a forge configured by opts.
func New(opts Options) (*Forge, error) {
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	apiURL, err := rootURL("API", base)
	if err != nil {
		return nil, err
	}
	web := webRoot(apiURL)
	if opts.WebURL != "" {
		if web, err = rootURL("web", opts.WebURL); err != nil {
			return nil, err
		}
	}
	if strings.ContainsAny(opts.Token, " \t\r\n") {
		return nil, errors.New("forge token contains white space")
	}

	d := Dialect{}
	if opts.Dialect != nil {
		d = *opts.Dialect
	}
	if d.Name == "" {
		d.Name = "github"
	}
	if d.AuthScheme == "" {
		d.AuthScheme = "Bearer"
	}
	if d.PageSizeParam == "" {
		d.PageSizeParam = "per_page"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	budget := opts.Budget
	if budget == nil {
		budget = NewBudget(BudgetOptions{Logger: log, Now: opts.Now, Sleep: opts.Sleep})
	}

	hc := &http.Client{}
	if opts.HTTPClient != nil {
		c := *opts.HTTPClient
		hc = &c
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	auth := ""
	if opts.Token != "" {
		auth = d.AuthScheme + " " + opts.Token
	}
	// Reads are conditional (a 304 costs no rate limit); each one the
	// forge answers, 304s included, goes through the budget.
	hc.Transport = newConditional(budget.Transport(&authTransport{scheme: apiURL.Scheme, host: apiURL.Host, auth: auth, next: next}))
	client := gh.NewClient(hc)
	client.BaseURL = apiURL
	client.UploadURL = apiURL

	return &Forge{
		name:    d.Name,
		dialect: d,
		api:     &API{client: client, pageSize: d.PageSizeParam, budget: budget},
		web:     web,
		token:   opts.Token,
		git:     withToken(opts.Git, opts.Token, web),
		pushURL: opts.PushURL,
		log:     log,
	}, nil
}

// rootURL parses an API or web root: https, or http to a loopback
// address, with no credentials, ending in a slash.
func rootURL(kind, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("forge %s URL: %w", kind, err)
	}
	switch {
	case u.Host == "":
		return nil, fmt.Errorf("forge %s URL %q has no host", kind, git.Redact(raw))
	case u.User != nil:
		return nil, fmt.Errorf("forge %s URL %s carries credentials: use the token", kind, git.Redact(raw))
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return nil, fmt.Errorf("forge %s URL %s: use https (http only to a loopback address)", kind, git.Redact(raw))
	}
	u.RawQuery, u.Fragment = "", ""
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// withToken is a copy of g whose environment holds token in g's token
// variable, so that git's credential helper hands it to HTTPS remotes at
// the forge's web origin, and to no other.
func withToken(g *git.Git, token string, web *url.URL) *git.Git {
	if g == nil || token == "" {
		return g
	}
	c := *g
	c.TokenOrigins = nil
	if o, err := git.Origin(web.String()); err == nil {
		c.TokenOrigins = []string{o}
	}
	name := c.TokenVariable()
	base := c.Env
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+1)
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			env = append(env, kv)
		}
	}
	c.Env = append(env, name+"="+token)
	return &c
}

// Name is the dialect's name: "github" unless a dialect says otherwise.
func (f *Forge) Name() string { return f.name }

// fail wraps err with what was being done, with the token and any URL
// credentials removed from the message.
func (f *Forge) fail(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...) + ": " + err.Error()
	msg = git.Redact(msg)
	if len(f.token) >= 4 {
		msg = strings.ReplaceAll(msg, f.token, "REDACTED")
	}
	return &opError{msg: msg, err: err}
}

func (f *Forge) repository(raw string) (ownerRepo, error) {
	r, err := parseRepository(f.web, raw)
	if err != nil {
		return ownerRepo{}, f.fail(err, "%s forge", f.name)
	}
	return r, nil
}

// pull is a pull request as GitHub and Gitea report it.
type pull struct {
	Number             int        `json:"number"`
	State              string     `json:"state"`
	Title              string     `json:"title"`
	Body               string     `json:"body"`
	HTMLURL            string     `json:"html_url"`
	Merged             bool       `json:"merged"`
	MergedAt           *time.Time `json:"merged_at"`
	User               *account   `json:"user"`
	Head               branchRef  `json:"head"`
	Base               branchRef  `json:"base"`
	Labels             []label    `json:"labels"`
	RequestedReviewers []account  `json:"requested_reviewers"`
	RequestedTeams     []team     `json:"requested_teams"`
	// RequestedReviewersTeams is Gitea's name for RequestedTeams.
	RequestedReviewersTeams []team `json:"requested_reviewers_teams"`
	// MergeCommitSHA is, once merged, the commit the merge made on the
	// base branch (with a rebase merge, the last one).
	MergeCommitSHA string `json:"merge_commit_sha"`
	Draft          bool   `json:"draft"`
	// Mergeable is null while the forge works it out.
	Mergeable *bool `json:"mergeable"`
	// MergeableState is GitHub's verdict (clean, dirty, behind,
	// blocked, unstable, unknown, draft); Gitea has none.
	MergeableState string `json:"mergeable_state"`
	// MergeBase is Gitea's: the commit of the base the head builds on.
	MergeBase string `json:"merge_base"`
}

type account struct {
	Login string `json:"login"`
}

type branchRef struct {
	Ref  string `json:"ref"`
	SHA  string `json:"sha"`
	Repo *struct {
		FullName string `json:"full_name"`
	} `json:"repo"`
}

type label struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

type team struct {
	Name string `json:"name"`
	Slug string `json:"slug"`
}

func (p *pull) state() string {
	switch {
	case p.State == forge.StateOpen:
		return forge.StateOpen
	case p.Merged || p.MergedAt != nil:
		return forge.StateMerged
	default:
		return forge.StateClosed
	}
}

// from reports whether p proposes branch head of r (into base, unless
// base is empty).
func (p *pull) from(r ownerRepo, head, base string) bool {
	return p.Head.Ref == head && p.Head.Repo != nil && strings.EqualFold(p.Head.Repo.FullName, r.String()) &&
		(base == "" || p.Base.Ref == base)
}

func (p *pull) labelNames() []string {
	names := make([]string, 0, len(p.Labels))
	for _, l := range p.Labels {
		names = append(names, l.Name)
	}
	return names
}

func (p *pull) neutral() *forge.PullRequest {
	pr := &forge.PullRequest{
		URL: p.HTMLURL, Number: p.Number, Branch: p.Head.Ref, Commit: p.Head.SHA, State: p.state(),
		Base: p.Base.Ref, HeadSHA: p.Head.SHA, Title: p.Title, Body: p.Body, Labels: p.labelNames(),
	}
	if p.User != nil {
		pr.Author = p.User.Login
	}
	return pr
}

// CreatePullRequest pushes req.Head from the clone req.Dir (when set) to
// the repository, moving the branch even if that rewrites it but only if
// nobody else moved it meanwhile, then returns the open pull request from
// that branch, opening one if there is none and updating its title and
// body if they changed. Labels the pull request lacks are added and
// reviewers not yet asked (or, on an existing pull request, who have not
// reviewed) are requested; "org/team" entries request a team of the
// repository's organization.
func (f *Forge) CreatePullRequest(ctx context.Context, req forge.PullRequestRequest) (*forge.PullRequest, error) {
	r, err := f.repository(req.Repository)
	if err != nil {
		return nil, err
	}
	if err := git.CheckBranch(req.Head); err != nil {
		return nil, fmt.Errorf("open pull request on %s: head: %w", r, err)
	}
	if err := git.CheckBranch(req.Base); err != nil {
		return nil, fmt.Errorf("open pull request %s on %s: base: %w", req.Head, r, err)
	}
	head, fresh := "", false
	if req.Dir != "" {
		if head, fresh, err = f.push(ctx, req); err != nil {
			return nil, f.fail(err, "open pull request %s on %s", req.Head, r)
		}
	}
	p, created, err := f.ensurePull(ctx, r, req, fresh)
	if err != nil {
		return nil, f.fail(err, "open pull request %s on %s", req.Head, r)
	}
	if err := f.ensureLabels(ctx, r, p, req.Labels); err != nil {
		return nil, f.fail(err, "label pull request %d on %s", p.Number, r)
	}
	if err := f.ensureReviewers(ctx, r, p, req.Reviewers, created); err != nil {
		return nil, f.fail(err, "request reviewers of pull request %d on %s", p.Number, r)
	}
	pr := p.neutral()
	if head != "" {
		// The forge may report the head it saw before the push.
		pr.Commit, pr.HeadSHA = head, head
	}
	return pr, nil
}

// push pushes req.Head of req.Dir and returns the commit pushed, and
// whether the push made the branch (it did not exist before).
func (f *Forge) push(ctx context.Context, req forge.PullRequestRequest) (string, bool, error) {
	if f.git == nil {
		return "", false, fmt.Errorf("push branch %s: the %s forge has no git runner", req.Head, f.name)
	}
	target := req.Repository
	if f.pushURL != nil {
		target = f.pushURL(req.Repository)
	}
	head, err := f.git.Proposed(ctx, req.Dir, req.Commit, req.Head)
	if err != nil {
		return "", false, fmt.Errorf("push branch %s: %w", req.Head, err)
	}
	ref := "refs/heads/" + req.Head
	// Nearly every push makes a new branch: push on the lease that it
	// does not exist, and ask the forge for the branch only when that
	// fails (a run carried out again, a branch left by an earlier run).
	// That saves a round trip per repository, on the forge as well.
	created, pushErr := f.git.PushCreated(ctx, req.Dir, target, git.RefUpdate{Src: head, Dst: ref, Lease: true})
	if pushErr == nil {
		// Up to date with it counts as success too, but not as made.
		return head, slices.Contains(created, ref), nil
	}
	refs, err := f.git.LsRemote(ctx, target, ref)
	if err != nil {
		return "", false, fmt.Errorf("push branch %s: %w", req.Head, pushErr)
	}
	switch refs[ref] {
	case head:
		return head, false, nil
	case "":
		// Not for want of the lease: the push failed on its own.
		return "", false, fmt.Errorf("push branch %s: %w", req.Head, pushErr)
	}
	if err := forge.OwnBranch(req, refs[ref], func() (string, error) {
		who, err := f.git.Committer(ctx, target, ref)
		return who.Email, err
	}); err != nil {
		return "", false, err
	}
	update := git.RefUpdate{Src: head, Dst: ref, Lease: true, Expect: refs[ref]}
	if err := f.git.Push(ctx, req.Dir, target, update); err != nil {
		return "", false, fmt.Errorf("push branch %s: %w", req.Head, err)
	}
	return head, false, nil
}

// title is how req's title reads on the forge.
func (f *Forge) title(req forge.PullRequestRequest) string {
	if req.Draft && f.dialect.DraftTitle != nil {
		return f.dialect.DraftTitle(req.Title)
	}
	return req.Title
}

// ensurePull returns the open pull request from req.Head, creating it or
// updating its title and body. fresh says this push made the head branch:
// then a pull request is opened at once, and looked for only when the
// forge answers that one is open already (one that outlived its branch),
// a request less per repository.
func (f *Forge) ensurePull(ctx context.Context, r ownerRepo, req forge.PullRequestRequest, fresh bool) (*pull, bool, error) {
	var p *pull
	if fresh {
		created, isNew, err := f.createPull(ctx, r, req)
		if err != nil || isNew {
			return created, isNew, err
		}
		p = created
	} else {
		found, err := f.findPull(ctx, r, req.Head, req.Base, forge.StateOpen)
		if err != nil {
			return nil, false, err
		}
		if found == nil {
			return f.createPull(ctx, r, req)
		}
		p = found
	}
	title := p.Title
	// A title in either form is current, so the forge never fights a
	// person over the draft marker.
	if title != req.Title && (f.dialect.DraftTitle == nil || title != f.dialect.DraftTitle(req.Title)) {
		title = f.title(req)
	}
	if title == p.Title && p.Body == req.Body {
		return p, false, nil
	}
	edited, err := f.editPull(ctx, r, p.Number, map[string]string{"title": title, "body": req.Body})
	if err != nil {
		return nil, false, err
	}
	return edited, false, nil
}

func (f *Forge) createPull(ctx context.Context, r ownerRepo, req forge.PullRequestRequest) (*pull, bool, error) {
	body := struct {
		Title string `json:"title"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Body  string `json:"body,omitempty"`
		Draft bool   `json:"draft,omitempty"`
	}{Title: f.title(req), Head: req.Head, Base: req.Base, Body: req.Body, Draft: req.Draft && f.dialect.DraftTitle == nil}
	var p pull
	var found *pull
	err := f.api.Create(ctx, func() error {
		_, err := f.api.Do(ctx, http.MethodPost, r.path("pulls"), body, &p)
		return err
	}, func() (bool, error) {
		var err error
		found, err = f.findPull(ctx, r, req.Head, req.Base, forge.StateOpen)
		return found != nil, err
	})
	if err != nil {
		// Someone (a retry of this very call) opened it meanwhile:
		// GitHub says 422, Gitea 409.
		if s := statusOf(err); s == http.StatusUnprocessableEntity || s == http.StatusConflict {
			if existing, ferr := f.findPull(ctx, r, req.Head, req.Base, forge.StateOpen); ferr == nil && existing != nil {
				return existing, false, nil
			}
		}
		return nil, false, err
	}
	if found != nil {
		// A write left unanswered had opened it.
		return found, false, nil
	}
	f.log.Info("opened pull request", "forge", f.name, "repository", r.String(), "number", p.Number, "url", p.HTMLURL)
	return &p, true, nil
}

func (f *Forge) editPull(ctx context.Context, r ownerRepo, number int, fields map[string]string) (*pull, error) {
	var p pull
	// Fields set to values: the same however often it arrives.
	if _, err := f.api.Do(Idempotent(ctx), http.MethodPatch, r.path("pulls", strconv.Itoa(number)), fields, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// findPull returns the newest pull request in state (open or closed)
// from branch head of r into base (any base when empty), or nil.
func (f *Forge) findPull(ctx context.Context, r ownerRepo, head, base, state string) (*pull, error) {
	q := url.Values{"state": {state}}
	if f.dialect.PullsQuery != nil {
		f.dialect.PullsQuery(q, r.owner, head, base)
	} else {
		q.Set("head", r.owner+":"+head)
		if base != "" {
			q.Set("base", base)
		}
		q.Set("sort", "created")
		q.Set("direction", "desc")
	}
	var found *pull
	err := List(ctx, f.api, r.path("pulls"), q, func(p *pull) bool {
		if p != nil && p.from(r, head, base) {
			found = p
			return false
		}
		return true
	})
	return found, err
}

// ensureLabels adds the labels p lacks and records them on p.
func (f *Forge) ensureLabels(ctx context.Context, r ownerRepo, p *pull, labels []string) error {
	have := map[string]bool{}
	for _, l := range p.Labels {
		have[strings.ToLower(l.Name)] = true
	}
	var missing []string
	for _, l := range labels {
		if l = strings.TrimSpace(l); l != "" && !have[strings.ToLower(l)] {
			have[strings.ToLower(l)] = true
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if f.dialect.AddLabels != nil {
		if err := f.dialect.AddLabels(ctx, f.api, r.owner, r.name, p.Number, missing); err != nil {
			return err
		}
	} else if _, _, err := f.api.client.Issues.AddLabelsToIssue(Idempotent(ctx), r.owner, r.name, p.Number, missing); err != nil {
		return err
	}
	for _, l := range missing {
		p.Labels = append(p.Labels, label{Name: l})
	}
	return nil
}

// ensureReviewers requests the reviewers not yet requested. On an
// existing pull request it also leaves out who already reviewed, so a
// retry never re-requests a review someone gave.
func (f *Forge) ensureReviewers(ctx context.Context, r ownerRepo, p *pull, reviewers []string, created bool) error {
	requested := map[string]bool{}
	for _, a := range p.RequestedReviewers {
		requested[strings.ToLower(a.Login)] = true
	}
	for _, t := range append(p.RequestedTeams, p.RequestedReviewersTeams...) {
		requested["team:"+strings.ToLower(t.Slug)] = true
		requested["team:"+strings.ToLower(t.Name)] = true
	}
	if p.User != nil {
		// Nobody reviews their own pull request.
		requested[strings.ToLower(p.User.Login)] = true
	}
	var users, teams []string
	for _, rv := range reviewers {
		if strings.Contains(rv, "/") {
			org, slug, err := splitTeam(rv)
			if err != nil {
				return err
			}
			if !strings.EqualFold(org, r.owner) {
				return fmt.Errorf("team %s is not in %s's organization", rv, r)
			}
			if key := "team:" + strings.ToLower(slug); !requested[key] {
				requested[key] = true
				teams = append(teams, slug)
			}
			continue
		}
		if err := checkName("user", rv); err != nil {
			return err
		}
		if key := strings.ToLower(rv); !requested[key] {
			requested[key] = true
			users = append(users, rv)
		}
	}
	if len(users) > 0 && !created {
		reviews, err := f.listReviews(ctx, r, p.Number)
		if err != nil {
			return err
		}
		reviewed := map[string]bool{}
		for _, rv := range reviews {
			reviewed[strings.ToLower(rv.User)] = true
		}
		users = slices.DeleteFunc(users, func(u string) bool { return reviewed[strings.ToLower(u)] })
	}
	if len(users) == 0 && len(teams) == 0 {
		return nil
	}
	body := struct {
		Reviewers     []string `json:"reviewers,omitempty"`
		TeamReviewers []string `json:"team_reviewers,omitempty"`
	}{users, teams}
	// GitHub answers with the pull request, Gitea with the review
	// requests: nothing here needs either. Asking again for a review
	// already asked for changes nothing.
	_, err := f.api.Do(Idempotent(ctx), http.MethodPost, r.path("pulls", strconv.Itoa(p.Number), "requested_reviewers"), body, nil)
	return err
}

// FindPullRequest returns the open pull request from branch head of
// repository, else the newest merged or closed one, else nil.
func (f *Forge) FindPullRequest(ctx context.Context, repository, head string) (*forge.PullRequest, error) {
	r, err := f.repository(repository)
	if err != nil {
		return nil, err
	}
	if err := git.CheckBranch(head); err != nil {
		return nil, fmt.Errorf("find pull request on %s: %w", r, err)
	}
	for _, state := range []string{forge.StateOpen, forge.StateClosed} {
		p, err := f.findPull(ctx, r, head, "", state)
		if err != nil {
			return nil, f.fail(err, "find pull request %s on %s", head, r)
		}
		if p != nil {
			return p.neutral(), nil
		}
	}
	return nil, nil
}

// GetPullRequest returns pull request number of repository.
func (f *Forge) GetPullRequest(ctx context.Context, repository string, number int) (*forge.PullRequest, error) {
	r, err := f.repository(repository)
	if err != nil {
		return nil, err
	}
	var p pull
	if _, err := f.api.Do(ctx, http.MethodGet, r.path("pulls", strconv.Itoa(number)), nil, &p); err != nil {
		return nil, f.fail(err, "get pull request %d of %s", number, r)
	}
	return p.neutral(), nil
}

// UpdatePullRequest sets the title and body of pull request number.
func (f *Forge) UpdatePullRequest(ctx context.Context, repository string, number int, title, body string) error {
	r, err := f.repository(repository)
	if err != nil {
		return err
	}
	if _, err := f.editPull(ctx, r, number, map[string]string{"title": title, "body": body}); err != nil {
		return f.fail(err, "update pull request %d of %s", number, r)
	}
	return nil
}

// ClosePullRequest closes pull request number without merging it.
func (f *Forge) ClosePullRequest(ctx context.Context, repository string, number int) error {
	r, err := f.repository(repository)
	if err != nil {
		return err
	}
	if _, err := f.editPull(ctx, r, number, map[string]string{"state": forge.StateClosed}); err != nil {
		return f.fail(err, "close pull request %d of %s", number, r)
	}
	f.log.Info("closed pull request", "forge", f.name, "repository", r.String(), "number", number)
	return nil
}

// review is a pull request review as GitHub and Gitea report it.
type review struct {
	ID          int64      `json:"id"`
	User        *account   `json:"user"`
	State       string     `json:"state"`
	Body        string     `json:"body"`
	CommitID    string     `json:"commit_id"`
	SubmittedAt *time.Time `json:"submitted_at"`
	// Dismissed is Gitea's: it keeps the state a dismissed review had.
	Dismissed bool `json:"dismissed"`
}

// ListReviews returns every review of pull request number, oldest first,
// with states normalised to the forge.Review* constants.
func (f *Forge) ListReviews(ctx context.Context, repository string, number int) ([]forge.Review, error) {
	r, err := f.repository(repository)
	if err != nil {
		return nil, err
	}
	reviews, err := f.listReviews(ctx, r, number)
	if err != nil {
		return nil, f.fail(err, "list reviews of pull request %d of %s", number, r)
	}
	return reviews, nil
}

func (f *Forge) listReviews(ctx context.Context, r ownerRepo, number int) ([]forge.Review, error) {
	var out []forge.Review
	err := List(ctx, f.api, r.path("pulls", strconv.Itoa(number), "reviews"), nil, func(rv review) bool {
		out = append(out, f.neutralReview(rv))
		return true
	})
	return out, err
}

func (f *Forge) neutralReview(rv review) forge.Review {
	state := strings.ToUpper(rv.State)
	if f.dialect.ReviewState != nil {
		state = f.dialect.ReviewState(state)
	}
	if rv.Dismissed {
		state = forge.ReviewDismissed
	}
	out := forge.Review{ID: rv.ID, State: state, Body: rv.Body, CommitID: rv.CommitID}
	if rv.User != nil {
		out.User = rv.User.Login
	}
	if rv.SubmittedAt != nil {
		out.SubmittedAt = rv.SubmittedAt.UTC()
	}
	return out
}

// MergedPullRequest returns the merged pull request of repository whose
// merge commit is commit, with every review of it (as ListReviews), or
// nil when commit did not come from a merged pull request.
func (f *Forge) MergedPullRequest(ctx context.Context, repository, commit string) (*forge.PullRequest, []forge.Review, error) {
	r, err := f.repository(repository)
	if err != nil {
		return nil, nil, err
	}
	if !sha.MatchString(commit) {
		return nil, nil, fmt.Errorf("find the pull request merged as %q in %s: invalid commit", commit, r)
	}
	p, err := f.mergedPull(ctx, r, commit)
	if err != nil {
		return nil, nil, f.fail(err, "find the pull request merged as %s in %s", commit, r)
	}
	if p == nil {
		return nil, nil, nil
	}
	if f.dialect.MergedHead != nil {
		head, err := f.dialect.MergedHead(ctx, f.api, r.owner, r.name, p.Number)
		if err != nil {
			return nil, nil, f.fail(err, "read the head pull request %d of %s was merged at", p.Number, r)
		}
		p.Head.SHA = head
	}
	reviews, err := f.listReviews(ctx, r, p.Number)
	if err != nil {
		return nil, nil, f.fail(err, "list reviews of pull request %d of %s", p.Number, r)
	}
	return p.neutral(), reviews, nil
}

// mergedPull returns the merged pull request whose merge commit is
// commit, or nil.
func (f *Forge) mergedPull(ctx context.Context, r ownerRepo, commit string) (*pull, error) {
	// A commit also belongs to the pull requests whose branches hold it;
	// only the one merged as this very commit counts.
	mergedAs := func(p *pull) bool {
		return p != nil && p.state() == forge.StateMerged && p.MergeCommitSHA == commit
	}
	if f.dialect.MergedPullPath != nil {
		var p pull
		_, err := f.api.Do(ctx, http.MethodGet, f.dialect.MergedPullPath(r.owner, r.name, commit), nil, &p)
		switch {
		case IsNotFound(err):
			return nil, nil
		case err != nil:
			return nil, err
		case !mergedAs(&p):
			return nil, nil
		}
		return &p, nil
	}
	var found *pull
	err := List(ctx, f.api, r.path("commits", commit, "pulls"), nil, func(p *pull) bool {
		if mergedAs(p) {
			found = p
			return false
		}
		return true
	})
	return found, err
}

// UpsertComment edits the comment of pull request number whose body
// starts with marker to body, or makes a new comment when there is none.
func (f *Forge) UpsertComment(ctx context.Context, repository string, number int, marker, body string) error {
	r, err := f.repository(repository)
	if err != nil {
		return err
	}
	if marker == "" || !strings.HasPrefix(body, marker) {
		return fmt.Errorf("comment on pull request %d of %s: the body must start with the marker", number, r)
	}
	type comment struct {
		ID   int64  `json:"id"`
		Body string `json:"body"`
	}
	comments := r.path("issues", strconv.Itoa(number), "comments")
	var found *comment
	find := func() (bool, error) {
		found = nil
		err := List(ctx, f.api, comments, nil, func(c comment) bool {
			// Starts with it: a reply quoting the marker is someone
			// else's comment.
			if strings.HasPrefix(strings.TrimLeft(c.Body, " \t\r\n"), marker) {
				found = &c
				return false
			}
			return true
		})
		return found != nil, err
	}
	if _, err := find(); err != nil {
		return f.fail(err, "list comments of pull request %d of %s", number, r)
	}
	in := map[string]string{"body": body}
	if found == nil {
		post := func() error {
			_, err := f.api.Do(ctx, http.MethodPost, comments, in, nil)
			return err
		}
		if err := f.api.Create(ctx, post, find); err != nil {
			return f.fail(err, "comment on pull request %d of %s", number, r)
		}
	}
	if found != nil && found.Body != body {
		// The body set: the same however often it arrives.
		if _, err := f.api.Do(Idempotent(ctx), http.MethodPatch, r.path("issues", "comments", strconv.FormatInt(found.ID, 10)), in, nil); err != nil {
			return f.fail(err, "edit comment %d on pull request %d of %s", found.ID, number, r)
		}
	}
	return nil
}

var sha = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// maxDescription is the longest status description GitHub accepts.
const maxDescription = 140

// SetCommitStatus sets the status s.Context of commit s.SHA.
func (f *Forge) SetCommitStatus(ctx context.Context, repository string, s forge.CommitStatus) error {
	r, err := f.repository(repository)
	if err != nil {
		return err
	}
	switch s.State {
	case forge.StatusPending, forge.StatusSuccess, forge.StatusFailure, forge.StatusError:
	default:
		return fmt.Errorf("set status %q on %s: invalid state %q", s.Context, r, s.State)
	}
	if !sha.MatchString(s.SHA) {
		return fmt.Errorf("set status %q on %s: invalid commit %q", s.Context, r, s.SHA)
	}
	status := &gh.RepoStatus{State: gh.String(s.State), Context: gh.String(s.Context)}
	if s.Description != "" {
		desc := []rune(s.Description)
		if len(desc) > maxDescription {
			desc = append(desc[:maxDescription-1], '…')
		}
		status.Description = gh.String(string(desc))
	}
	if s.TargetURL != "" {
		status.TargetURL = gh.String(s.TargetURL)
	}
	// Each call adds a status, and the newest of a context is the
	// commit's: one sent twice leaves it as one sent once.
	if _, _, err := f.api.client.Repositories.CreateStatus(Idempotent(ctx), r.owner, r.name, s.SHA, status); err != nil {
		return f.fail(err, "set status %q on %s of %s", s.Context, s.SHA, r)
	}
	return nil
}

// IsMember reports whether user is an active member of team ("org/team").
func (f *Forge) IsMember(ctx context.Context, team, user string) (bool, error) {
	org, slug, err := splitTeam(team)
	if err != nil {
		return false, err
	}
	if err := checkName("user", user); err != nil {
		return false, err
	}
	var member bool
	if f.dialect.IsMember != nil {
		member, err = f.dialect.IsMember(ctx, f.api, org, slug, user)
	} else {
		var m *gh.Membership
		m, _, err = f.api.client.Teams.GetTeamMembershipBySlug(ctx, org, slug, user)
		switch {
		case IsNotFound(err):
			member, err = false, nil
		case err == nil:
			member = m.GetState() == "active"
		}
	}
	if err != nil {
		return false, f.fail(err, "check membership of %s in %s", user, team)
	}
	return member, nil
}
