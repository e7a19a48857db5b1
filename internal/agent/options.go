package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/gomaxprocs"
	"github.com/fleetlift/fleetlift/internal/jail"
)

// DefaultAgent is the agent used when the manifest names none.
const DefaultAgent = "claude-code"

// DefaultAgents are the built-in agent CLIs; each reads the prompt on
// standard input.
func DefaultAgents() map[string][]string {
	return map[string][]string{
		"claude-code": {"claude", "-p", "--output-format", "text", "--permission-mode", "acceptEdits"},
	}
}

// DefaultOrphanAfter is how long a sandbox waits for a worker to come
// back before it ends itself (Options.OrphanAfter as fleetlift-agent
// serve sets it unless told).
const DefaultOrphanAfter = 10 * time.Minute

// Defaults for Options.
const (
	DefaultManifestPoll = 50 * time.Millisecond
	// DefaultSteeringPoll is how often the agent looks for steering.json:
	// how long a cancel, an approval or a steer waits at most. Each look
	// wakes the agent from its wait, which on this project's test machine
	// (a virtual machine) cost more than the look: at 500 ms, an agent
	// whose command slept 15 seconds used 65-68 ms of CPU; at 2 s, 42-50.
	DefaultSteeringPoll = 2 * time.Second
	// DefaultMaxIterations bounds agent runs per repository and stretch
	// of work when the manifest sets no limit.
	DefaultMaxIterations = 10
	// DefaultMaxVerifierRetries bounds re-runs after failing verifiers.
	DefaultMaxVerifierRetries = 3
	// DefaultMaxSteeringIterations bounds steers when the manifest sets
	// no limit.
	DefaultMaxSteeringIterations = 5
)

// Options configure the agent.
type Options struct {
	// Workspace is the sandbox's workspace; repositories are cloned into
	// it and the protocol files live in its .fleetlift directory.
	Workspace string
	// AgentCLI, when set, is the argv of the agent CLI whatever agent the
	// manifest names. Otherwise EnvAgentCLI in Env, then Agents, then
	// DefaultAgents decide.
	AgentCLI []string
	// Agents adds or replaces agent CLIs by name.
	Agents map[string][]string
	// Git runs git; nil means a git.Git with Env.
	Git *git.Git
	// Env is the agent's environment; nil means os.Environ(). Commands
	// start from it without the agent's own settings and credentials (see
	// commandEnvs): only git's remote operations see the git token.
	Env []string
	// Lease, when set with OrphanAfter, is a file the sandbox provider
	// touches while a worker watches the sandbox: once it is older than
	// OrphanAfter (or gone), the run stops, failed, and the agent exits,
	// so that a sandbox whose worker never returns ends itself.
	Lease       string
	OrphanAfter time.Duration
	// GitGateway, when set, is the Unix socket of the worker's gateway
	// (package gateway): the agent clones the repositories at the forge
	// (http(s) URLs at the Git's TokenOrigins) through it, with its
	// sandbox's key (protocol.GatewayKeyFile), and the worker adds the
	// token; the agent then needs none.
	GitGateway string
	// GitGatewayFiles, with GitGateway, says that the gateway serves the
	// local repositories (file:// URLs and absolute paths) too, from the
	// worker's files, which this sandbox cannot see (a Kubernetes pod):
	// the agent clones them through it instead of from FileRoots.
	GitGatewayFiles bool
	// ModelAPIs are the model APIs the GitGateway's gateway serves, for
	// an agent CLI that runs unjailed (Isolation nil): the agent relays a
	// port of its own loopback to the gateway while the CLI runs, and the
	// CLI gets it as those APIs' base URL with the sandbox's key. (A
	// jailed CLI reaches it through Isolation.Gateway.)
	ModelAPIs []string
	// FileRoots are the directories local repositories (file:// URLs and
	// absolute paths) may be cloned from and pushed to; a local
	// repository anywhere else is refused, and with none, every one is.
	// The operator's --allow-file-root sets them, never a definition.
	FileRoots []string
	// Isolation, when set, runs every command (setup, transform, agent
	// CLI, verifiers) in a jail: see Isolation. Nil runs them as plain
	// processes of the agent, able to read and write whatever the agent
	// can; only an operator who accepts that opts into it.
	Isolation *Isolation
	// ManifestPoll and SteeringPoll are how often manifest.json and
	// steering.json are looked for.
	ManifestPoll time.Duration
	SteeringPoll time.Duration
	// MaxDiffLines cuts each file's diff; 0 means git.DefaultMaxLines.
	MaxDiffLines int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives progress; nil discards it.
	Log *slog.Logger
	// Workers, when set, is told before the run starts how many
	// repositories its manifest works on at once: the agent's own
	// process (the serve command) runs on one processor until more are
	// wanted.
	Workers func(n int)
}

