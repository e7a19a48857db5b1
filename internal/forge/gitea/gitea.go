package gitea

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/github"
	"github.com/fleetlift/fleetlift/internal/git"
)

// DefaultLabelColor is the color of labels the forge creates.
const DefaultLabelColor = "#ededed"

// WIPPrefix marks a draft pull request: the first of Gitea's default
// WORK_IN_PROGRESS_PREFIXES.
const WIPPrefix = "WIP: "

// Options configure a Gitea forge.
type Options struct {
	// URL is Gitea's root URL (its ROOT_URL), such as
	// https://gitea.example.com/; the API is under api/v1/ and clone
	// URLs start with it. It must be https, or http to a loopback
	// address.
	URL string
	// Token is an access token: it authenticates API calls and HTTPS
	// pushes and is never logged, put into a URL or an error.
	Token string
	// Git pushes branches for CreatePullRequest; see github.Options.
	Git *git.Git
	// PushURL maps a clone URL to the URL branches are pushed to; nil
	// means the clone URL itself.
	PushURL func(repository string) string
	// HTTPClient sends API requests; nil means http.DefaultTransport.
	HTTPClient *http.Client
	// Budget is the request allowance shared by the account's forges;
	// nil means one of this forge's own. Gitea sets no rate limits by
	// default; the budget still spaces requests and retries server
	// errors and a proxy's 429s.
	Budget *github.Budget
	// LabelColor is the color of labels the forge creates; empty means
	// DefaultLabelColor.
	LabelColor string
	// Logger receives what the forge did; nil means no logging.
	Logger *slog.Logger
	// Now and Sleep are the clock and the wait of the budget made when
	// Budget is nil.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Forge is the forge.Hub for Gitea: the GitHub forge speaking Gitea's
// dialect of the same REST API.
type Forge struct {
	*github.Forge
}

var _ forge.Hub = (*Forge)(nil)

// New returns a Gitea forge configured by opts.
func New(opts Options) (*Forge, error) {
	if opts.URL == "" {
		return nil, errors.New("gitea forge: the URL is empty")
	}
	root, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("gitea forge URL: %w", err)
	}
	if !strings.HasSuffix(root.Path, "/") {
		root.Path += "/"
	}
	api := root.JoinPath("api", "v1")
	api.Path += "/"
	if opts.Budget == nil {
		o := BudgetOptions()
		o.Logger, o.Now, o.Sleep = opts.Logger, opts.Now, opts.Sleep
		opts.Budget = github.NewBudget(o)
	}
	f, err := github.New(github.Options{
		BaseURL: api.String(), WebURL: root.String(), Token: opts.Token,
		Git: opts.Git, PushURL: opts.PushURL, HTTPClient: opts.HTTPClient, Budget: opts.Budget,
		Dialect: Dialect(opts.LabelColor), Logger: opts.Logger, Now: opts.Now, Sleep: opts.Sleep,
	})
	if err != nil {
		return nil, fmt.Errorf("gitea forge: %w", err)
	}
	return &Forge{Forge: f}, nil
}

// BudgetOptions are a Gitea account's request budget: Gitea has neither
// GitHub's second between content-creating requests nor its hourly
// allowance (its API is not rate-limited unless its operator sets it up),
// so requests are not spaced, only bounded in number at once; a 429 or
// Retry-After from a Gitea that is limited is still waited out.
func BudgetOptions() github.BudgetOptions {
	return github.BudgetOptions{Rate: -1, WriteRate: -1, MaxInFlight: 8}
}

