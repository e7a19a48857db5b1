package main

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/agentcmd"
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
		{"gateway", "https://api.anthropic.com", agentcmd.IsolationNamespaces, false},
		{"no gateway", "", agentcmd.IsolationNamespaces, true},
		{"unjailed", "https://api.anthropic.com", agentcmd.IsolationNone, true},
	} {
		w := &workerFlags{isolation: tc.isolation, modelAPI: tc.api, modelKeyEnv: envAnthropicAPIKey, agentEnv: []string{envAnthropicAPIKey}}
		gw, err := w.modelGateway()
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
	w := &workerFlags{isolation: agentcmd.IsolationNamespaces, modelAPI: "api.anthropic.com", modelKeyEnv: envAnthropicAPIKey}
	if _, err := w.modelGateway(); err == nil {
		t.Error("--model-gateway without a scheme was taken")
	}
}
