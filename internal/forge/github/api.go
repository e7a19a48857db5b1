package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v60/github"
)

// Dialect is how a forge that speaks GitHub's REST API with an accent
// (Gitea, Forgejo) differs from GitHub. The zero value, and every nil
// field, means GitHub's behaviour; calls a dialect does not override go
// to the same paths with the same JSON on either forge.
type Dialect struct {
	// Name is what Forge.Name returns; empty means "github".
	Name string
	// AuthScheme is the scheme of the Authorization header; empty means
	// "Bearer".
	AuthScheme string
	// PageSizeParam is the query parameter naming the page size; empty
	// means "per_page" (Gitea: "limit").
	PageSizeParam string
	// PullsQuery sets the query that lists the pull requests of owner's
	// repository that may come from branch head into base (base may be
	// empty), newest first; q already holds "state". The forge checks
	// head and base of every pull request listed itself. Nil means
	// GitHub's head=owner:head, base=base, sort=created,
	// direction=desc.
	PullsQuery func(q url.Values, owner, head, base string)
	// ReviewState maps a review state the forge reports to a
	// forge.Review* constant; nil means GitHub's names as they are.
	ReviewState func(state string) string
	// DraftTitle, when set, marks a draft pull request by its title
	// (Gitea's "WIP:" prefix) instead of GitHub's draft flag.
	DraftTitle func(title string) string
	// AddLabels adds labels, by name, to issue or pull request number of
	// owner/repo; nil means GitHub's POST .../issues/{number}/labels
	// with the names.
	AddLabels func(ctx context.Context, api *API, owner, repo string, number int, labels []string) error
	// IsMember reports whether user is a member of team in org; nil
	// means GitHub's team membership by slug (state active).
	IsMember func(ctx context.Context, api *API, org, team, user string) (bool, error)
	// MergedPullPath is the path (relative to the API root, escaped) of
	// the one pull request of owner/repo merged as commit sha, which the
	// forge answers with 404 when there is none (Gitea's
	// .../commits/{sha}/pull). Nil means GitHub's list of the pull
	// requests associated with the commit, .../commits/{sha}/pulls,
	// searched for the merged one whose merge commit is sha.
	MergedPullPath func(owner, repo, sha string) string
	// MergedHead returns the head commit pull request number of
	// owner/repo was merged at, for a forge whose pull request reports
	// its head branch's current commit instead, which the branch's
	// owner may move after the merge (Gitea). Nil means GitHub's
	// head.sha, which a merged pull request keeps.
	MergedHead func(ctx context.Context, api *API, owner, repo string, number int) (string, error)
	// ClosedBy returns the login of who closed issue or pull request
	// number of owner/repo, "" while it is open; nil means GitHub's
	// closed_by of GET .../issues/{number}.
	ClosedBy func(ctx context.Context, api *API, owner, repo string, number int) (string, error)
	// NoCodeSearch: the forge has no code search (Gitea's needs an
	// indexer its operator may not run, and searches one repository).
	NoCodeSearch bool
	// NoCheckRuns: the forge has commit statuses only, no check runs
	// (Gitea, whose Actions report as commit statuses).
	NoCheckRuns bool
	// MergePull merges pull request number of owner/repo with method
	// (forge.MergeMethods), provided its head is still head (when not
	// empty), deleting its branch after when deleteBranch is set; nil
	// means GitHub's PUT .../pulls/{number}/merge (and the branch deleted
	// after by the forge). Its errors carry the forge's HTTP status.
	MergePull func(ctx context.Context, api *API, owner, repo string, number int, method, head string, deleteBranch bool) error
	// BranchPath is the path of branch of owner/repo to DELETE it; nil
	// means GitHub's .../git/refs/heads/{branch}.
	BranchPath func(owner, repo, branch string) string
}

// API calls a forge's REST API through the Forge's client: its root URL,
// token, budget and error decoding. Dialects use it for the calls they
// make differently.
type API struct {
	client   *gh.Client
	pageSize string
	budget   *Budget
}

// Do sends method to path (relative to the API root, already escaped,
// with or without a query) with in encoded as the JSON body (nil for
// none), and decodes the answer into out (nil to discard it). A status
// outside 2xx is an error; see IsNotFound.
func (a *API) Do(ctx context.Context, method, path string, in, out any) (*gh.Response, error) {
	req, err := a.client.NewRequest(method, path, in)
	if err != nil {
		return nil, err
	}
	return a.client.Do(ctx, req, out)
}