// Dialect is how Gitea's API differs from GitHub's: "token"
// authorization, "limit" pages, pull requests listed by base branch (the
// list has no head filter), review states REQUEST_CHANGES, COMMENT and
// REQUEST_REVIEW, drafts marked by a WIP prefix, labels added by id
// (created when missing), team membership by team id, and the merged pull
// request of a commit at commits/{sha}/pull with the head it was merged
// at from refs/pull/{number}/head, and who closed a pull request from its
// timeline. labelColor is the color of labels it creates; empty means
// DefaultLabelColor.
func Dialect(labelColor string) *github.Dialect {
	if labelColor == "" {
		labelColor = DefaultLabelColor
	}
	return &github.Dialect{
		Name:          "gitea",
		AuthScheme:    "token",
		PageSizeParam: "limit",
		PullsQuery:    pullsQuery,
		ReviewState:   ReviewState,
		DraftTitle:    DraftTitle,
		AddLabels: func(ctx context.Context, api *github.API, owner, repo string, number int, labels []string) error {
			return addLabels(ctx, api, owner, repo, number, labels, labelColor)
		},
		IsMember:       isMember,
		MergedPullPath: mergedPullPath,
		MergedHead:     mergedHead,
		ClosedBy:       closedBy,
		NoCodeSearch:   true,
		NoCheckRuns:    true,
		MergePull:      mergePull,
		BranchPath: func(owner, repo, branch string) string {
			return github.PathEscape(append([]string{"repos", owner, repo, "branches"}, strings.Split(branch, "/")...)...)
		},
	}
}

// mergePull is Gitea's POST .../pulls/{number}/merge: "Do" names the
// method, head_commit_id the head it must still have (409 otherwise), and
// the forge deletes the branch after when asked; 405 when it will not
// merge.
func mergePull(ctx context.Context, api *github.API, owner, repo string, number int, method, head string, deleteBranch bool) error {
	body := map[string]any{"Do": method, "delete_branch_after_merge": deleteBranch}
	if head != "" {
		body["head_commit_id"] = head
	}
	_, err := api.Do(ctx, http.MethodPost, github.PathEscape("repos", owner, repo, "pulls", strconv.Itoa(number), "merge"), body, nil)
	return err
}

// mergedPullPath is Gitea's GET .../commits/{sha}/pull: the pull request
// whose merge commit is sha (for squash and rebase merges too, the commit
// the base branch was moved to), 404 when there is none.
func mergedPullPath(owner, repo, sha string) string {
	return github.PathEscape("repos", owner, repo, "commits", sha, "pull")
}

// pullsQuery lists pull requests by base branch, newest first (Gitea's
// default order); the forge picks the head itself.
func pullsQuery(q url.Values, owner, head, base string) {
	if base != "" {
		q.Set("base_branch", base)
	}
}

// ReviewState maps Gitea's review states to forge.Review* constants.
func ReviewState(state string) string {
	switch strings.ToUpper(state) {
	case "REQUEST_CHANGES":
		return forge.ReviewChangesRequested
	case "COMMENT":
		return forge.ReviewCommented
	case "REQUEST_REVIEW", "PENDING":
		// REQUEST_REVIEW is a review asked for and not given yet.
		return forge.ReviewPending
	default:
		return strings.ToUpper(state)
	}
}

// DraftTitle prefixes title with WIPPrefix unless it already carries one
// of Gitea's default work-in-progress prefixes.
func DraftTitle(title string) string {
	upper := strings.ToUpper(title)
	if strings.HasPrefix(upper, "WIP:") || strings.HasPrefix(upper, "[WIP]") {
		return title
	}
	return WIPPrefix + title
}

