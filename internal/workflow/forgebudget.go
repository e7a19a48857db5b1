package workflow

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ForgeBudget is one forge account's budget of content-creating
// requests (pull requests, comments, labels, reviewers), shared by every
// worker, replica and campaign that writes with the account: the one
// owner of its count. A writer asks for a permit (UpdateForgePermit) and
// sends its request once the update completes; a rate limit the forge
// reports to any writer holds every permit back (SignalForgeHold). Its
// workflow id names the forge and the account (dispatch.ForgeBudgetID).
//
// Permits are granted one at a time, in the order asked, while every
// window of the limits has room: GitHub allows 80 such requests a minute
// and 500 an hour (its secondary limits). A grant counts in a window for
// the window's length and Slack more, so that requests that reach the
// forge later than others granted after them never crowd a window there.
// Grants are spaced by MinInterval at least.
//
// A budget counted in something each request spends, not known before it
// is sent (a model account's tokens a minute), takes the amount once the
// request is done (SignalForgeSpend): it counts in the windows as grants
// do, from when it came, and a permit is granted while every window has
// room for one more.
//
// It ends once idle for the longest window (the next permit starts it
// again), and continues as new after GrantsPerRun grants.
func ForgeBudget(ctx workflow.Context, in ForgeBudgetInput) (ForgeBudgetState, error) {
	if len(in.Limits) == 0 {
		return ForgeBudgetState{}, temporal.NewNonRetryableApplicationError("forge budget "+in.Key+" has no limits", "InvalidForgeBudget", nil)
	}
	b := &forgeBudget{in: in, granted: in.Granted, spent: in.Spent, held: in.HeldUntil}
	if err := b.register(ctx); err != nil {
		return ForgeBudgetState{}, err
	}
	perRun := in.GrantsPerRun
	if perRun <= 0 {
		perRun = 500
	}
	for {
		// Every hold and spend delivered so far counts before the next
		// grant: this loop alone takes them, so none waits in a channel
		// while a permit is granted past it.
		b.take(ctx)
		now := workflow.Now(ctx)
		b.forget(now)
		if len(b.waiting) == 0 {
			if b.runGrants >= perRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
				drained, err := b.drain(ctx)
				if err != nil {
					return b.state(ctx), err
				}
				if drained {
					next := b.in
					next.Granted, next.Spent, next.HeldUntil, next.Total = b.granted, b.spent, b.held, b.total
					return ForgeBudgetState{}, workflow.NewContinueAsNewError(ctx, ForgeBudget, next)
				}
				continue
			}
			// Idle: wait for a writer, a hold or a spend, or end once
			// nothing granted or spent counts any more and no hold is
			// pending.
			// A run that counts nothing yet waits a window for its
			// first ask.
			wait := max(b.idle(now), time.Second)
			if b.last().IsZero() {
				wait = max(wait, b.longest()+b.in.Slack)
			}
			ok, err := workflow.AwaitWithTimeout(ctx, wait, func() bool { return len(b.waiting) > 0 || b.delivered() })
			if err != nil {
				return b.state(ctx), err
			}
			if !ok {
				drained, err := b.drain(ctx)
				if err != nil {
					return b.state(ctx), err
				}
				// A hold or spend taken while draining still counts:
				// the run goes on with it.
				if drained && b.idle(workflow.Now(ctx)) <= 0 {
					return b.state(ctx), nil
				}
				b.draining = false
			}
			continue
		}
		at := b.next(now)
		if at.Sub(now) <= b.ahead() {
			// Granted for its time: the asker waits for it itself, so
			// that grants close together take one workflow task.
			w := b.waiting[0]
			b.waiting = b.waiting[1:]
			w.at, w.granted = at, true
			b.granted = append(b.granted, at)
			b.runGrants++
			b.total++
			continue
		}
		// Wait until the next grant is close enough; a hold or a spend
		// wakes the wait to take it in.
		if _, err := workflow.AwaitWithTimeout(ctx, at.Sub(now)-b.ahead(), b.delivered); err != nil {
			return b.state(ctx), err
		}
	}
}

// Update, signal and query names of the ForgeBudget workflow.
const (
	// UpdateForgePermit completes once the caller may send one
	// content-creating request (ForgePermit).
	UpdateForgePermit = "permit"
	// SignalForgeHold holds every permit back until a time
	// (ForgeHold): the forge answered a request with a rate limit.
	SignalForgeHold = "hold"
	// SignalForgeSpend counts what a request spent beyond its permit
	// (ForgeSpend).
	SignalForgeSpend = "spend"
	// QueryForgeBudget answers with the ForgeBudgetState.
	QueryForgeBudget = "budget"
)

// ForgeBudgetDraining is the type of the error a permit is refused with
// while the budget continues as new or ends: ask again, and the next run
// answers.
const ForgeBudgetDraining = "ForgeBudgetDraining"

