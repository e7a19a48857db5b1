package activity_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/local"
)

// recording keeps the options of the last Provision.
type recording struct {
	sandbox.Provider
	opts sandbox.ProvisionOptions
}

func (r *recording) Provision(ctx context.Context, opts sandbox.ProvisionOptions) (*sandbox.Sandbox, error) {
	r.opts = opts
	return r.Provider.Provision(ctx, opts)
}

var vars = activity.CredentialVariables{
	Forge:        []string{"FLEETLIFT_FORGE_TOKEN", "FLEETLIFT_GIT_TOKEN"},
	AgentCLI:     "ANTHROPIC_API_KEY",
	AgentCLIList: "FLEETLIFT_AGENT_CLI_ENV",
}

// A definition's credentials reach the provider as references for the
// worker's forge token and agent CLI variables, the CLI's key listed as
// the CLI's alone; a local sandbox cannot apply them, and the sandbox's
// notes name the fields.
func TestDefinitionCredentials(t *testing.T) {
	p := localSandboxes(t)
	rec := &recording{Provider: p}
	a := &activity.Activities{Sandbox: rec, CredentialVariables: vars,
		SandboxEnv:     map[string]string{"FLEETLIFT_AGENT_CLI_ENV": "OPENAI_API_KEY"},
		SandboxSecrets: map[string]string{"FLEETLIFT_FORGE_TOKEN": "worker token", "FLEETLIFT_GIT_TOKEN": "worker token"}}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)

	for _, c := range []struct {
		name    string
		creds   *activity.Credentials
		refs    map[string]sandbox.SecretRef
		cliList string
		notes   []string
	}{
		{"none", nil, nil, "OPENAI_API_KEY", nil},
		{"both", &activity.Credentials{
			GitHub:    &sandbox.SecretRef{Secret: "team-github", Key: "token"},
			Anthropic: &sandbox.SecretRef{Secret: "team-claude", Key: "api-key"},
		}, map[string]sandbox.SecretRef{
			"FLEETLIFT_FORGE_TOKEN": {Secret: "team-github", Key: "token"},
			"FLEETLIFT_GIT_TOKEN":   {Secret: "team-github", Key: "token"},
			"ANTHROPIC_API_KEY":     {Secret: "team-claude", Key: "api-key"},
		}, "ANTHROPIC_API_KEY,OPENAI_API_KEY", []string{
			"credentials.github.secret_ref (Secret team-github/token) does not apply to local sandboxes: the agent's forge token comes from the worker's own configuration",
			"credentials.anthropic.secret_ref (Secret team-claude/api-key) does not apply to local sandboxes: the agent CLI's API key comes from the worker's own configuration",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref := provision(t, a, env, activity.ProvisionInput{SandboxID: "creds-" + c.name, Credentials: c.creds})
			if !maps.Equal(rec.opts.SecretRefs, c.refs) {
				t.Errorf("SecretRefs = %v; want %v", rec.opts.SecretRefs, c.refs)
			}
			if got := rec.opts.Env["FLEETLIFT_AGENT_CLI_ENV"]; got != c.cliList {
				t.Errorf("FLEETLIFT_AGENT_CLI_ENV = %q; want %q", got, c.cliList)
			}
			if !slices.Equal(ref.Notes, c.notes) {
				t.Errorf("notes = %q; want %q", ref.Notes, c.notes)
			}
			for _, n := range ref.Notes {
				if strings.Contains(n, "worker token") {
					t.Errorf("a note holds a secret: %s", n)
				}
			}
		})
	}
	if a.SandboxEnv["FLEETLIFT_AGENT_CLI_ENV"] != "OPENAI_API_KEY" {
		t.Errorf("the worker's own environment changed: %v", a.SandboxEnv)
	}
}

// A definition's sandbox placement reaches the provider; a local sandbox
// cannot apply it, and the sandbox's notes name the fields.
func TestDefinitionPlacement(t *testing.T) {
	p := localSandboxes(t)
	rec := &recording{Provider: p}
	a := &activity.Activities{Sandbox: rec}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	for _, c := range []struct {
		name      string
		placement *activity.Placement
		resources sandbox.Resources
		notes     []string
	}{
		{"none", nil, sandbox.Resources{}, nil},
		{"limits alone", nil, sandbox.Resources{Memory: "2Gi"}, nil},
		{"all", &activity.Placement{Namespace: "team-a", RuntimeClass: "gvisor", NodeSelector: map[string]string{"pool": "batch"}},
			sandbox.Resources{Memory: "2Gi", RequestMemory: "1Gi", RequestCPU: "500m"},
			[]string{"sandbox.namespace (team-a), sandbox.runtime_class (gvisor), sandbox.node_selector, sandbox.resources.requests.memory (1Gi), sandbox.resources.requests.cpu (500m): not applied to local sandboxes, which run where this worker runs them"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref := provision(t, a, env, activity.ProvisionInput{SandboxID: "place-" + strings.ReplaceAll(c.name, " ", "-"), Placement: c.placement, Resources: c.resources})
			if rec.opts.Resources != c.resources {
				t.Errorf("the provider got resources %+v, want %+v", rec.opts.Resources, c.resources)
			}
			if c.placement != nil && (rec.opts.Namespace != "team-a" || rec.opts.RuntimeClass != "gvisor" || !maps.Equal(rec.opts.NodeSelector, c.placement.NodeSelector)) {
				t.Errorf("the provider got namespace %q, runtime class %q, node selector %v", rec.opts.Namespace, rec.opts.RuntimeClass, rec.opts.NodeSelector)
			}
			if !slices.Equal(ref.Notes, c.notes) {
				t.Errorf("notes = %q; want %q", ref.Notes, c.notes)
			}
		})
	}
}

// localSandboxes is a local provider whose agent is testdata/agent.sh.
func localSandboxes(t *testing.T) *local.Provider {
	t.Helper()
	script, err := filepath.Abs("testdata/agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	p, err := local.New(local.Options{Root: t.TempDir(), AgentCommand: []string{script}, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
