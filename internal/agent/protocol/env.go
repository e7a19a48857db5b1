package protocol

// Environment variables the agent reads or sets.
const (
	// EnvAgentCLI overrides the agent CLI for every agent name: a JSON
	// array argv such as ["/usr/local/bin/my-agent", "--flag"].
	EnvAgentCLI = "FLEETLIFT_AGENT_CLI"
	// EnvPromptFile is set for the agent CLI: a file holding the prompt
	// (which is also on its standard input).
	EnvPromptFile = "FLEETLIFT_PROMPT_FILE"
	// EnvIteration is set for the agent CLI and deterministic commands:
	// the steering iteration, 0 before any steering.
	EnvIteration = "FLEETLIFT_ITERATION"
	// EnvAttempt is the attempt within an iteration, from 1; it grows
	// when verifiers fail and the agent runs again.
	EnvAttempt = "FLEETLIFT_ATTEMPT"
	// EnvWorkspace is the workspace directory.
	EnvWorkspace = "FLEETLIFT_WORKSPACE"
	// EnvRepository is the name of the repository a command runs in.
	EnvRepository = "FLEETLIFT_REPOSITORY"
	// EnvTransformationDir is the transformation repository's directory
	// in the transformation + targets layout: the workspace itself.
	EnvTransformationDir = "FLEETLIFT_TRANSFORMATION_DIR"
	// EnvForEachName and EnvForEachContext are the for_each target of a
	// report run.
	EnvForEachName    = "FLEETLIFT_FOR_EACH_NAME"
	EnvForEachContext = "FLEETLIFT_FOR_EACH_CONTEXT"
	// EnvSteeringPrompt is the reviewer's feedback when a deterministic
	// command runs again after a steer.
	EnvSteeringPrompt = "FLEETLIFT_STEERING_PROMPT"
	// EnvAgentCLIEnv names, comma-separated, the agent's variables that
	// only the agent CLI sees (its model's API key): never setup,
	// deterministic commands or verifiers.
	EnvAgentCLIEnv = "FLEETLIFT_AGENT_CLI_ENV"
	// EnvGitTokenOrigins lists, comma-separated, the origins git may send
	// the token to (git.Git.TokenOrigins): the operator's forge.
	EnvGitTokenOrigins = "FLEETLIFT_GIT_TOKEN_ORIGINS"
	// EnvAllowFileRoots lists, as a path list, Options.FileRoots.
	EnvAllowFileRoots = "FLEETLIFT_ALLOW_FILE_ROOTS"
	// EnvGatewayURL is the http://HOST:PORT of the worker's gateway when
	// the sandbox reaches it over the network (Kubernetes) rather than by
	// a socket (serve's --gateway-url); EnvGatewayAPIs lists the model
	// APIs it serves (comma-separated, serve's --gateway-api);
	// EnvGatewayEgress, when not empty, says that it serves the worker's
	// egress proxy too (serve's --gateway-egress).
	EnvGatewayURL    = "FLEETLIFT_GATEWAY_URL"
	EnvGatewayAPIs   = "FLEETLIFT_GATEWAY_APIS"
	EnvGatewayEgress = "FLEETLIFT_GATEWAY_EGRESS"
	// EnvGatewayFiles, when not empty, says that the gateway serves the
	// task's local repositories (file:// URLs and absolute paths) from
	// the worker's files (serve's --gateway-files).
	EnvGatewayFiles = "FLEETLIFT_GATEWAY_FILES"
)

// How fleetlift-agent serve isolates the commands it runs (its
// --isolation): IsolationNamespaces jails each (agent.Options.Isolation),
// IsolationNone runs them as plain processes. The worker and the
// controller name them in their own --sandbox-isolation.
const (
	IsolationNamespaces = "namespaces"
	IsolationNone       = "none"
)
