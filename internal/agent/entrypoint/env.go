package entrypoint

import "strings"

// Variables that configure the entrypoint itself.
const (
	// EnvUser names the agent user when --user is not given: NAME, UID
	// or UID:GID.
	EnvUser = "AGENT_USER"
	// EnvWorkdir is the working directory when --workdir is not given.
	EnvWorkdir = "AGENT_WORKDIR"
)

// strippedNames are the variables the agent never sees, by exact name:
// the worker's state and webhook secret, its Kubernetes namespace and
// configuration, seed 003's session credentials, the forge's token and
// URL (the worker alone proposes changes: package activity's Deliver),
// and the entrypoint's own settings.
var strippedNames = map[string]bool{
	"FLEETLIFT_FORGE_TOKEN":    true,
	"FLEETLIFT_FORGE_URL":      true,
	"FLEETLIFT_STATE_DIR":      true,
	"FLEETLIFT_WEBHOOK_SECRET": true,
	"FLEETLIFT_NAMESPACE":      true,
	"KUBECONFIG":               true,
	"SESSION_TOKEN":            true,
	"CONTROL_PLANE_URL":        true,
	"SESSION_ID":               true,
	EnvUser:                    true,
	EnvWorkdir:                 true,
}

// strippedPrefixes are the variables the agent never sees, by prefix:
// Temporal's endpoint and credentials (fleetlift's and the Temporal
// tools' own), the container engine's (DOCKER_HOST, DOCKER_CERT_PATH,
// ...) and the cluster's (KUBERNETES_SERVICE_HOST, ...).
var strippedPrefixes = []string{"FLEETLIFT_TEMPORAL_", "TEMPORAL_", "DOCKER_", "KUBERNETES_"}

// Stripped reports whether the entrypoint removes the variable name from
// the agent's environment. The agent's own settings and credentials
// (FLEETLIFT_GIT_TOKEN, FLEETLIFT_GIT_TOKEN_ORIGINS, FLEETLIFT_ALLOW_FILE_ROOTS,
// FLEETLIFT_AGENT_CLI, FLEETLIFT_AGENT_CLI_ENV and the variables it names)
// are kept: the agent needs them and keeps them from every command it
// runs. A control-plane variable is stripped even when
// FLEETLIFT_AGENT_CLI_ENV names it.
func Stripped(name string) bool {
	if strippedNames[name] {
		return true
	}
	for _, p := range strippedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Environ returns the agent's environment: env without the stripped
// variables and malformed entries, with HOME set to the account's home and
// USER and LOGNAME to its name (removed when it has none).
func Environ(env []string, a Account) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || Stripped(k) {
			continue
		}
		switch k {
		case "HOME", "USER", "LOGNAME":
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "HOME="+a.Home)
	if a.Name != "" {
		out = append(out, "USER="+a.Name, "LOGNAME="+a.Name)
	}
	return out
}
