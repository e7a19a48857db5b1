package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/webhook"
)

// serveWebhooks starts the webhook receiver: each verified delivery for
// the campaigns repository is a hint for the reconciler, and each for a
// repository where a run has an open pull request one for the followers
// of its pull requests (prs, which the reconciler's passes tell which
// those are).
func serveWebhooks(ctx context.Context, rf *reconcileFlags, logger *slog.Logger, prs *dispatch.PullRequestHints) (reconcile.Hints, func(), error) {
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
	h, err := webhook.New(webhook.Options{
		Secret: []byte(secret),
		Repos:  repos,
		Log:    logger,
		Delivered: func(o webhook.Outcome) {
			if rf.metrics != nil {
				rf.metrics.WebhookDelivered(o)
			}
		},
		Followed: prs.Followed,
		Hint: func(ev webhook.Event) {
			if ev.Watched && ev.Kind != webhook.Status {
				hint()
			}
			if ev.Followed {
				prs.Hint(ev.Key)
			}
		},
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