// ForgeLimit is one window of a forge budget: at most Count grants in
// any Per.
type ForgeLimit struct {
	Count int           `json:"count"`
	Per   time.Duration `json:"per"`
}

// ForgeBudgetInput is a ForgeBudget workflow's input. Granted and
// HeldUntil are empty on the first run and carry the count across
// continue-as-new.
type ForgeBudgetInput struct {
	// Key names the forge and account in messages (never a token).
	Key    string       `json:"key"`
	Limits []ForgeLimit `json:"limits"`
	// Slack lengthens each window; MinInterval spaces grants.
	Slack       time.Duration `json:"slack,omitempty"`
	MinInterval time.Duration `json:"min_interval,omitempty"`
	// Ahead is how long before its time a permit may be granted (its
	// asker waits for the rest): grants close together then take one
	// workflow task, not one each. A hold reaches the permits granted
	// after it, so a write may still go out up to Ahead into a hold.
	// Default a second.
	Ahead time.Duration `json:"ahead,omitempty"`
	// GrantsPerRun bounds a run's history (default 500 grants).
	GrantsPerRun int          `json:"grants_per_run,omitempty"`
	Granted      []time.Time  `json:"granted,omitempty"`
	Spent        []ForgeSpend `json:"spent,omitempty"`
	HeldUntil    time.Time    `json:"held_until,omitzero"`
	Total        int          `json:"total,omitempty"`
}

// ForgePermitRequest asks for a permit; Caller names the asker in the
// history (a worker's identity).
type ForgePermitRequest struct {
	Caller string `json:"caller"`
}

// ForgePermit is a granted permit: when its asker may send (it waits
// until then), and how long it waited for the grant.
type ForgePermit struct {
	At     time.Time     `json:"at"`
	Waited time.Duration `json:"waited"`
}

// ForgeSpend is what a request spent beyond the one its permit counted
// (a model call's tokens, less one); At is when the budget took it in.
type ForgeSpend struct {
	Count int64     `json:"count"`
	At    time.Time `json:"at,omitzero"`
}

// ForgeHold holds permits back until Until; Reason says why (the
// forge's answer), for people.
type ForgeHold struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
}

// ForgeBudgetState is what QueryForgeBudget answers.
type ForgeBudgetState struct {
	Key string `json:"key"`
	// InWindows counts the grants and what was spent in each limit's
	// window now, in the order of the limits.
	InWindows []int64   `json:"in_windows"`
	Waiting   int       `json:"waiting"`
	HeldUntil time.Time `json:"held_until,omitzero"`
	Total     int       `json:"total"`
}

type forgeWaiter struct {
	granted bool
	at      time.Time
}

type forgeBudget struct {
	in      ForgeBudgetInput
	granted []time.Time  // in order; those that may still count
	spent   []ForgeSpend // in order; those that may still count
	held    time.Time
	holdCh  workflow.ReceiveChannel
	spendCh workflow.ReceiveChannel
	waiting []*forgeWaiter
	// draining: the run is ending; new permits go to the next.
	draining  bool
	runGrants int
	total     int
}

