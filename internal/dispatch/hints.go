package dispatch

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/webhook"
)

// PullRequestHints hands webhooks about the target repositories of
// campaigns to the followers of their pull requests (status.SignalHint),
// so that a check that went green, a review or a base that moved is read
// within seconds rather than at the follower's next pass. Like every
// hint it is only a reason to read sooner: a hint lost, refused or sent
// twice costs at most a pass interval.
//
// It knows which repositories have open pull requests from the recorded
// state of each reconcile pass (Observe); a hint about a repository with
// none known waits up to two minutes for a pass that finds one. Hints
// are gathered (2s by default) and sent once per follower, naming every
// repository hinted at; a follower reads only its pull requests there,
// and at most once per ten seconds. Make one with NewPullRequestHints
// and call Run.
type PullRequestHints struct {
	client client.Client
	gather time.Duration
	log    *slog.Logger

	mu sync.Mutex
	// runs holds, by repository (webhook.PullRequestKey), the runs with
	// an open pull request there, as the last pass recorded them.
	runs map[string][]run
	// pending holds the repositories hinted at, by run, since the last
	// send; pushes the branches pushed to there.
	pending map[run]map[string]bool
	pushes  map[run]map[status.PushHint]bool
	// unknown holds when repositories where no open pull request was
	// known were hinted at (see Followed).
	unknown map[string]time.Time
	wake    chan struct{}
	// followers caches the followers of each run for followersFor.
	followers map[run]cachedFollowers
}

// run is a recorded run whose pull requests are followed.
type run struct {
	workflowID string
	campaign   bool
}

type cachedFollowers struct {
	ids []string
	at  time.Time
}

// followersFor is how long the followers of a run are taken as known: a
// campaign run in pages adds one with each page.
const followersFor = time.Minute

// NewPullRequestHints returns PullRequestHints that signal with c,
// gathering hints for gather (2s when 0).
func NewPullRequestHints(c client.Client, gather time.Duration, log *slog.Logger) *PullRequestHints {
	if gather <= 0 {
		gather = 2 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PullRequestHints{client: c, gather: gather, log: log, runs: map[string][]run{},
		pending: map[run]map[string]bool{}, pushes: map[run]map[status.PushHint]bool{}, unknown: map[string]time.Time{},
		wake: make(chan struct{}, 1), followers: map[run]cachedFollowers{}}
}

// Observe takes the repositories with open pull requests from the
// recorded state of a pass, and those with merged ones that done_when
// checks.
func (h *PullRequestHints) Observe(recorded []state.Campaign) {
	runs := map[string][]run{}
	for _, c := range recorded {
		if c.WorkflowID == "" {
			continue
		}
		r := run{workflowID: c.WorkflowID, campaign: c.Kind == state.KindCampaign}
		for _, repo := range c.Repos {
			// Open pull requests, and merged ones whose done_when a
			// push to their base has run again.
			merged := repo.PullRequestState == state.PullRequestMerged
			if repo.PullRequestURL == "" || merged && (repo.PullRequest == nil || repo.PullRequest.Done == "") || repo.PullRequestState == state.PullRequestClosed {
				continue
			}
			if k := webhook.PullRequestKey(repo.PullRequestURL); k != "" && !slices.Contains(runs[k], r) {
				runs[k] = append(runs[k], r)
			}
		}
	}
	h.mu.Lock()
	h.runs = runs
	h.forget(time.Now())
	woken := false
	for key := range h.unknown {
		if len(runs[key]) > 0 {
			delete(h.unknown, key)
			h.queue(key)
			woken = true
		}
	}
	h.mu.Unlock()
	if woken {
		h.wakeUp()
	}
}

// Followed reports whether a run has an open pull request in the
// repository key (webhook.Options.Followed). A repository asked about
// where none is known is remembered for unknownFor: a pull request is
// often announced (opened, its first statuses) before the next pass
// records it, and the pass that does hands it the hint.
func (h *PullRequestHints) Followed(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.runs[key]) > 0 {
		return true
	}
	now := time.Now()
	if len(h.unknown) >= maxUnknown {
		h.forget(now)
	}
	if len(h.unknown) < maxUnknown {
		h.unknown[key] = now
	}
	return false
}

// forget drops the repositories hinted at longer than unknownFor ago
// with no open pull request known; h.mu is held.
func (h *PullRequestHints) forget(now time.Time) {
	for key, at := range h.unknown {
		if now.Sub(at) >= unknownFor {
			delete(h.unknown, key)
		}
	}
}