type label struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// addLabels adds labels by name to issue number: Gitea's issue labels
// API takes label ids. Names are looked up among the repository's
// labels, then the owning organization's, and created in the repository
// when neither has them.
func addLabels(ctx context.Context, api *github.API, owner, repo string, number int, labels []string, color string) error {
	ids := map[string]int64{}
	collect := func(l label) bool {
		if _, ok := ids[strings.ToLower(l.Name)]; !ok {
			ids[strings.ToLower(l.Name)] = l.ID
		}
		return true
	}
	missing := func() []string {
		var out []string
		for _, name := range labels {
			if _, ok := ids[strings.ToLower(name)]; !ok {
				out = append(out, name)
			}
		}
		return out
	}
	repoLabels := github.PathEscape("repos", owner, repo, "labels")
	if err := github.List(ctx, api, repoLabels, nil, collect); err != nil {
		return fmt.Errorf("list labels: %w", err)
	}
	if len(missing()) > 0 {
		// A user's repository has no organization labels: Gitea says 404.
		err := github.List(ctx, api, github.PathEscape("orgs", owner, "labels"), nil, collect)
		if err != nil && !github.IsNotFound(err) {
			return fmt.Errorf("list organization labels: %w", err)
		}
	}
	for _, name := range missing() {
		// Gitea lets a repository have two labels of one name: a label
		// made by a write left unanswered is found, not made again.
		var l label
		in := map[string]string{"name": name, "color": color, "description": "Added by fleetlift"}
		post := func() error {
			_, err := api.Do(ctx, http.MethodPost, repoLabels, in, &l)
			return err
		}
		find := func() (bool, error) {
			err := github.List(ctx, api, repoLabels, nil, collect)
			_, ok := ids[strings.ToLower(name)]
			return ok, err
		}
		if err := api.Create(ctx, post, find); err != nil {
			return fmt.Errorf("create label %q: %w", name, err)
		}
		if _, ok := ids[strings.ToLower(name)]; !ok {
			ids[strings.ToLower(name)] = l.ID
		}
	}
	in := struct {
		Labels []int64 `json:"labels"`
	}{}
	for _, name := range labels {
		in.Labels = append(in.Labels, ids[strings.ToLower(name)])
	}
	path := github.PathEscape("repos", owner, repo, "issues", strconv.Itoa(number), "labels")
	// Adding labels an issue has changes nothing.
	if _, err := api.Do(github.Idempotent(ctx), http.MethodPost, path, in, nil); err != nil {
		return fmt.Errorf("add labels: %w", err)
	}
	return nil
}

// isMember finds the team by name among the organization's teams and
// asks whether user is in it. A team that does not exist has no members.
func isMember(ctx context.Context, api *github.API, org, team, user string) (bool, error) {
	var id int64
	err := github.List(ctx, api, github.PathEscape("orgs", org, "teams"), nil, func(t struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}) bool {
		if strings.EqualFold(t.Name, team) {
			id = t.ID
			return false
		}
		return true
	})
	if err != nil {
		return false, fmt.Errorf("list teams of %s: %w", org, err)
	}
	if id == 0 {
		return false, nil
	}
	_, err = api.Do(ctx, http.MethodGet, github.PathEscape("teams", strconv.FormatInt(id, 10), "members", user), nil, nil)
	switch {
	case github.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// reference is a git reference as Gitea's API shows it.
type reference struct {
	Ref    string `json:"ref"`
	Object struct {
		SHA string `json:"sha"`
	} `json:"object"`
}

// mergedHead reads refs/pull/{number}/head, which Gitea moves with the
// pull request's branch only while the pull request is open: the head it
// was merged at. The pull request's head.sha is the branch's current
// commit while the branch exists, and its owner may push or reset it
// after the merge.
func mergedHead(ctx context.Context, api *github.API, owner, repo string, number int) (string, error) {
	name := "refs/pull/" + strconv.Itoa(number) + "/head"
	var raw json.RawMessage
	if _, err := api.Do(ctx, http.MethodGet, github.PathEscape("repos", owner, repo, "git", "refs", "pull", strconv.Itoa(number), "head"), nil, &raw); err != nil {
		return "", err
	}
	// One reference matching the filter exactly comes as an object,
	// others as a list.
	var refs []reference
	if one := (reference{}); json.Unmarshal(raw, &one) == nil && one.Ref != "" {
		refs = append(refs, one)
	} else if err := json.Unmarshal(raw, &refs); err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	for _, r := range refs {
		if r.Ref == name && r.Object.SHA != "" {
			return r.Object.SHA, nil
		}
	}
	return "", fmt.Errorf("read %s: Gitea has no such reference", name)
}
