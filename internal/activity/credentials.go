package activity

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Credentials are a definition's credentials: which Kubernetes Secret
// keys give its sandboxes' agent the forge token (GitHub) and the agent
// CLI's API key (Anthropic). References only, never values: they travel
// in workflow history.
type Credentials struct {
	GitHub    *sandbox.SecretRef `json:",omitempty"`
	Anthropic *sandbox.SecretRef `json:",omitempty"`
}

// CredentialVariables are the agent's secret variables that a
// definition's credentials give values; cmd sets them from the agent's
// names.
type CredentialVariables struct {
	// Forge hold the forge token (the agent's and git's variables).
	Forge []string
	// AgentCLI holds the agent CLI's API key.
	AgentCLI string
	// AgentCLIList is the variable that lists, comma-separated, the
	// variables only the agent CLI sees: AgentCLI joins it.
	AgentCLIList string
}

// credential is one of a definition's credentials and the variables it
// gives values.
type credential struct {
	field string
	what  string
	ref   *sandbox.SecretRef
	vars  []string
}

// credentials pairs c with the variables it gives values, in the order
// of the definition's fields.
func (v CredentialVariables) credentials(c *Credentials) []credential {
	if c == nil {
		return nil
	}
	var out []credential
	if c.GitHub != nil {
		out = append(out, credential{"credentials.github.secret_ref", "the agent's forge token", c.GitHub, v.Forge})
	}
	if c.Anthropic != nil {
		var vars []string
		if v.AgentCLI != "" {
			vars = []string{v.AgentCLI}
		}
		out = append(out, credential{"credentials.anthropic.secret_ref", "the agent CLI's API key", c.Anthropic, vars})
	}
	return out
}

// secretRefs are the variables c gives values and their references; env
// gains the agent CLI's key in its list of the CLI's own variables, so
// that a key the worker itself does not give stays the CLI's alone.
func (v CredentialVariables) secretRefs(c *Credentials, env map[string]string) map[string]sandbox.SecretRef {
	refs := map[string]sandbox.SecretRef{}
	for _, cr := range v.credentials(c) {
		for _, name := range cr.vars {
			refs[name] = *cr.ref
		}
	}
	if c != nil && c.Anthropic != nil && v.AgentCLI != "" && v.AgentCLIList != "" {
		names := strings.Split(env[v.AgentCLIList], ",")
		if !slices.Contains(names, v.AgentCLI) {
			names = append(names, v.AgentCLI)
		}
		names = slices.DeleteFunc(names, func(s string) bool { return s == "" })
		slices.Sort(names)
		env[v.AgentCLIList] = strings.Join(names, ",")
	}
	if len(refs) == 0 {
		return nil
	}
	return refs
}

// notes say which of c the sandbox did not apply (its provider
// ignored their variables, or this worker names none) and where the
// values come from instead.
func (v CredentialVariables) notes(c *Credentials, provider string, ignored []string) []string {
	var out []string
	for _, cr := range v.credentials(c) {
		switch {
		case len(cr.vars) == 0:
			out = append(out, fmt.Sprintf("%s (Secret %s) was not applied: this worker names no variable for %s, which comes from its own configuration", cr.field, cr.ref, cr.what))
		case slices.ContainsFunc(cr.vars, func(n string) bool { return slices.Contains(ignored, n) }):
			out = append(out, fmt.Sprintf("%s (Secret %s) does not apply to %s sandboxes: %s comes from the worker's own configuration", cr.field, cr.ref, provider, cr.what))
		}
	}
	return out
}

// cloneSecrets copies the worker's secrets for one sandbox.
func cloneSecrets(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}