// unknownFor is how long a hint about a repository where no open pull
// request is known waits for a pass that records one, and maxUnknown
// how many such repositories are remembered at once.
const (
	unknownFor = 2 * time.Minute
	maxUnknown = 4096
)

// Hint queues a hint about the repository key for the followers of the
// runs with an open pull request there. It does not block.
func (h *PullRequestHints) Hint(key string) {
	h.mu.Lock()
	h.queue(key)
	h.mu.Unlock()
	h.wakeUp()
}

// Pushed queues a hint about a push to branch of the repository key for
// the followers of the runs with a pull request there: one that merged
// into branch has its done_when run again. It does not block.
func (h *PullRequestHints) Pushed(key, branch string) {
	h.mu.Lock()
	for _, r := range h.runs[key] {
		mark(h.pushes, r, status.PushHint{Repository: key, Branch: branch})
	}
	h.mu.Unlock()
	h.wakeUp()
}

// queue adds key to the pending hints of the runs with an open pull
// request there; h.mu is held.
func (h *PullRequestHints) queue(key string) {
	for _, r := range h.runs[key] {
		mark(h.pending, r, key)
	}
}

// mark adds k to what m holds for r.
func mark[K comparable](m map[run]map[K]bool, r run, k K) {
	if m[r] == nil {
		m[r] = map[K]bool{}
	}
	m[r][k] = true
}

func (h *PullRequestHints) wakeUp() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Run sends the hints queued, a gathering at a time, until ctx ends.
func (h *PullRequestHints) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.gather):
		}
		h.mu.Lock()
		pending, pushes := h.pending, h.pushes
		h.pending, h.pushes = map[run]map[string]bool{}, map[run]map[status.PushHint]bool{}
		h.mu.Unlock()
		for r := range pushes {
			if pending[r] == nil {
				pending[r] = map[string]bool{}
			}
		}
		for r, keys := range pending {
			pushed := slices.SortedFunc(maps.Keys(pushes[r]), func(a, b status.PushHint) int {
				return cmp.Or(strings.Compare(a.Repository, b.Repository), strings.Compare(a.Branch, b.Branch))
			})
			h.send(ctx, r, status.PullRequestHint{Repositories: slices.Sorted(maps.Keys(keys)), Pushed: pushed})
		}
	}
}

// send signals the followers of r what changed.
func (h *PullRequestHints) send(ctx context.Context, r run, hint status.PullRequestHint) {
	ids, err := h.followersOf(ctx, r)
	if err != nil {
		h.log.Info("pull request hint not sent", "run", r.workflowID, "error", err)
		return
	}
	for _, id := range ids {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := h.client.SignalWorkflow(sctx, status.FollowerID(id), "", status.SignalHint, hint)
		cancel()
		if _, ok := errors.AsType[*serviceerror.NotFound](err); ok {
			// Everything it followed merged or closed: it has ended.
			continue
		}
		if err != nil {
			h.log.Info("pull request hint not sent", "follower", status.FollowerID(id), "error", err)
			continue
		}
		h.log.Debug("pull request hint sent", "follower", status.FollowerID(id), "repositories", hint.Repositories, "pushes", len(hint.Pushed))
	}
}

// followersOf returns the sources whose followers follow r's pull
// requests: r itself, or the pages of a campaign run in pages.
func (h *PullRequestHints) followersOf(ctx context.Context, r run) ([]string, error) {
	if !r.campaign {
		return []string{r.workflowID}, nil
	}
	h.mu.Lock()
	c, ok := h.followers[r]
	h.mu.Unlock()
	if ok && time.Since(c.at) < followersFor {
		return c.ids, nil
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := h.client.QueryWorkflow(qctx, r.workflowID, "", status.QueryStatus)
	if err != nil {
		return nil, err
	}
	var st status.CampaignState
	if err := v.Get(&st); err != nil {
		return nil, err
	}
	ids := (&status.Run{ID: r.workflowID, Campaign: &st}).Followers()
	h.mu.Lock()
	for k, c := range h.followers {
		if time.Since(c.at) >= followersFor {
			delete(h.followers, k)
		}
	}
	h.followers[r] = cachedFollowers{ids: ids, at: time.Now()}
	h.mu.Unlock()
	return ids, nil
}

// ObservePass takes the recorded state of each pass
// (reconcile.Observer).
func (h *PullRequestHints) ObservePass(res *reconcile.Result, err error, _ time.Duration) {
	if err == nil && res != nil {
		h.Observe(res.Recorded)
	}
}
