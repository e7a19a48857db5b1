package dispatch

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// ModelPace keeps a model account's tokens a minute (a worker's
// --tokens-per-minute) with every worker's gateway that calls the model
// as the account: a gateway.Pace on the account's budget on Temporal, a
// ForgeBudget workflow counted in tokens. Each call asks a permit, which
// counts one token, and the call's tokens less that one are spent once
// its response is read; a call waits while the last minute's tokens, all
// workers' together, reach the limit.
type ModelPace struct {
	Budget *ForgeBudget
	// Local paces the calls while the budget cannot be reached (no
	// worker runs it, the server is away): this gateway's own count.
	Local gateway.Pace
	// Logger says when the budget cannot be reached; nil: slog's.
	Logger *slog.Logger

	warn sync.Once
	// spending are the spends on their way to the budget: this
	// gateway's next permit waits for them, so that it never goes out
	// before what this gateway's last calls used is counted.
	mu       sync.Mutex
	spending []chan struct{}
}

var _ gateway.Pace = (*ModelPace)(nil)

// ModelBudgetID is the workflow id of the tokens-a-minute budget of the
// model account whose key is key at host: a digest of the key tells
// accounts apart, never the key.
func ModelBudgetID(host, key string) string {
	return "fleetlift/model-budget/" + workflow.ForgeBudgetKey(host, accountDigest(key))
}

// ModelBudgetInput is the budget of a model account at host allowed
// perMinute tokens a minute: no slack (the model counts when it answers,
// after the budget did) and no spacing.
func ModelBudgetInput(host string, perMinute int64) workflow.ForgeBudgetInput {
	return workflow.ForgeBudgetInput{Key: host, Limits: []workflow.ForgeLimit{{Count: int(perMinute), Per: time.Minute}}}
}

// Wait implements gateway.Pace: it returns once the account's budget
// grants the call a permit; limit is the budget's own. While the budget
// cannot be reached the call is paced by Local instead.
func (p *ModelPace) Wait(ctx context.Context, limit int64) error {
	p.mu.Lock()
	spending := p.spending
	p.mu.Unlock()
	for _, done := range spending {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := p.Budget.Acquire(ctx)
	if err == nil || ended(ctx) != nil {
		return err
	}
	p.unreachable(err)
	return p.Local.Wait(ctx, limit)
}

// Spent implements gateway.Pace: the call's tokens count in the
// account's budget (and in Local, for the calls it may pace). It
// returns at once; the budget takes them in the background.
func (p *ModelPace) Spent(tokens int64) {
	p.Local.Spent(tokens)
	if tokens <= 1 {
		return
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.spending = append(p.spending, done)
	p.mu.Unlock()
	go func() {
		defer func() {
			p.mu.Lock()
			p.spending = slices.DeleteFunc(p.spending, func(c chan struct{}) bool { return c == done })
			p.mu.Unlock()
			close(done)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Budget.Spend(ctx, tokens-1); err != nil {
			p.unreachable(err)
		}
	}()
}

// unreachable says once that the budget could not be reached.
func (p *ModelPace) unreachable(err error) {
	p.warn.Do(func() {
		log := p.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("model calls: the account's shared tokens-a-minute budget cannot be reached; this worker paces its own calls meanwhile",
			"budget", p.Budget.ID, "error", err)
	})
}