func (b *forgeBudget) register(ctx workflow.Context) error {
	b.total = b.in.Total
	if err := workflow.SetQueryHandler(ctx, QueryForgeBudget, func() (ForgeBudgetState, error) { return b.state(ctx), nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateForgePermit, b.permit, workflow.UpdateHandlerOptions{
		Validator: func(ForgePermitRequest) error {
			if b.draining {
				return temporal.NewApplicationError("the forge budget "+b.in.Key+" is starting its next run: ask again", ForgeBudgetDraining)
			}
			return nil
		},
	}); err != nil {
		return err
	}
	b.holdCh = workflow.GetSignalChannel(ctx, SignalForgeHold)
	b.spendCh = workflow.GetSignalChannel(ctx, SignalForgeSpend)
	return nil
}

// spend takes a spend in, counted from now.
func (b *forgeBudget) spend(ctx workflow.Context, sp ForgeSpend) {
	if sp.Count <= 0 {
		return
	}
	b.spent = append(b.spent, ForgeSpend{Count: sp.Count, At: workflow.Now(ctx)})
}

// last is when the newest grant or spend counted; zero without either.
func (b *forgeBudget) last() time.Time {
	var t time.Time
	if n := len(b.granted); n > 0 {
		t = b.granted[n-1]
	}
	if n := len(b.spent); n > 0 && b.spent[n-1].At.After(t) {
		t = b.spent[n-1].At
	}
	return t
}

// counted is every grant (one each) and spend, oldest first.
func (b *forgeBudget) counted() []ForgeSpend {
	all := make([]ForgeSpend, 0, len(b.granted)+len(b.spent))
	i, j := 0, 0
	for i < len(b.granted) || j < len(b.spent) {
		if j == len(b.spent) || i < len(b.granted) && !b.granted[i].After(b.spent[j].At) {
			all = append(all, ForgeSpend{Count: 1, At: b.granted[i]})
			i++
		} else {
			all = append(all, b.spent[j])
			j++
		}
	}
	return all
}

// hold takes a hold in.
func (b *forgeBudget) hold(ctx workflow.Context, h ForgeHold) {
	if h.Until.After(b.held) {
		b.held = h.Until
		workflow.GetLogger(ctx).Warn("forge rate limit: permits held back", "budget", b.in.Key, "until", h.Until, "reason", h.Reason)
	}
}

// permit waits for its grant.
func (b *forgeBudget) permit(ctx workflow.Context, _ ForgePermitRequest) (ForgePermit, error) {
	asked := workflow.Now(ctx)
	w := &forgeWaiter{}
	b.waiting = append(b.waiting, w)
	if err := workflow.Await(ctx, func() bool { return w.granted }); err != nil {
		return ForgePermit{}, err
	}
	return ForgePermit{At: w.at, Waited: max(0, w.at.Sub(asked))}, nil
}

// ahead is Ahead, a second when unset.
func (b *forgeBudget) ahead() time.Duration {
	if b.in.Ahead > 0 {
		return b.in.Ahead
	}
	return time.Second
}

// longest is the longest window.
func (b *forgeBudget) longest() time.Duration {
	var d time.Duration
	for _, l := range b.in.Limits {
		d = max(d, l.Per)
	}
	return d
}

// forget drops the grants no window counts any more.
func (b *forgeBudget) forget(now time.Time) {
	keep := b.longest() + b.in.Slack
	i := 0
	for i < len(b.granted) && !b.granted[i].Add(keep).After(now) {
		i++
	}
	b.granted = b.granted[i:]
	i = 0
	for i < len(b.spent) && !b.spent[i].At.Add(keep).After(now) {
		i++
	}
	b.spent = b.spent[i:]
}

// next is the earliest time, not before now, at which a grant fits every
// window, the hold and the spacing.
func (b *forgeBudget) next(now time.Time) time.Time {
	at := now
	if b.held.After(at) {
		at = b.held
	}
	if n := len(b.granted); n > 0 && b.in.MinInterval > 0 {
		if t := b.granted[n-1].Add(b.in.MinInterval); t.After(at) {
			at = t
		}
	}
	all := b.counted()
	for _, l := range b.in.Limits {
		if l.Count <= 0 {
			continue
		}
		// The next fits once the window ending then holds less than
		// Count: once the newest entry that brings it to Count, counted
		// from the newest, has left it.
		var sum int64
		for k := len(all) - 1; k >= 0; k-- {
			if sum += all[k].Count; sum >= int64(l.Count) {
				if t := all[k].At.Add(l.Per + b.in.Slack); t.After(at) {
					at = t
				}
				break
			}
		}
	}
	return at
}

func (b *forgeBudget) state(ctx workflow.Context) ForgeBudgetState {
	now := workflow.Now(ctx)
	st := ForgeBudgetState{Key: b.in.Key, Waiting: len(b.waiting), Total: b.total}
	if b.held.After(now) {
		st.HeldUntil = b.held
	}
	for _, l := range b.in.Limits {
		var n int64
		for _, c := range b.counted() {
			if c.At.Add(l.Per + b.in.Slack).After(now) {
				n += c.Count
			}
		}
		st.InWindows = append(st.InWindows, n)
	}
	return st
}

// drain refuses new permits (they go to the next run) and reports
// whether the run may end: no handler is left, and no hold is left
// untaken. A permit asked for meanwhile is served first: draining stops.
func (b *forgeBudget) drain(ctx workflow.Context) (bool, error) {
	b.draining = true
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) || len(b.waiting) > 0 }); err != nil {
		return false, err
	}
	if len(b.waiting) > 0 {
		b.draining = false
		return false, nil
	}
	b.take(ctx)
	return true, nil
}

// delivered reports whether a hold or a spend waits to be taken in.
func (b *forgeBudget) delivered() bool { return b.holdCh.Len()+b.spendCh.Len() > 0 }

// idle is how long from now until nothing granted or spent counts in a
// window any more and no hold is pending: the run may end then.
func (b *forgeBudget) idle(now time.Time) time.Duration {
	var d time.Duration
	if last := b.last(); !last.IsZero() {
		d = last.Add(b.longest() + b.in.Slack).Sub(now)
	}
	return max(d, b.held.Sub(now))
}

// take takes in every hold and spend delivered and not yet taken.
func (b *forgeBudget) take(ctx workflow.Context) {
	for {
		var h ForgeHold
		if !b.holdCh.ReceiveAsync(&h) {
			break
		}
		b.hold(ctx, h)
	}
	for {
		var sp ForgeSpend
		if !b.spendCh.ReceiveAsync(&sp) {
			break
		}
		b.spend(ctx, sp)
	}
}

// ForgeBudgetKey is the part of a ForgeBudget's workflow id that names
// the forge and the account: host and an identity that is not a secret.
func ForgeBudgetKey(host, identity string) string {
	return fmt.Sprintf("%s/%s", host, identity)
}
