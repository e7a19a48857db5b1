package controller

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
)

// Policy is what the controller allows a request to ask for. The worker
// cannot change it: it lives in the controller's flags.
type Policy struct {
	// Images are the images requests may use: path.Match patterns, where
	// a trailing "*" also matches any rest (registry.example.com/team/*
	// allows every image below team/, with any tag).
	Images []string
	// RuntimeClass, when set, is the runtime class every request must
	// name (such as gvisor).
	RuntimeClass string
	// MaxMemory and MaxCPU, when set, bound the sandbox container's
	// limits and requests.
	MaxMemory, MaxCPU *resource.Quantity
	// Secrets are the Secrets credentials may name.
	Secrets []string
	// GitTokenOrigins are the origins the agent's git may send its clone
	// token to (protocol.EnvGitTokenOrigins in every sandbox pod), and
	// AgentCLI the agent CLI's argv as JSON (protocol.EnvAgentCLI; empty:
	// the agent's default): what the credentials are given to, which the
	// controller decides and a request cannot (PodEnv).
	GitTokenOrigins []string
	AgentCLI        string
	// NodeSelector is put on every sandbox pod; a request may not name
	// another value for any of its labels. NodeLabels are the other node
	// labels a request's nodeSelector may name: none unless the operator
	// lists them, so a request cannot place a sandbox beside the control
	// plane or any workload the operator keeps apart.
	NodeSelector map[string]string
	NodeLabels   []string
}

// PodNodeSelector is the node selector of spec's sandbox pod: the
// request's (Check allows only what may be chosen) and the policy's.
func (p Policy) PodNodeSelector(spec v1alpha1.SandboxRequestSpec) map[string]string {
	if len(spec.NodeSelector) == 0 && len(p.NodeSelector) == 0 {
		return nil
	}
	sel := maps.Clone(spec.NodeSelector)
	if sel == nil {
		sel = map[string]string{}
	}
	maps.Copy(sel, p.NodeSelector)
	return sel
}

