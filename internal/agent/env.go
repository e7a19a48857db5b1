package agent

import (
	"slices"
	"strings"

	"github.com/fleetlift/fleetlift/internal/git"
)

// secretWords mark environment variables whose values are secrets.
var secretWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL"}

// secretValues are the values never written to status, result or logs:
// the git token and every variable whose name says it is a secret.
func secretValues(env []string, g *git.Git) []string {
	tokenVar := g.TokenVariable()
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if len(v) < 8 {
			continue
		}
		up := strings.ToUpper(k)
		secret := k == tokenVar
		for _, w := range secretWords {
			secret = secret || strings.Contains(up, w)
		}
		if secret {
			out = append(out, v)
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

// commandEnv is the environment of every command the agent runs: its own
// without the git token, which only git's remote operations see, and
// without the agent CLI override.
func commandEnv(env []string, g *git.Git) []string {
	tokenVar := g.TokenVariable()
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == tokenVar || k == EnvAgentCLI {
			continue
		}
		out = append(out, kv)
	}
	return out
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
