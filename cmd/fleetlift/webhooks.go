package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/leader"
	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/webhook"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// serveWebhooks starts the webhook receiver: each verified delivery for
// the campaigns repository is a hint for the reconciler, and each for a
// repository where a run has an open pull request one for the followers
// of its pull requests (prs, which the reconciler's passes tell which
// those are).
//
// With leader election (e set), a replica that does not lead forwards
// what it receives to the one that does, through the lease (see
// leader.Forwarder), and the leader takes what the others forwarded.
func serveWebhooks(ctx context.Context, rf *reconcileFlags, logger *slog.Logger, prs *dispatch.PullRequestHints, c client.Client, e *leader.Elector) (reconcile.Hints, func(), error) {
	secret := os.Getenv(rf.webhookSecretEnv)
	if secret == "" {
		return nil, nil, fmt.Errorf("--webhook-listen needs a secret in $%s", rf.webhookSecretEnv)
	}
	repos := rf.webhookRepos
	if len(repos) == 0 && source.LocalDir(rf.repo) == "" {
		repos = []string{rf.repo}
	}
	if len(repos) == 0 {
		return nil, nil, usageErrorf("--webhook-listen needs --webhook-repo: the campaigns repository's clone URL on the forge")
	}
	hints, hint := reconcile.NewHints()
	// take acts on hints, whichever replica received them: a pass for
	// the campaigns repository, follower reads where pull requests are
	// followed.
	take := func(h workflow.LeaseHints) {
		if h.Repository {
			hint()
		}
		for _, key := range h.PullRequests {
			if prs.Followed(key) {
				prs.Hint(key)
			}
		}
		for _, p := range h.Pushes {
			prs.Pushed(p.Repository, p.Branch)
		}
	}
	followed, deliver := prs.Followed, func(ev webhook.Event) { take(hintsOf(ev)) }
	if e != nil {
		fw := &leader.Forwarder{Client: c, Log: logger}
		go fw.Run(ctx)
		e.Hints = take
		// A standby knows no pull requests (the leader's passes tell
		// prs): it forwards every repository's, and the leader sorts.
		followed = func(key string) bool { return !e.IsLeader() || prs.Followed(key) }
		deliver = func(ev webhook.Event) {
			if e.IsLeader() {
				take(hintsOf(ev))
				return
			}
			fw.Add(hintsOf(ev))
		}
	}
	h, err := webhook.New(webhook.Options{
		Secret: []byte(secret),
		Repos:  repos,
		Log:    logger,
		Delivered: func(o webhook.Outcome) {
			if rf.metrics != nil {
				rf.metrics.WebhookDelivered(o)
			}
		},
		Followed: followed,
		Hint:     deliver,
	})
	if err != nil {
		return nil, nil, err
	}
	srv, err := webhook.Listen(rf.webhookListen, h)
	if err != nil {
		return nil, nil, listen.Explain("webhook-listen", rf.webhookListen, err)
	}
	logger.Info("webhook receiver listening", "address", srv.Addr().String(), "path", "/webhook")
	return hints, func() { _ = srv.Close() }, nil
}

// passObservers tells each of its observers of every pass.
type passObservers []reconcile.Observer

func (o passObservers) ObservePass(res *reconcile.Result, err error, took time.Duration) {
	for _, x := range o {
		x.ObservePass(res, err, took)
	}
}

// hintsOf is what delivery ev hints at: a change to the campaigns
// repository (a status is none), pull requests in a followed repository.
func hintsOf(ev webhook.Event) workflow.LeaseHints {
	var h workflow.LeaseHints
	h.Repository = ev.Watched && ev.Kind != webhook.Status
	if ev.Followed {
		h.PullRequests = []string{ev.Key}
		// A push to a branch: done_when runs again on the merged
		// pull requests into it.
		if branch, ok := strings.CutPrefix(ev.Ref, "refs/heads/"); ok && ev.Kind == webhook.Push {
			h.Pushes = []status.PushHint{{Repository: ev.Key, Branch: branch}}
		}
	}
	return h
}
