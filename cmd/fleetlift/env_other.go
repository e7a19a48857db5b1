package main

import (
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	gitx "github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// otherEnv is a FLEETLIFT_ variable no flag reads that fleetlift, its
// controller, the agent in a sandbox or the project's scripts read on
// purpose, and what it is for.
type otherEnv struct{ name, use string }

// otherEnvs are every otherEnv, for docs/environment.md and so that a
// command does not warn about them: a Deployment's ConfigMap sets the
// controller's variables for every component, and fleetlift hands the
// agent's to its own child processes.
var otherEnvs = []otherEnv{
	{DefaultForgeTokenEnv, "the forge's token, unless --forge-token-env (or a --forge's token-env=) names another variable"},
	{gitx.DefaultTokenEnv, "the token the campaigns repository is cloned with; in a sandbox, the agent's clone token"},
	{gitx.UsernameEnv, "the user name sent with that token (default x-access-token)"},
	{"FLEETLIFT_TEMPORAL_API_KEY", "Temporal's API key, unless --temporal-api-key-env names another variable"},
	{"FLEETLIFT_WEBHOOK_SECRET", "the webhook secret, unless --webhook-secret-env names another variable"},
	{"FLEETLIFT_AGENT_BINARY", "the agent local sandboxes run (default: fleetlift-agent beside fleetlift)"},
	{protocol.EnvAllowFileRoots, "the old name of FLEETLIFT_ALLOW_FILE_ROOT, read when that is unset; also the agent's, set by fleetlift"},
	{"FLEETLIFT_SANDBOX_SECRETS", "the old name of FLEETLIFT_SANDBOX_SECRET_REF, read when that is unset"},
	{"FLEETLIFT_ALLOWED_IMAGES", "fleetlift-controller: the images SandboxRequests may use"},
	{"FLEETLIFT_ALLOWED_SECRETS", "fleetlift-controller: the Secrets credentials may name"},
	{"FLEETLIFT_AGENT_IMAGE", "fleetlift-controller: the image the agent is installed from"},
	{"FLEETLIFT_SANDBOX_BACKEND", "fleetlift-controller: what runs sandbox pods"},
	{"FLEETLIFT_WARM_POOLS", "fleetlift-controller: the warm pools that serve requests"},
	{protocol.EnvGitTokenOrigins, "fleetlift-controller and the agent: the origins the agent's git may send its token to"},
	{protocol.EnvAgentCLIEnv, "the agent: the variables only the agent CLI sees (set by fleetlift)"},
	{protocol.EnvPromptFile, "the agent CLI: the file holding its prompt (set by the agent)"},
	{protocol.EnvIteration, "the agent CLI: the steering iteration (set by the agent)"},
	{protocol.EnvAttempt, "the agent CLI: the attempt (set by the agent)"},
	{protocol.EnvWorkspace, "the agent CLI: the repository's working tree (set by the agent)"},
	{protocol.EnvRepository, "the agent CLI: the repository's URL (set by the agent)"},
	{protocol.EnvTransformationDir, "the agent CLI: the transformation repository (set by the agent)"},
	{protocol.EnvForEachName, "the agent CLI: the for_each target's name (set by the agent)"},
	{protocol.EnvForEachContext, "the agent CLI: the for_each target's context (set by the agent)"},
	{protocol.EnvSteeringPrompt, "the agent CLI: the steering feedback (set by the agent)"},
	{protocol.EnvGatewayAPIs, "the agent: the APIs the gateway serves it (set by fleetlift)"},
	{protocol.EnvGatewayEgress, "the agent in a Kubernetes sandbox: relay the work's egress to the worker's proxy through its gateway (set by fleetlift)"},
	{protocol.EnvGatewayFiles, "the agent in a Kubernetes sandbox: clone the task's local repositories through the worker's gateway, which serves them from --allow-file-root (set by fleetlift)"},
	{protocol.EnvCommandGOMAXPROCS, "the agent's commands: their GOMAXPROCS (set by the agent)"},
	{"FLEETLIFT_JAIL_GOMAXPROCS", "the jail: its commands' GOMAXPROCS (set by the agent)"},
	{spec.WorkerEnv, "fleetlift as its own definition evaluator (set by fleetlift)"},
	{"FLEETLIFT_SPEC_WORKER_MEMORY", "that evaluator's memory limit (set by fleetlift)"},
	{"FLEETLIFT_GITEA_BINARY", "tests: the gitea binary (default bin/gitea)"},
	{"FLEETLIFT_GITEA_STATIC_ROOT", "tests: gitea's templates (default: the module cache)"},
	{"FLEETLIFT_BENCH_PEAK_RSS", "benchmarks: the peak memory a benchmark reports"},
	{"FLEETLIFT_RELEASES", "the setup action: where releases are downloaded from"},
	{"FLEETLIFT_ROOT", "build/release.sh: the repository to build"},
	{"FLEETLIFT_BUILDER", "build/release.sh: who built the release, as its provenance names it (default: make dist)"},
}

// renamedEnv are variables that flags of several meanings used to read,
// and what replaced them.
var renamedEnv = map[string]string{
	"FLEETLIFT_OUTPUT": "FLEETLIFT_<COMMAND>_OUTPUT",
	"FLEETLIFT_DIR":    "FLEETLIFT_DEMO_DIR or FLEETLIFT_SCHEMA_DIR",
}

// envToken is a FLEETLIFT_ variable's name in a flag's value.
var envToken = regexp.MustCompile(`FLEETLIFT_[A-Z0-9_]+`)

// unreadEnv are the FLEETLIFT_ variables of environ (as os.Environ) that
// nothing reads: no flag of any command, no otherEnv, and none that a flag
// of cmd names (as --forge-token-env does). A renamed one
// says its new name.
func unreadEnv(cmd *cobra.Command, environ []string) []string {
	known := map[string]bool{}
	for _, o := range otherEnvs {
		known[o.name] = true
	}
	walkFlags(cmd.Root(), func(c *cobra.Command, f *pflag.Flag) {
		known[envName(c, f.Name)] = true
		if old := legacyEnv(f.Name); old != "" {
			known[old] = true
		}
	})
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		for _, name := range envToken.FindAllString(f.Value.String(), -1) {
			known[name] = true
		}
	})
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || known[name] {
			continue
		}
		if now, ok := renamedEnv[name]; ok {
			name += " (now " + now + ")"
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// walkFlags calls fn for each flag but --help of root and every command
// under it that is not hidden: the agent in a sandbox reads FLEETLIFT_
// variables of its own.
func walkFlags(root *cobra.Command, fn func(*cobra.Command, *pflag.Flag)) {
	if root.Hidden {
		return
	}
	visit := func(f *pflag.Flag) {
		if f.Name != "help" {
			fn(root, f)
		}
	}
	root.Flags().VisitAll(visit)
	root.PersistentFlags().VisitAll(visit)
	for _, sub := range root.Commands() {
		walkFlags(sub, fn)
	}
}
