package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// Price is what a model charges, in US dollars per million tokens of
// each kind.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheWrite float64 `json:"cache_write"`
	CacheRead  float64 `json:"cache_read"`
}

// Prices is the operator's price table, by model name. A name also
// prices the model's dated versions: "claude-sonnet-4-5" prices
// "claude-sonnet-4-5-20250929" unless that has a price of its own.
type Prices map[string]Price

// ParsePrices reads a price table (YAML or JSON): each model's name
// mapped to its input, output, cache_write and cache_read prices in US
// dollars per million tokens. name names the file in errors.
func ParsePrices(name string, data []byte) (Prices, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, fmt.Errorf("%s: want a map of model names to prices: %w", name, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s: no model has a price", name)
	}
	prices := make(Prices, len(raw))
	for _, model := range slices.Sorted(maps.Keys(raw)) {
		if strings.TrimSpace(model) == "" {
			return nil, fmt.Errorf("%s: a model name is empty", name)
		}
		dec := json.NewDecoder(bytes.NewReader(raw[model]))
		dec.DisallowUnknownFields()
		var p Price
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("%s: %s: want input, output, cache_write and cache_read in US dollars per million tokens: %w", name, model, err)
		}
		for field, v := range map[string]float64{"input": p.Input, "output": p.Output, "cache_write": p.CacheWrite, "cache_read": p.CacheRead} {
			if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("%s: %s.%s is %v: want a price of 0 or more", name, model, field, v)
			}
		}
		prices[model] = p
	}
	return prices, nil
}

// Lookup is model's price: its own, or else that of the longest name in
// the table that model continues with "-" (a dated version of it).
func (ps Prices) Lookup(model string) (Price, bool) {
	if p, ok := ps[model]; ok {
		return p, true
	}
	best := ""
	for name := range ps {
		if len(name) > len(best) && strings.HasPrefix(model, name+"-") {
			best = name
		}
	}
	if best == "" {
		return Price{}, false
	}
	return ps[best], true
}

// Cost is what the tokens u counts cost at price p.
func (p Price) Cost(u messageUsage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output +
		float64(u.CacheCreationInputTokens)*p.CacheWrite + float64(u.CacheReadInputTokens)*p.CacheRead) / 1e6
}

// price adds what one response (m, whose tokens u counts alone) cost to
// u, at prices: its cost, or the model among those unpriced when the
// table has no price for it. Without a table, nothing is priced.
func price(u *Usage, prices Prices, m messageUsage) {
	if prices == nil || m.Model == "" && u.Tokens() == 0 {
		return
	}
	p, ok := prices.Lookup(m.Model)
	if !ok {
		model := m.Model
		if model == "" {
			model = "(not named)"
		}
		u.Unpriced = model
		return
	}
	u.CostUSD += p.Cost(m)
}

// costLimit is the most b's calls may cost, in US dollars: the task's
// limits.max_cost_per_task and the worker's own bound (g.MaxCostPerTask),
// whichever is less; zero when neither bounds it.
func (g *Gateway) costLimit(b *box) float64 {
	limit := g.MaxCostPerTask
	if b.CostLimit != nil {
		if own := b.CostLimit(); own > 0 && (limit <= 0 || own < limit) {
			limit = own
		}
	}
	return limit
}