// PodEnv is the environment of spec's sandbox container: the request's,
// and what the controller decides itself (Check refuses requests that
// set it): where the clone token may go, which agent CLI runs, and that
// every credential but the clone token is the agent CLI's alone (no
// command the agent runs sees it).
func (p Policy) PodEnv(spec v1alpha1.SandboxRequestSpec) map[string]string {
	env := maps.Clone(spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	if len(p.GitTokenOrigins) > 0 {
		env[protocol.EnvGitTokenOrigins] = strings.Join(p.GitTokenOrigins, ",")
	}
	if p.AgentCLI != "" {
		env[protocol.EnvAgentCLI] = p.AgentCLI
	}
	var cliOnly []string
	for _, c := range spec.Credentials {
		if c.EnvVar != git.DefaultTokenEnv {
			cliOnly = append(cliOnly, c.EnvVar)
		}
	}
	if len(cliOnly) > 0 {
		slices.Sort(cliOnly)
		env[protocol.EnvAgentCLIEnv] = strings.Join(slices.Compact(cliOnly), ",")
	}
	return env
}

// steersAgent reports whether a variable decides what code runs in the
// agent's process, which certificates it trusts, or where its credentials
// go: the controller's to set (PodEnv) or nobody's, never a request's.
func steersAgent(k string) bool {
	switch k {
	case "PATH", "GCONV_PATH", "BASH_ENV", "ENV", "NODE_OPTIONS",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
		protocol.EnvGitTokenOrigins, protocol.EnvAgentCLI, protocol.EnvAgentCLIEnv,
		"FLEETLIFT_FORGE_URL", "FLEETLIFT_FORGE_TOKEN":
		return true
	}
	return strings.HasPrefix(k, "LD_") || strings.HasPrefix(k, "GIT_")
}

// Refusal is a request the policy refuses, with every reason.
type Refusal struct {
	// Kinds name the rules broken: image, runtime-class, memory, cpu,
	// secret, env, node-selector.
	Kinds   []string
	Reasons []string
}

func (r *Refusal) Error() string { return strings.Join(r.Reasons, "; ") }

func (r *Refusal) add(kind, format string, args ...any) {
	if !slices.Contains(r.Kinds, kind) {
		r.Kinds = append(r.Kinds, kind)
	}
	r.Reasons = append(r.Reasons, fmt.Sprintf(format, args...))
}

// reservedEnv are variables the entrypoint reads to decide who the agent
// runs as and where: a request may not set them.
var reservedEnv = []string{"AGENT_USER", "AGENT_WORKDIR"}

// Check returns a *Refusal when spec, with the resources the controller
// gives it (effective), breaks the policy; nil otherwise.
func (p Policy) Check(spec v1alpha1.SandboxRequestSpec, effective v1alpha1.Resources) error {
	r := &Refusal{}
	if !p.imageAllowed(spec.Image) {
		r.add("image", "image %s is not allowed (allowed: %s)", spec.Image, strings.Join(p.Images, ", "))
	}
	if p.RuntimeClass != "" && spec.RuntimeClassName != p.RuntimeClass {
		r.add("runtime-class", "runtime class %q is required, not %q", p.RuntimeClass, spec.RuntimeClassName)
	}
	for _, l := range []struct {
		name string
		v    v1alpha1.ResourceList
	}{{"limit", effective.Limits}, {"request", effective.Requests}} {
		if p.MaxMemory != nil && l.v.Memory != nil && l.v.Memory.Cmp(*p.MaxMemory) > 0 {
			r.add("memory", "memory %s %s exceeds the maximum %s", l.name, l.v.Memory, p.MaxMemory)
		}
		if p.MaxCPU != nil && l.v.CPU != nil && l.v.CPU.Cmp(*p.MaxCPU) > 0 {
			r.add("cpu", "cpu %s %s exceeds the maximum %s", l.name, l.v.CPU, p.MaxCPU)
		}
	}
	credentialVars := map[string]bool{}
	for _, c := range spec.Credentials {
		credentialVars[c.EnvVar] = true
		if !slices.Contains(p.Secrets, c.Name) {
			r.add("secret", "credential %s names Secret %s, which requests may not use (the controller's --allowed-secret; allowed: %s)", c.EnvVar, c.Name, allowedList(p.Secrets))
		}
	}
	for k := range spec.Env {
		switch {
		case slices.Contains(reservedEnv, k):
			r.add("env", "env may not set %s: the controller decides who the agent runs as and where", k)
		case steersAgent(k):
			r.add("env", "env may not set %s: it decides what runs in the agent, what it trusts or where its credentials go, which the controller decides (--git-token-origin, --agent-cli)", k)
		case credentialVars[k]:
			r.add("env", "env sets %s, which a credential sets", k)
		case !validEnvName(k):
			r.add("env", "env name %q is not a valid variable name", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.NodeSelector)) {
		v := spec.NodeSelector[k]
		if want, ok := p.NodeSelector[k]; ok {
			if v != want {
				r.add("node-selector", "nodeSelector %s=%s contradicts the controller's --node-selector %s=%s", k, v, k, want)
			}
			continue
		}
		if !slices.Contains(p.NodeLabels, k) {
			r.add("node-selector", "nodeSelector may not name node label %s (the controller's --allowed-node-label; allowed: %s)", k, allowedList(p.NodeLabels))
		}
	}
	if len(r.Reasons) > 0 {
		slices.Sort(r.Reasons)
		return r
	}
	return nil
}

// allowedList is names, sorted and comma-separated, or "none".
func allowedList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(slices.Values(names)), ", ")
}

func (p Policy) imageAllowed(image string) bool {
	for _, pat := range p.Images {
		if ok, _ := path.Match(pat, image); ok {
			return true
		}
		if prefix, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(image, prefix) {
			return true
		}
	}
	return false
}

func validEnvName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