// Create makes something the forge keeps no idempotency key for (a pull
// request, a comment, a label) with post, which sends the write once.
// When the outcome of a post is unknown (the forge answered with a server
// error, or the connection broke: the forge may have acted), Create backs
// off as the budget does and asks find whether what post makes exists,
// and posts again only when find says it does not. It gives up after the
// budget's retries with an error wrapping ErrUnavailable.
func (a *API) Create(ctx context.Context, post func() error, find func() (bool, error)) error {
	b := a.budget
	for attempt := 0; ; attempt++ {
		err := post()
		if err == nil || !outcomeUnknown(ctx, err) {
			return err
		}
		if attempt >= b.opts.MaxRetries {
			return fmt.Errorf("%w: no answer after %d attempts: %w", ErrUnavailable, attempt+1, err)
		}
		if err := b.sleep(ctx, b.backoff(b.opts.Backoff, attempt, b.opts.MaxBackoff)); err != nil {
			return err
		}
		found, ferr := find()
		if ferr != nil {
			return fmt.Errorf("look for what an unanswered write made (%v): %w", err, ferr)
		}
		if found {
			return nil
		}
	}
}

// outcomeUnknown reports whether err leaves open whether the forge acted
// on a write: a server error, or a connection that failed, rather than a
// refusal or the caller giving up.
func outcomeUnknown(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, ErrRateLimited) {
		return false
	}
	if s := statusOf(err); s != 0 {
		return s >= http.StatusInternalServerError
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

// maxPages bounds a listing, so a forge that ignores the page parameter
// cannot keep one going for ever.
const maxPages = 1000

// pageSize is what a listing asks for; GitHub caps it at 100, Gitea at
// its MAX_RESPONSE_ITEMS (50 by default).
const pageSize = 100

// List calls visit with every item of the list at path (relative to the
// API root, already escaped), page by page, until visit returns false.
// The next page comes from the Link header (GitHub, most Gitea lists)
// or, failing that, from X-Total-Count (Gitea lists without links).
func List[T any](ctx context.Context, a *API, path string, query url.Values, visit func(T) bool) error {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set(a.pageSize, strconv.Itoa(pageSize))
	page, seen := 1, 0
	for range maxPages {
		q.Set("page", strconv.Itoa(page))
		var items []T
		resp, err := a.Do(ctx, http.MethodGet, path+"?"+q.Encode(), nil, &items)
		if err != nil {
			return err
		}
		for _, it := range items {
			seen++
			if !visit(it) {
				return nil
			}
		}
		total, counted := totalCount(resp)
		switch {
		case resp.NextPage > page:
			page = resp.NextPage
		case counted && len(items) > 0 && seen < total:
			page++
		default:
			return nil
		}
	}
	return fmt.Errorf("list %s: more than %d pages", path, maxPages)
}

func totalCount(resp *gh.Response) (int, bool) {
	if resp == nil || resp.Response == nil {
		return 0, false
	}
	n, err := strconv.Atoi(resp.Header.Get("X-Total-Count"))
	return n, err == nil
}

// IsNotFound reports whether err is the forge answering 404.
func IsNotFound(err error) bool {
	return statusOf(err) == http.StatusNotFound
}

// statusOf is the HTTP status of an API error, or 0.
func statusOf(err error) int {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

// PathEscape escapes each segment of an API path built from names.
func PathEscape(segments ...string) string {
	escaped := make([]string, len(segments))
	for i, s := range segments {
		escaped[i] = url.PathEscape(s)
	}
	return strings.Join(escaped, "/")
}

// authTransport sets the Authorization header on requests to the API's
// own scheme and host, never on a redirect elsewhere.
type authTransport struct {
	scheme, host string
	auth         string
	next         http.RoundTripper
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.auth == "" || req.URL.Scheme != t.scheme || !strings.EqualFold(req.URL.Host, t.host) {
		return t.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", t.auth)
	return t.next.RoundTrip(r)
}

// opError is an error of a forge operation: a message that names the
// operation and carries no token, wrapping the cause for errors.Is/As.
type opError struct {
	msg string
	err error
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.err }