// spent says why b may make no more calls, "" when it may: its token
// budget is spent, its cost budget is, or its cost cannot be known.
//
// The budgets count what the task's sandboxes lost before this one used
// (Sandbox.Before) too, so that a task whose sandboxes keep dying spends
// its limits once, not once per sandbox.
func (g *Gateway) spent(b *box) string {
	var tokens int64
	if b.Limit != nil {
		tokens = b.Limit()
	}
	var before Usage
	if b.Before != nil {
		before = b.Before()
	}
	lost := ""
	if before.Requests > 0 || before.Tokens() > 0 {
		lost = fmt.Sprintf(" (of them, %d tokens and %s by the sandboxes lost before this one)", before.Tokens(), protocol.USD(before.CostUSD))
	}
	if used := b.usage.Tokens() + before.Tokens(); tokens > 0 && used >= tokens {
		return fmt.Sprintf("fleetlift model gateway: the task's token budget is spent: %d of limits.max_tokens %d used%s", used, tokens, lost)
	}
	limit := g.costLimit(b)
	unpriced := b.usage.Plus(&before).Unpriced
	switch {
	case limit <= 0:
		return ""
	case len(unpriced) > 0:
		return fmt.Sprintf("fleetlift model gateway: the task's cost budget cannot be kept: the worker's price table (--model-prices) has no price for %s", unpriced)
	case g.Prices == nil:
		return "fleetlift model gateway: the task's cost budget cannot be kept: the worker has no price table (--model-prices)"
	case b.usage.CostUSD+before.CostUSD >= limit:
		return fmt.Sprintf("fleetlift model gateway: the task's cost budget is spent: %s of limits.max_cost_per_task %s used%s", protocol.USD(b.usage.CostUSD+before.CostUSD), protocol.USD(limit), lost)
	}
	return ""
}

// Pace keeps TokensPerMinute: Wait holds a model call while the last
// minute's tokens reach limit, and Spent counts what a call used once
// its response is read. A gateway keeps its own count (pacer) unless it
// shares a model account's (Gateway.SharePace).
type Pace interface {
	Wait(ctx context.Context, limit int64) error
	Spent(tokens int64)
}

// paceHolder holds a Pace for an atomic.Pointer.
type paceHolder struct{ Pace }

// SharePace has g keep TokensPerMinute with p, which every gateway of
// the model account asks, rather than with a count of its own: several
// workers using one account keep its limit together. Safe while g
// serves.
func (g *Gateway) SharePace(p Pace) { g.pace.Store(&paceHolder{p}) }

// WaitForTokens returns once a model call could go: the tokens of the
// last minute (shared ones, with SharePace) are under TokensPerMinute.
// It counts as a call's permit does. At once without a limit.
func (g *Gateway) WaitForTokens(ctx context.Context) error {
	if g.TokensPerMinute <= 0 {
		return nil
	}
	return g.pacer().Wait(ctx, g.TokensPerMinute)
}

// NewPace is a Pace of its own count of the last minute, as a gateway
// keeps without SharePace.
func NewPace() Pace { return &pacer{} }

// pacer is the Pace g keeps TokensPerMinute with.
func (g *Gateway) pacer() Pace {
	if h := g.pace.Load(); h != nil {
		return h.Pace
	}
	return &g.own
}

// pacer holds model calls while the tokens counted in the last minute
// reach the worker's tokens-per-minute limit (Gateway.TokensPerMinute).
type pacer struct {
	mu     sync.Mutex
	window []spentAt
	// now and after are the clock; nil: the real one.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// spentAt is tokens counted at a time.
type spentAt struct {
	at     time.Time
	tokens int64
}

func (p *pacer) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// Spent counts tokens now.
func (p *pacer) Spent(tokens int64) {
	if tokens <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.window = append(p.window, spentAt{at: p.clock(), tokens: tokens})
}

// Wait returns once the tokens counted in the last minute are under
// limit, or with ctx's error.
func (p *pacer) Wait(ctx context.Context, limit int64) error {
	for {
		p.mu.Lock()
		now := p.clock()
		cut := 0
		for cut < len(p.window) && !p.window[cut].at.After(now.Add(-time.Minute)) {
			cut++
		}
		p.window = p.window[cut:]
		var sum int64
		for _, s := range p.window {
			sum += s.tokens
		}
		if sum < limit {
			p.mu.Unlock()
			return nil
		}
		// The oldest count leaves the window first.
		d := p.window[0].at.Add(time.Minute).Sub(now)
		p.mu.Unlock()
		after := time.After
		if p.after != nil {
			after = p.after
		}
		select {
		case <-after(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
