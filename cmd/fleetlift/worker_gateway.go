package main

import (
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strings"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/egress"
	"github.com/fleetlift/fleetlift/internal/gateway"
	gitx "github.com/fleetlift/fleetlift/internal/git"
)

// gateway is the sandboxes' gateway, nil when it would serve nothing.
// It serves the model with --model-gateway when it holds the key
// --model-key-env names (a jailed agent CLI reaches it through a port its
// jail forwards, an unjailed one through the agent's loopback), and then
// gatewayKey is
// set: the key goes to no sandbox. It serves the agents' clones of their
// repositories at the operator's forge when the worker has its token,
// and then gitReads is set: the token goes to no sandbox either.
func (w *workerFlags) gateway() (*gateway.Gateway, error) {
	gw := &gateway.Gateway{}
	if key := os.Getenv(w.modelKeyEnv); w.modelAPI != "" && key != "" {
		u, err := url.Parse(w.modelAPI)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("--model-gateway %q: want the API's base URL, such as https://api.anthropic.com", w.modelAPI)
		}
		gw.Upstream, gw.Key = u, key
		w.gatewayKey = w.modelKeyEnv
	}
	if key := os.Getenv(w.openAIKeyEnv); w.openAIAPI != "" && key != "" {
		u, err := url.Parse(w.openAIAPI)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.TrimSuffix(u.Path, "/") != "" {
			return nil, fmt.Errorf("--openai-gateway %q: want the API's base URL without its version, such as https://api.openai.com", w.openAIAPI)
		}
		gw.OpenAI = &gateway.OpenAI{Upstream: u, Key: key}
		w.openAIKey = w.openAIKeyEnv
	}
	if fs := w.forge; fs != nil && fs.Type != "local" && fs.Token != "" {
		gw.Git = &gateway.GitReads{Git: &gitx.Git{TokenEnv: fs.TokenEnv, TokenOrigins: fs.gitOrigins(), Slots: fs.slots()}}
		w.gitReads = true
	}
	if err := w.bound(gw); err != nil {
		return nil, err
	}
	if gw.Upstream == nil && gw.OpenAI == nil && gw.Git == nil {
		if w.prices != "" || w.maxCostPerTask > 0 || w.tokensPerMinute > 0 {
			return nil, usageErrorf("--model-prices, --max-cost-per-task and --tokens-per-minute bound the model gateway's calls: give it a model key ($%s or $%s)", w.modelKeyEnv, w.openAIKeyEnv)
		}
		return nil, nil
	}
	w.gw = gw
	return gw, nil
}

// bound gives gw the prices and bounds of --model-prices,
// --max-cost-per-task and --tokens-per-minute, and counts its calls in
// the metrics.
func (w *workerFlags) bound(gw *gateway.Gateway) error {
	if w.prices != "" {
		data, err := os.ReadFile(w.prices)
		if err != nil {
			return fmt.Errorf("--model-prices: %w", err)
		}
		if gw.Prices, err = gateway.ParsePrices(w.prices, data); err != nil {
			return fmt.Errorf("--model-prices: %w", err)
		}
	}
	switch {
	case w.maxCostPerTask < 0 || math.IsNaN(w.maxCostPerTask) || math.IsInf(w.maxCostPerTask, 0):
		return usageErrorf("--max-cost-per-task %v: want US dollars, 0 or more", w.maxCostPerTask)
	case w.maxCostPerTask > 0 && gw.Prices == nil:
		return usageErrorf("--max-cost-per-task needs --model-prices: a cost is counted at the table's prices")
	case w.tokensPerMinute < 0:
		return usageErrorf("--tokens-per-minute %d: want 0 or more", w.tokensPerMinute)
	}
	gw.MaxCostPerTask, gw.TokensPerMinute = w.maxCostPerTask, w.tokensPerMinute
	if w.metrics != nil {
		gw.Observe = w.metrics.ModelUsed
	}
	return nil
}

// egressProxy is the proxy --sandbox-egress allows hosts through.
func (w *workerFlags) egressProxy() (*egress.Proxy, error) {
	if w.isolation != protocol.IsolationNamespaces {
		return nil, fmt.Errorf("--sandbox-egress needs --sandbox-isolation=%s: unjailed work shares the agent's network", protocol.IsolationNamespaces)
	}
	rules, err := egress.ParseRules(w.egress)
	if err != nil {
		return nil, fmt.Errorf("--sandbox-egress: %w", err)
	}
	return &egress.Proxy{Rules: rules}, nil
}

// sayGateway says on logw what the sandboxes' gateway holds for them.
func (w *workerFlags) sayGateway(logw io.Writer) {
	if w.gatewayKey != "" {
		fmt.Fprintf(logw, "model calls: agent CLIs reach %s through this worker's gateway, which holds %s and counts tokens\n", w.modelAPI, w.gatewayKey)
	}
	if w.gw != nil && (w.gatewayKey != "" || w.openAIKey != "") {
		if w.gw.Prices != nil {
			fmt.Fprintf(logw, "model calls: priced at %s (%d models)", w.prices, len(w.gw.Prices))
			if w.maxCostPerTask > 0 {
				fmt.Fprintf(logw, ", at most %s a task", protocol.USD(w.maxCostPerTask))
			}
			fmt.Fprintln(logw)
		}
		if w.tokensPerMinute > 0 {
			fmt.Fprintf(logw, "model calls: held while the last minute's tokens reach %d\n", w.tokensPerMinute)
		}
	}
	if w.openAIKey != "" {
		fmt.Fprintf(logw, "model calls: agent CLIs that speak an OpenAI-compatible API reach %s through this worker's gateway (OPENAI_BASE_URL), which holds %s and counts tokens\n", w.openAIAPI, w.openAIKey)
	}
	if w.gitReads {
		fmt.Fprintf(logw, "clones: agents read their repositories at %s through this worker's gateway, which holds its token; this worker pushes and opens the pull requests\n", w.forge.URL)
	}
}