// Isolation says how the agent jails the commands it runs (package jail):
// each sees its workspace and HOME writable, the rest of the file system
// read-only, the protocol directory and Hidden empty, a private /tmp and
// no other process, and nothing it starts outlives it.
type Isolation struct {
	// Self runs this executable's jail entry point (jail.Main), such as
	// ["/proc/self/exe", "jail"].
	Self []string
	// Hidden are directories and files no command sees: the worker's
	// state, other sandboxes, credentials of the user the agent runs as.
	Hidden []string
	// Shown are directories and files under Hidden ones that commands
	// may still read (toolchains in a hidden home).
	Shown []string
	// Egress, when set, is the Unix socket of the worker's egress proxy
	// (package egress): every jail forwards EgressPort on its loopback to
	// it, and commands get it as their HTTP and HTTPS proxy. Without it,
	// a jailed command reaches no network at all.
	Egress string
	// Limits bound each command (see jail.Limits).
	Limits jail.Limits
	// DiskReserve, when positive, is the free space in bytes the agent
	// keeps on the disk holding the workspace: a command that leaves
	// less is stopped, and its step fails saying so.
	DiskReserve int64
	// Gateway, when set, is the Unix socket of the worker's model
	// gateway (package gateway): the agent CLI's jail forwards
	// GatewayPort on its loopback to it, and the CLI gets it as its
	// Anthropic API (ANTHROPIC_BASE_URL) with the sandbox's own key to it
	// (protocol.GatewayKeyFile) as ANTHROPIC_API_KEY: the real key stays
	// with the worker.
	Gateway string
	// GatewayAPIs are the model APIs the gateway serves (gateway.APIs):
	// the agent CLI is pointed at the gateway for these alone, and
	// reaches any other as its own variables say.
	GatewayAPIs []string
}

// GatewayPort is the port on the agent CLI's loopback that leads to the
// model gateway (Isolation.Gateway).
const GatewayPort = 3129

// EgressPort is the port on a jail's loopback that leads to the egress
// proxy (Isolation.Egress).
const EgressPort = 3128

// proxyEnv are the variables that send a command's HTTP and HTTPS
// requests through the egress proxy, in the spellings tools read, with
// the jail's own loopback left direct.
func proxyEnv() []string {
	proxy := "http://127.0.0.1:" + strconv.Itoa(EgressPort)
	noProxy := "localhost,127.0.0.1,::1"
	return []string{
		"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "http_proxy=" + proxy, "https_proxy=" + proxy,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
	}
}

func (o Options) withDefaults() Options {
	if o.Env == nil {
		o.Env = os.Environ()
	}
	// When the sandbox provider started the agent with a GOMAXPROCS of
	// its own, its commands get the sandbox's back.
	o.Env = gomaxprocs.Restore(o.Env, protocol.EnvCommandGOMAXPROCS)
	if o.Git == nil {
		o.Git = &git.Git{Env: o.Env}
	}
	if o.ManifestPoll <= 0 {
		o.ManifestPoll = DefaultManifestPoll
	}
	if o.SteeringPoll <= 0 {
		o.SteeringPoll = DefaultSteeringPoll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

func lookupEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// agentCLI resolves the argv for an agent name.
func (o Options) agentCLI(name string) ([]string, error) {
	if len(o.AgentCLI) > 0 {
		return o.AgentCLI, nil
	}
	if raw := lookupEnv(o.Env, protocol.EnvAgentCLI); raw != "" {
		var argv []string
		if err := json.Unmarshal([]byte(raw), &argv); err != nil || len(argv) == 0 || argv[0] == "" {
			return nil, fmt.Errorf("%s must be a JSON array of strings such as [\"claude\", \"-p\"]: %q", protocol.EnvAgentCLI, raw)
		}
		return argv, nil
	}
	if name == "" {
		name = DefaultAgent
	}
	if argv, ok := o.Agents[name]; ok && len(argv) > 0 {
		return argv, nil
	}
	if argv, ok := DefaultAgents()[name]; ok {
		return argv, nil
	}
	return nil, fmt.Errorf("unknown agent %q: configure it or set %s", name, protocol.EnvAgentCLI)
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
