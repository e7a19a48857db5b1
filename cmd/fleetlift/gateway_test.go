package main

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// With the model gateway on, the model's key stays in the worker: no
// sandbox gets it, though --agent-env names it; without the gateway the
// agent CLI gets it, as before.
func TestModelKeyStaysWithTheGateway(t *testing.T) {
	const key = "sk-ant-worker-key-canary"
	t.Setenv(envAnthropicAPIKey, key)
	for _, tc := range []struct {
		name      string
		api       string
		isolation string
		inSandbox bool
	}{
		{"gateway", "https://api.anthropic.com", protocol.IsolationNamespaces, false},
		{"no gateway", "", protocol.IsolationNamespaces, true},
		{"unjailed", "https://api.anthropic.com", protocol.IsolationNone, false},
	} {
		w := &workerFlags{isolation: tc.isolation, modelAPI: tc.api, modelKeyEnv: envAnthropicAPIKey, agentEnv: []string{envAnthropicAPIKey}}
		gw, err := w.gateway()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (gw != nil) == tc.inSandbox {
			t.Errorf("%s: gateway %v", tc.name, gw != nil)
		}
		if gw != nil && gw.Key != key {
			t.Errorf("%s: the gateway does not hold the key", tc.name)
		}
		_, secrets, err := w.sandbox()
		if err != nil {
			t.Fatal(err)
		}
		if got := secrets[envAnthropicAPIKey] == key; got != tc.inSandbox {
			t.Errorf("%s: the key in sandboxes' secrets: %v; want %v", tc.name, got, tc.inSandbox)
		}
	}
	w := &workerFlags{isolation: protocol.IsolationNamespaces, modelAPI: "api.anthropic.com", modelKeyEnv: envAnthropicAPIKey}
	if _, err := w.gateway(); err == nil {
		t.Error("--model-gateway without a scheme was taken")
	}
}

// The forge's token stays with the worker: the gateway of local and
// Docker sandboxes serves their clones with it (to the forge's origin
// alone), the worker pushes with it, and no sandbox is given it, jailed
// or not. Without a gateway, sandboxes get the clone token alone.
func TestForgeTokenStaysWithTheWorker(t *testing.T) {
	const token = "forge-token-canary-7b3e"
	forge := func() *forgeSetup {
		return &forgeSetup{Name: "gitea", Type: "gitea", URL: "https://git.example.com", TokenEnv: "FLEETLIFT_FORGE_TOKEN", Token: token}
	}
	for _, isolation := range []string{protocol.IsolationNamespaces, protocol.IsolationNone} {
		w := &workerFlags{isolation: isolation, forge: forge()}
		gw, err := w.gateway()
		if err != nil || gw == nil || gw.Git == nil {
			t.Fatalf("%s: gateway %+v, %v", isolation, gw, err)
		}
		if g := gw.Git.Git; g == nil || g.TokenEnv != "FLEETLIFT_FORGE_TOKEN" || !slices.Equal(g.TokenOrigins, []string{"https://git.example.com"}) {
			t.Errorf("%s: the gateway reads repositories with %+v; want the forge's token, for the forge's origin alone", isolation, g)
		}
		env, secrets, err := w.sandbox()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range env {
			if strings.Contains(v, token) {
				t.Errorf("%s: sandboxes' %s holds the token", isolation, k)
			}
		}
		for k, v := range secrets {
			if strings.Contains(v, token) {
				t.Errorf("%s: sandboxes' secret %s holds the token", isolation, k)
			}
		}
	}
	w := &workerFlags{isolation: protocol.IsolationNamespaces, forge: forge()}
	_, secrets, err := w.sandbox()
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"FLEETLIFT_GIT_TOKEN": token}; !maps.Equal(secrets, want) {
		t.Errorf("without a gateway, sandboxes' secrets %v; want the clone token alone", secrets)
	}
}

// With --gateway-listen and --gateway-url, Kubernetes sandboxes clone
// and call their model through the worker's gateway: the worker serves it
// where it says, the pods' secrets lose the references of the clone token
// and of the model key the gateway holds (their Secrets are not mounted),
// and a half-given or wrong address is refused.
func TestKubernetesSandboxesUseTheGateway(t *testing.T) {
	forge := &forgeSetup{Name: "gitea", Type: "gitea", URL: "https://git.example.com", TokenEnv: "FLEETLIFT_FORGE_TOKEN", Token: "forge-token"}
	refs := []string{"FLEETLIFT_GIT_TOKEN=github-credentials/token", "ANTHROPIC_API_KEY=claude-credentials/api-key"}
	t.Setenv("ANTHROPIC_API_KEY", "sk-worker-key")
	for _, c := range []struct {
		name     string
		modelAPI string
		apis     []string
		secrets  map[string]string
	}{
		{"clones and model", "https://api.anthropic.com", []string{"anthropic"}, map[string]string{}},
		{"clones alone", "", nil, map[string]string{"ANTHROPIC_API_KEY": ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log strings.Builder
			w := &workerFlags{isolation: protocol.IsolationNamespaces, forge: forge, agentEnv: []string{"ANTHROPIC_API_KEY"},
				modelAPI: c.modelAPI, modelKeyEnv: envAnthropicAPIKey,
				kube: kubeFlags{secrets: refs, gatewayListen: "127.0.0.1:0", gatewayURL: "http://10.1.2.3:8090"}}
			gw, err := w.kubeGateway(&log)
			if err != nil || gw == nil || gw.URL != "http://10.1.2.3:8090" || gw.Gateway.Git == nil || !w.gitReads {
				t.Fatalf("gateway %+v, %v; want one serving clones at the URL given", gw, err)
			}
			if !slices.Equal(gw.Gateway.APIs(), c.apis) {
				t.Errorf("the gateway serves %v; want %v", gw.Gateway.APIs(), c.apis)
			}
			if !strings.Contains(log.String(), "reached at") && !strings.Contains(log.String(), "through this worker's gateway") {
				t.Errorf("the worker's log does not say where clones go: %q", log.String())
			}
			_, secrets, err := w.kubeSandbox()
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(secrets, c.secrets) {
				t.Errorf("sandbox pods' secrets %v; want %v", secrets, c.secrets)
			}
		})
	}

	for _, k := range []kubeFlags{
		{gatewayListen: ":8090"},
		{gatewayURL: "http://10.1.2.3:8090"},
		{gatewayListen: ":8090", gatewayURL: "https://10.1.2.3:8090/path"},
	} {
		w := &workerFlags{forge: forge, kube: k}
		if _, err := w.kubeGateway(io.Discard); err == nil || !strings.Contains(err.Error(), "--gateway-") {
			t.Errorf("%+v: %v; want an error naming the flag", k, err)
		}
	}
}

