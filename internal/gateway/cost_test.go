package gateway_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
)

// pricedModel is a stand-in for the Messages API that names the model
// that answered, and reports 1,000 input and 500 output tokens a call.
func pricedModel(t *testing.T, name string) (*url.URL, *int) {
	t.Helper()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"type":"message","model":%q,"content":[],"usage":{"input_tokens":1000,"output_tokens":500,"cache_read_input_tokens":2000}}`, name)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u, &calls
}

const priceTable = `
# US dollars per million tokens
claude-sonnet-4-5: {input: 3, output: 15, cache_write: 3.75, cache_read: 0.30}
claude-sonnet-4-5-20250929: {input: 4, output: 16}
claude-haiku-4-5: {input: 1, output: 5}
`

// The price table prices a model by its name or, for a dated version
// the table does not name, by the name it continues.
func TestPricesLookUpDatedVersions(t *testing.T) {
	prices, err := gateway.ParsePrices("prices.yaml", []byte(priceTable))
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]float64{
		"claude-sonnet-4-5":          3,
		"claude-sonnet-4-5-20250929": 4,
		"claude-sonnet-4-5-20260101": 3,
		"claude-haiku-4-5-20251001":  1,
	} {
		p, ok := prices.Lookup(model)
		if !ok || p.Input != want {
			t.Errorf("%s: %+v %v; want input %v", model, p, ok, want)
		}
	}
	for _, model := range []string{"claude-sonnet-4", "claude-sonnet-4-50", "gpt-5"} {
		if p, ok := prices.Lookup(model); ok {
			t.Errorf("%s is priced %+v; want no price", model, p)
		}
	}
}

// A price table with a mistake says which model and field.
func TestParsePricesSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct{ table, want string }{
		{"claude: {input: -1, output: 2}", "prices.yaml: claude.input is -1: want a price of 0 or more"},
		{"claude: {input: 1, outptu: 2}", `prices.yaml: claude: want input, output, cache_write and cache_read in US dollars per million tokens: json: unknown field "outptu"`},
		{"claude: 3", "prices.yaml: claude: want input, output"},
		{"{}", "prices.yaml: no model has a price"},
		{"- claude", "prices.yaml: want a map of model names to prices"},
	} {
		_, err := gateway.ParsePrices("prices.yaml", []byte(tc.table))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want %q", tc.table, err, tc.want)
		}
	}
}

// Each call is priced by the model that answered it; once a sandbox's
// cost reaches its task's limits.max_cost_per_task, or the worker's own
// bound when that is less, its calls are refused saying why, and the
// model is not called again.
func TestGatewayStopsAtTheCostLimit(t *testing.T) {
	prices, err := gateway.ParsePrices("prices.yaml", []byte(priceTable))
	if err != nil {
		t.Fatal(err)
	}
	// One call: 1000×3 + 500×15 + 2000×0.30 per million = $0.0111.
	const perCall = 0.0111
	for _, tc := range []struct {
		name        string
		task, owner float64
		calls       int
		want        string
	}{
		{"the task's limit", 0.03, 0, 3, "the task's cost budget is spent: $0.0333 of limits.max_cost_per_task $0.0300 used"},
		{"the worker's bound, below the task's", 0.05, 0.02, 2, "the task's cost budget is spent: $0.0222 of limits.max_cost_per_task $0.0200 used"},
		{"the worker's bound alone", 0, 0.01, 1, "the task's cost budget is spent: $0.0111 of limits.max_cost_per_task $0.0100 used"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, calls := pricedModel(t, "claude-sonnet-4-5-20260101")
			var observed []string
			var mu sync.Mutex
			gw := &gateway.Gateway{Upstream: up, Key: realKey, Prices: prices, MaxCostPerTask: tc.owner,
				Observe: func(campaign, team, model string, used gateway.Usage) {
					mu.Lock()
					defer mu.Unlock()
					observed = append(observed, fmt.Sprintf("%s %s %s %d %.4f", campaign, team, model, used.Tokens(), used.CostUSD))
				}}
			key, _ := gw.Open(gateway.Sandbox{ID: "s1", CostLimit: func() float64 { return tc.task },
				Owner: func() (string, string) { return "upgrade-go", "platform" }})
			for i := range tc.calls {
				if code, body := call(t, gw, key, false); code != http.StatusOK {
					t.Fatalf("call %d: %d %s", i+1, code, body)
				}
			}
			code, body := call(t, gw, key, false)
			if code != http.StatusTooManyRequests || !strings.Contains(body, tc.want) {
				t.Fatalf("call past the budget: %d %s; want 429 saying %q", code, body, tc.want)
			}
			if *calls != tc.calls {
				t.Errorf("the model was called %d times; want %d", *calls, tc.calls)
			}
			u, _ := gw.Usage(key)
			if math.Abs(u.CostUSD-perCall*float64(tc.calls)) > 1e-9 || u.Unpriced != "" || !strings.Contains(u.Refused, tc.want) {
				t.Errorf("usage %+v; want $%.4f and the refusal", u, perCall*float64(tc.calls))
			}
			mu.Lock()
			defer mu.Unlock()
			if len(observed) != tc.calls || observed[0] != "upgrade-go platform claude-sonnet-4-5-20260101 3500 0.0111" {
				t.Errorf("observed %q; want each call's tokens and cost under the campaign and team", observed)
			}
		})
	}
}

// A bound on cost that cannot be kept stops the calls: the model that
// answered has no price, or the worker has no price table.
func TestGatewayStopsWhenTheCostCannotBeKnown(t *testing.T) {
	prices, err := gateway.ParsePrices("prices.yaml", []byte(priceTable))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("an unpriced model", func(t *testing.T) {
		up, calls := pricedModel(t, "claude-opus-9")
		gw := &gateway.Gateway{Upstream: up, Key: realKey, Prices: prices}
		key, _ := gw.Open(gateway.Sandbox{ID: "s1", CostLimit: func() float64 { return 5 }})
		if code, body := call(t, gw, key, false); code != http.StatusOK {
			t.Fatalf("first call: %d %s", code, body)
		}
		code, body := call(t, gw, key, false)
		if want := "the worker's price table (--model-prices) has no price for claude-opus-9"; code != http.StatusTooManyRequests || !strings.Contains(body, want) {
			t.Fatalf("second call: %d %s; want 429 saying %q", code, body, want)
		}
		if *calls != 1 {
			t.Errorf("the model was called %d times; want once", *calls)
		}
		if u, _ := gw.Usage(key); u.Unpriced != "claude-opus-9" || u.CostUSD != 0 {
			t.Errorf("usage %+v; want the model unpriced and no cost", u)
		}
	})
	t.Run("no price table", func(t *testing.T) {
		up, calls := pricedModel(t, "claude-sonnet-4-5")
		gw := &gateway.Gateway{Upstream: up, Key: realKey}
		key, _ := gw.Open(gateway.Sandbox{ID: "s1", CostLimit: func() float64 { return 5 }})
		code, body := call(t, gw, key, false)
		if want := "the worker has no price table (--model-prices)"; code != http.StatusTooManyRequests || !strings.Contains(body, want) {
			t.Fatalf("call: %d %s; want 429 saying %q", code, body, want)
		}
		if *calls != 0 {
			t.Errorf("the model was called %d times; want never", *calls)
		}
	})
	t.Run("no bound, no table", func(t *testing.T) {
		up, _ := pricedModel(t, "claude-sonnet-4-5")
		gw := &gateway.Gateway{Upstream: up, Key: realKey}
		key, _ := gw.Open(gateway.Sandbox{ID: "s1"})
		for range 2 {
			if code, body := call(t, gw, key, false); code != http.StatusOK {
				t.Fatalf("call: %d %s", code, body)
			}
		}
		if u, _ := gw.Usage(key); u.CostUSD != 0 || u.Unpriced != "" || u.Requests != 2 {
			t.Errorf("usage %+v; want two calls, unpriced by nobody", u)
		}
	})
}

// A sandbox that replaces ones its task lost to crashes counts on from
// what they used (the manifest's limits.spent): the task's cost and
// token budgets bound all of its sandboxes together, not each anew.
func TestGatewayCountsWhatLostSandboxesSpent(t *testing.T) {
	prices, err := gateway.ParsePrices("prices.yaml", []byte(priceTable))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		limits protocol.Limits
		calls  int
		want   string
	}{
		// Two lost sandboxes made $0.0222 of a $0.03 budget: one call
		// ($0.0111) more.
		{"cost", protocol.Limits{MaxCostUSD: 0.03, Spent: &protocol.ModelUsage{Requests: 2, InputTokens: 2000, OutputTokens: 1000, CacheReadInputTokens: 4000, CostUSD: 0.0222}}, 1,
			"the task's cost budget is spent: $0.0333 of limits.max_cost_per_task $0.0300 used (of them, 7000 tokens and $0.0222 by the sandboxes lost before this one)"},
		// 3,500 tokens a call: 9,000 of 10,000 spent leaves one call.
		{"tokens", protocol.Limits{MaxTokens: 10000, Spent: &protocol.ModelUsage{Requests: 3, InputTokens: 9000}}, 1,
			"the task's token budget is spent: 12500 of limits.max_tokens 10000 used (of them, 9000 tokens and $0.00 by the sandboxes lost before this one)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, calls := pricedModel(t, "claude-sonnet-4-5")
			manifest, _ := json.Marshal(protocol.Manifest{TaskID: "upgrade-go", Limits: tc.limits})
			sb := gateway.ProtocolSandbox("s2", func(name string) ([]byte, error) {
				if name == protocol.ManifestFile {
					return manifest, nil
				}
				return nil, os.ErrNotExist
			}, func(string, []byte) error { return nil })
			gw := &gateway.Gateway{Upstream: up, Key: realKey, Prices: prices}
			key, _ := gw.Open(sb)
			for i := range tc.calls {
				if code, body := call(t, gw, key, false); code != http.StatusOK {
					t.Fatalf("call %d: %d %s", i+1, code, body)
				}
			}
			code, body := call(t, gw, key, false)
			if code != http.StatusTooManyRequests || !strings.Contains(body, tc.want) {
				t.Fatalf("call past the budget: %d %s; want 429 saying %q", code, body, tc.want)
			}
			if *calls != tc.calls {
				t.Errorf("the model was called %d times; want %d", *calls, tc.calls)
			}
			// What this sandbox used is its own: the lost ones' is the
			// task's to add.
			if u, ok := gw.UsageOf("s2"); !ok || u.Requests != int64(tc.calls) || u.Tokens() != 3500*int64(tc.calls) {
				t.Errorf("the sandbox's own usage %+v %v; want its %d calls alone", u, ok, tc.calls)
			}
		})
	}
}
