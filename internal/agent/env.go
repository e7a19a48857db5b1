package agent

import (
	"net/url"
	"slices"
	"strings"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
)

// secretValues are the values never written to status, result or logs:
// the git token, the agent CLI's variables and every variable whose name
// says it is a secret.
func secretValues(env []string, g *git.Git) []string {
	tokenVar := g.TokenVariable()
	cliOnly := agentCLIVariables(env)
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if len(v) < 8 {
			continue
		}
		if (k == tokenVar || cliOnly[k] || git.SecretName(k)) && !onlyOrigins(v) {
			out = append(out, v)
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

// onlyOrigins reports whether v is a comma-separated list of origins
// (https://host[:port]), as EnvGitTokenOrigins is: its name says TOKEN,
// but an origin holds no credential, and replacing it would cut the host
// out of every URL in an error, a log or a diff ("clone
// REDACTED/acme/service-a.git").
func onlyOrigins(v string) bool {
	for _, o := range strings.Split(v, ",") {
		u, err := url.Parse(strings.TrimSpace(o))
		if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.Fragment != "" || (u.Scheme != "https" && u.Scheme != "http") {
			return false
		}
	}
	return true
}

// agentCLIVariables are the names EnvAgentCLIEnv lists: variables only the
// agent CLI sees.
func agentCLIVariables(env []string) map[string]bool {
	names := map[string]bool{}
	for _, n := range strings.Split(lookupEnv(env, protocol.EnvAgentCLIEnv), ",") {
		if n = strings.TrimSpace(n); n != "" {
			names[n] = true
		}
	}
	return names
}

// commandEnvs are the environments the agent's commands start from: base
// for setup, deterministic commands and verifiers; cli for the agent CLI,
// which also gets the variables EnvAgentCLIEnv names (its model's
// credentials).
//
// Neither holds a variable that configures the agent (FLEETLIFT_*: the
// agent CLI, the file roots it may clone), the git token, or any variable
// whose value is the git token, or a forge token an environment still
// hands the agent (envForgeToken), under another name: only git's remote
// operations in the agent itself see the git token.
// envForgeToken is where the worker keeps the forge's token. No sandbox
// is given it (the worker proposes changes itself), but an agent started
// by hand in such an environment keeps it and its copies from commands
// all the same.
const envForgeToken = "FLEETLIFT_FORGE_TOKEN"

func commandEnvs(env []string, g *git.Git) (base, cli []string) {
	tokenVar := g.TokenVariable()
	cliOnly := agentCLIVariables(env)
	var credentials []string
	for _, name := range []string{tokenVar, envForgeToken} {
		if v := lookupEnv(env, name); v != "" {
			credentials = append(credentials, v)
		}
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == tokenVar, strings.HasPrefix(k, "FLEETLIFT_"):
			continue
		case v != "" && slices.Contains(credentials, v):
			continue
		case cliOnly[k]:
			cli = append(cli, kv)
			continue
		}
		base = append(base, kv)
		cli = append(cli, kv)
	}
	return base, cli
}

// withEnv returns env with kvs ("K=V") set, replacing earlier values.
func withEnv(env []string, kvs ...string) []string {
	out := make([]string, 0, len(env)+len(kvs))
	set := map[string]bool{}
	for _, kv := range kvs {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, kvs...)
}