// With --openai-gateway, an OpenAI-compatible API's key stays in the
// worker as the Messages API's does, and the gateway serves that API to
// agent CLIs; a URL with its version in it is refused, saying how to
// write it.
func TestOpenAIKeyStaysWithTheGateway(t *testing.T) {
	const key = "sk-openai-worker-key-canary"
	t.Setenv("OPENAI_API_KEY", key)
	w := &workerFlags{isolation: protocol.IsolationNamespaces, openAIAPI: "https://api.openai.com", openAIKeyEnv: "OPENAI_API_KEY", agentEnv: []string{"OPENAI_API_KEY"}}
	gw, err := w.gateway()
	if err != nil || gw == nil || gw.OpenAI == nil || gw.OpenAI.Key != key || !slices.Equal(gw.APIs(), []string{"openai"}) {
		t.Fatalf("gateway %+v, %v; want it to serve the OpenAI-compatible API with the key", gw, err)
	}
	_, secrets, err := w.sandbox()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := secrets["OPENAI_API_KEY"]; ok {
		t.Error("the OpenAI key goes to sandboxes though the gateway holds it")
	}
	w = &workerFlags{isolation: protocol.IsolationNamespaces, openAIAPI: "https://api.openai.com/v1", openAIKeyEnv: "OPENAI_API_KEY"}
	if _, err := w.gateway(); err == nil || !strings.Contains(err.Error(), "without its version") {
		t.Errorf("--openai-gateway with /v1: %v; want it refused", err)
	}
}

// --model-prices, --max-cost-per-task and --tokens-per-minute reach the
// gateway; a mistake in them stops the worker saying which flag.
func TestGatewayTakesPricesAndBounds(t *testing.T) {
	t.Setenv(envAnthropicAPIKey, "sk-ant-worker-key")
	dir := t.TempDir()
	prices := filepath.Join(dir, "prices.yaml")
	if err := os.WriteFile(prices, []byte("claude-sonnet-4-5: {input: 3, output: 15}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("claude-sonnet-4-5: {input: 3, ouput: 15}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &workerFlags{isolation: protocol.IsolationNamespaces, modelAPI: "https://api.anthropic.com", modelKeyEnv: envAnthropicAPIKey,
		prices: prices, maxCostPerTask: 2.5, tokensPerMinute: 400000}
	gw, err := w.gateway()
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := gw.Prices.Lookup("claude-sonnet-4-5-20250929"); !ok || p.Output != 15 || gw.MaxCostPerTask != 2.5 || gw.TokensPerMinute != 400000 {
		t.Errorf("gateway prices %+v, bound $%v, pace %d; want the flags'", gw.Prices, gw.MaxCostPerTask, gw.TokensPerMinute)
	}
	// The tokens a minute are the account's: the worker keeps them with
	// every other worker calling as it (the account's budget on
	// Temporal), named by a digest of the key, never the key.
	var said strings.Builder
	w.shareModelPace(nil, &said)
	if got := said.String(); !strings.Contains(got, "400000 tokens a minute, shared with every worker calling api.anthropic.com as this account (fleetlift/model-budget/api.anthropic.com/") ||
		strings.Contains(got, "sk-ant-worker-key") {
		t.Errorf("the worker said %q; want the tokens a minute shared on the account's budget, without its key", got)
	}
	for _, tc := range []struct {
		w    workerFlags
		want string
	}{
		{workerFlags{prices: bad}, `--model-prices: ` + bad + `: claude-sonnet-4-5: want input, output, cache_write and cache_read in US dollars per million tokens: json: unknown field "ouput"`},
		{workerFlags{prices: filepath.Join(dir, "none.yaml")}, "--model-prices: open " + filepath.Join(dir, "none.yaml")},
		{workerFlags{maxCostPerTask: 5}, "--max-cost-per-task needs --model-prices"},
		{workerFlags{prices: prices, maxCostPerTask: -1}, "--max-cost-per-task -1: want US dollars, 0 or more"},
		{workerFlags{tokensPerMinute: -5}, "--tokens-per-minute -5: want 0 or more"},
		{workerFlags{prices: prices, modelAPI: "https://api.anthropic.com", modelKeyEnv: "FLEETLIFT_TEST_NO_SUCH_KEY"},
			"--model-prices, --max-cost-per-task and --tokens-per-minute bound the model gateway's calls: give it a model key"},
	} {
		w := tc.w
		w.isolation = protocol.IsolationNamespaces
		if w.modelKeyEnv == "" {
			w.modelAPI, w.modelKeyEnv = "https://api.anthropic.com", envAnthropicAPIKey
		}
		if _, err := w.gateway(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.w, err, tc.want)
		}
	}
}
