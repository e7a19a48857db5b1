package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"text/template"

	"github.com/fleetlift/fleetlift/internal/notify"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// Notifier hands messages to the services that deliver them. Deliver
// must return quickly (the services may be down: delivery, with its
// retries, happens elsewhere) and be idempotent by Delivery.Message.Key:
// a key it took before is not delivered again, by this reconciler or
// another, restarts included.
type Notifier interface {
	Deliver(ctx context.Context, ds []notify.Delivery) error
}

// Notifications are the messages the config's subscriptions (cfg) say
// are due for the recorded campaigns: for each campaign a subscription
// covers, one message per event that holds now and per service. The
// loop is level-based, so an event is due for as long as it holds; the
// message's key (the service, the event, the campaign's run and what
// the event is about) is what makes it one message.
func Notifications(cfg *spec.Config, recorded []state.Campaign) ([]notify.Delivery, []error) {
	if cfg == nil || cfg.Notifications == nil {
		return nil, nil
	}
	n := cfg.Notifications
	var errs []error
	templates := map[string]*template.Template{}
	for name, text := range n.Templates {
		t, err := notify.ParseTemplate(name, text)
		if err != nil {
			// LoadConfig refused such a config; say so rather than
			// send something else.
			errs = append(errs, fmt.Errorf("notifications.templates.%s: %w", name, err))
			continue
		}
		templates[name] = t
	}
	var out []notify.Delivery
	seen := map[string]bool{}
	for _, c := range recorded {
		events := eventsOf(c)
		for _, s := range n.Subscriptions {
			if len(s.Campaigns) > 0 && !slices.ContainsFunc(s.Campaigns, func(g string) bool {
				ok, _ := path.Match(g, c.ID)
				return ok
			}) {
				continue
			}
			for _, m := range events {
				if !slices.Contains(s.On, m.Event) {
					continue
				}
				var t *template.Template
				if s.Template != "" {
					if t = templates[s.Template]; t == nil {
						continue
					}
				}
				for _, to := range s.To {
					d := notify.Delivery{Service: to, Message: m}
					d.Message.Key = deliveryKey(to, m)
					if seen[d.Message.Key] {
						continue
					}
					seen[d.Message.Key] = true
					var err error
					if d.Message, err = notify.Render(t, d.Message); err != nil {
						errs = append(errs, fmt.Errorf("notifications: template %s for %s %s: %w", s.Template, c.ID, m.Event, err))
						continue
					}
					out = append(out, d)
				}
			}
		}
	}
	return out, errs
}

// eventsOf lists the events that hold for campaign c now.
func eventsOf(c state.Campaign) []notify.Message {
	base := notify.Message{Campaign: c.ID, Kind: string(c.Kind), Generation: c.Generation,
		Revision: c.SourceRevision, Run: c.RunID, Phase: string(c.Phase), Message: c.Message}
	for _, r := range c.Repos {
		base.Repositories.Total++
		switch r.Status {
		case state.RepoCompleted:
			base.Repositories.Completed++
		case state.RepoFailed:
			base.Repositories.Failed++
		}
		if r.PullRequestURL != "" {
			base.Repositories.PullRequests++
		}
	}
	var out []notify.Message
	add := func(event string, edit func(*notify.Message)) {
		m := base
		m.Event = event
		if edit != nil {
			edit(&m)
		}
		out = append(out, m)
	}
	for _, p := range c.PendingApprovals {
		add(notify.AwaitingApproval, func(m *notify.Message) { m.Target, m.ResultDigest = p.Target, p.ResultDigest })
	}
	switch c.Phase {
	case state.PhasePaused:
		add(notify.Paused, nil)
	case state.PhaseCompleted:
		add(notify.Completed, nil)
	case state.PhaseCompletedWithFailures, state.PhaseFailed, state.PhaseAborted:
		add(notify.Failed, nil)
	}
	if c.Phase.Done() {
		add(notify.Done, nil)
	}
	return out
}

// deliveryKey names message m to service: the same event of the same run
// gives the same key. A result awaiting approval is one event per
// result, however the run's phase moves meanwhile; a pause one per
// reason (a campaign continued and paused again at a higher failure
// count is told again); an end one per run (fleetlift retry starts
// another).
func deliveryKey(service string, m notify.Message) string {
	var about string
	switch m.Event {
	case notify.AwaitingApproval:
		about = m.Target + "@" + m.ResultDigest
	case notify.Paused:
		about = m.Message
	default:
		about = m.Phase
	}
	h := sha256.New()
	for _, s := range []string{service, m.Event, m.Campaign, fmt.Sprint(m.Generation), m.Run, about} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// notify hands the pass's due messages to the Notifier, each key once
// per reconciler (the Notifier makes it once for good).
func (r *Reconciler) notify(ctx context.Context, cfg *spec.Config, recorded []state.Campaign) {
	ds, errs := Notifications(cfg, recorded)
	for _, err := range errs {
		r.log().Error("notifications", "error", err)
	}
	// What was handed over and is still due; a key no longer due is
	// forgotten here (the Notifier remembers it).
	had := r.notified
	r.notified = map[string]bool{}
	var todo []notify.Delivery
	for _, d := range ds {
		if had[d.Message.Key] {
			r.notified[d.Message.Key] = true
			continue
		}
		todo = append(todo, d)
	}
	if len(todo) == 0 {
		return
	}
	if err := r.Notifier.Deliver(ctx, todo); err != nil {
		r.log().Error("hand notifications over", "messages", len(todo), "error", err)
		return
	}
	for _, d := range todo {
		r.notified[d.Message.Key] = true
		r.log().Info("notification", "id", d.Message.Campaign, "event", d.Message.Event, "service", d.Service, "key", d.Message.Key)
	}
}
