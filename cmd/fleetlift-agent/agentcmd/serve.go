package agentcmd

import (
	"bufio"
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/jail"
)

// DefaultWorkspace is the sandbox workspace of seed 000.
const DefaultWorkspace = "/workspace"

// serveGit is the git of an agent serving workspace: its token goes to
// the origins the worker names, and its scratch repositories are made in
// the workspace's protocol directory (scratchDir), which the agent's
// commands cannot see and the sandbox's removal takes with it.
func serveGit(workspace string) (*git.Git, error) {
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, err
	}
	return &git.Git{
		TokenOrigins: splitList(os.Getenv(protocol.EnvGitTokenOrigins), ","),
		ScratchDir:   filepath.Join(ws, protocol.Dir, scratchDir),
	}, nil
}

// scratchDir is the directory of an agent's scratch repositories in its
// protocol directory.
const scratchDir = "git"

// NewServeCommand returns the serve command: wait for the manifest in the
// workspace, run it, and exit once a terminal phase is written; with
// --next-fd, serve the sandboxes the provider hands it next the same way
// (see protocol.Next), and exit once it hands none.
func NewServeCommand() *cobra.Command {
	var (
		workspace   string
		opts        agent.Options
		isolation   string
		hidden      []string
		shown       []string
		jailProg    string
		nextFD      int
		egress      string
		gateway     string
		gatewayURL  string
		gwEgress    bool
		gwFiles     bool
		limits      jail.Limits
		diskReserve int64
		gatewayAPIs []string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Wait for .fleetlift/manifest.json in the workspace and run it",
		Long: `serve waits for <workspace>/.fleetlift/manifest.json, then clones, transforms,
verifies and reports as the manifest says, leaving each change for the
worker to propose (.fleetlift/out/), writing status.json and result.json
and reading steering.json beside it.

The agent CLI for agentic runs is "claude -p --output-format text
--permission-mode acceptEdits" unless ` + protocol.EnvAgentCLI + ` holds a JSON array argv;
it alone sees the variables ` + protocol.EnvAgentCLIEnv + ` names (comma-separated).

An HTTPS token for git remotes comes from ` + git.DefaultTokenEnv + ` and goes only to
the origins ` + protocol.EnvGitTokenOrigins + ` lists (comma-separated, such as
https://github.com); no command the agent runs sees it. The agent holds no
forge credentials: it leaves each change as a bundle for the worker, which
checks it and pushes. Local repositories (file:// URLs and absolute
paths) are cloned only from under the directories ` + protocol.EnvAllowFileRoots + `
lists (a path list).

Every command runs jailed (--isolation ` + protocol.IsolationNamespaces + `): in its own user, mount,
PID and network namespaces, in a session of its own, with only its
workspace, HOME and a private /tmp writable, the protocol directory and
--hide paths out of sight, no network but its own loopback and the egress
proxy of --egress-socket, and nothing it starts left running after it. The run fails when the kernel does not
allow that; --isolation ` + protocol.IsolationNone + ` runs commands as plain processes instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ctl *os.File
			if nextFD > 0 {
				// An unjailed command could leave behind what the next
				// sandbox's work would find.
				if isolation != protocol.IsolationNamespaces {
					return fmt.Errorf("serve: --next-fd needs --isolation %s", protocol.IsolationNamespaces)
				}
				// Nothing the agent runs inherits it: the work must
				// not speak for the agent.
				if err := closeOnExec(nextFD); err != nil {
					return fmt.Errorf("serve: --next-fd %d: %w", nextFD, err)
				}
				if ctl = os.NewFile(uintptr(nextFD), "next"); ctl == nil {
					return fmt.Errorf("serve: --next-fd %d is not open", nextFD)
				}
				defer ctl.Close()
			}
			opts.FileRoots = splitList(os.Getenv(protocol.EnvAllowFileRoots), string(filepath.ListSeparator))
			if gateway != "" && !filepath.IsAbs(gateway) {
				return fmt.Errorf("serve: --gateway %q must be an absolute path", gateway)
			}
			if gatewayURL != "" {
				if gateway != "" {
					return fmt.Errorf("serve: --gateway and --gateway-url: give the worker's gateway one way")
				}
				if gwEgress && (egress != "" || isolation != protocol.IsolationNamespaces) {
					return fmt.Errorf("serve: --gateway-egress needs --isolation %s and no --egress-socket", protocol.IsolationNamespaces)
				}
				pdir, err := filepath.Abs(filepath.Join(workspace, protocol.Dir))
				if err != nil {
					return fmt.Errorf("serve: %w", err)
				}
				relay, err := agent.NewGatewayRelay(gatewayURL, pdir, gwEgress)
				if err != nil {
					return fmt.Errorf("serve: --gateway-url: %w", err)
				}
				defer relay.Close()
				gateway, egress = relay.Socket, cmp.Or(relay.Egress, egress)
			} else if gwEgress {
				return fmt.Errorf("serve: --gateway-egress needs --gateway-url")
			}
			opts.GitGateway = gateway
			if gwFiles && gateway == "" {
				return fmt.Errorf("serve: --gateway-files needs --gateway or --gateway-url")
			}
			opts.GitGatewayFiles = gwFiles
			switch isolation {
			case protocol.IsolationNamespaces:
				self, err := jailSelf(cmd, jailProg)
				if err != nil {
					return fmt.Errorf("serve: %w", err)
				}
				if egress != "" && !filepath.IsAbs(egress) {
					return fmt.Errorf("serve: --egress-socket %q must be an absolute path", egress)
				}
				opts.Isolation = &agent.Isolation{Self: self, Hidden: hidden, Shown: shown, Egress: egress, Limits: limits, Gateway: gateway, GatewayAPIs: gatewayAPIs, DiskReserve: diskReserve}
			case protocol.IsolationNone:
				if gateway != "" {
					opts.ModelAPIs = gatewayAPIs
				}
				if egress != "" {
					return fmt.Errorf("serve: --egress-socket needs --isolation %s: unjailed commands share the agent's network", protocol.IsolationNamespaces)
				}
				// Unjailed commands run as the agent's user: keep them
				// out of its environment (its tokens) and memory.
				if err := undumpable(); err != nil {
					return fmt.Errorf("serve: %w", err)
				}
			default:
				return fmt.Errorf("--isolation %q: want %s or %s", isolation, protocol.IsolationNamespaces, protocol.IsolationNone)
			}
			opts.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			opts.Workers = func(n int) {
				if n > 1 {
					runtime.SetDefaultGOMAXPROCS()
				}
			}
			var next *bufio.Reader
			if ctl != nil {
				next = newNextReader(ctl)
			}
			for {
				g, err := serveGit(workspace)
				if err != nil {
					return fmt.Errorf("serve: %w", err)
				}
				opts.Workspace = workspace
				opts.Git = g
				// The agent mostly waits (for the manifest, the forge,
				// the commands it runs): on one processor the Go
				// scheduler does not spin looking for work for the
				// others (50 agents of one repository each took 15% less
				// user time). A group that works on several repositories
				// at once gets them all (Workers), until its sandbox is
				// done. The local sandbox provider starts it on one
				// already (GOMAXPROCS=1, protocol.EnvCommandGOMAXPROCS
				// keeping the commands' own), which makes this call a
				// no-op for its first sandbox.
				runtime.GOMAXPROCS(1)
				if err := serveOne(cmd.Context(), opts); err != nil {
					return fmt.Errorf("serve %s: %w", workspace, err)
				}
				if ctl == nil {
					return nil
				}
				n, ok, err := awaitNext(ctl, next)
				if err != nil {
					return fmt.Errorf("serve: after %s: %w", workspace, err)
				}
				if !ok {
					return nil
				}
				if err := moveTo(n); err != nil {
					return fmt.Errorf("serve: next sandbox %s: %w", n.Workspace, err)
				}
				workspace, opts.Lease = n.Workspace, n.Lease
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&workspace, "workspace", DefaultWorkspace, "the sandbox workspace")
	f.DurationVar(&opts.ManifestPoll, "manifest-poll", agent.DefaultManifestPoll, "how often to look for manifest.json")
	f.DurationVar(&opts.SteeringPoll, "steering-poll", agent.DefaultSteeringPoll, "how often to look for steering.json")
	f.StringVar(&isolation, "isolation", protocol.IsolationNamespaces,
		"how commands are isolated: "+protocol.IsolationNamespaces+" (each in its own user, mount, PID and network namespaces, see package jail) or "+protocol.IsolationNone+" (plain processes that can read and write all the agent can)")
	f.StringVar(&jailProg, "jail-program", "",
		"the "+jail.ProgramName+" to jail commands with, as an absolute path, which its caller found to speak this agent's jail protocol (default: the one beside the agent when it does, else the agent's own jail command)")
	// Each --hide is one path, taken as it is: a comma is a character of
	// it, not a separator.
	f.StringArrayVar(&hidden, "hide", nil, "a directory or file no command may see (repeatable): the worker's state, credentials")
	f.StringArrayVar(&shown, "show", nil, "a directory or file under a --hide directory that commands may still read (repeatable): toolchains in the worker's home")
	f.StringVar(&opts.Lease, "lease", "", "a file the sandbox provider touches while a worker watches this sandbox (see --orphan-after)")
	f.DurationVar(&opts.OrphanAfter, "orphan-after", agent.DefaultOrphanAfter, "with --lease: stop, failed, once the lease is this old: the sandbox's worker is gone for good")
	f.StringVar(&egress, "egress-socket", "", "the Unix socket of the worker's egress proxy: jailed commands reach the network through it alone, as their HTTP(S)_PROXY (127.0.0.1:"+strconv.Itoa(agent.EgressPort)+" in the jail); without it they reach no network")
	f.StringVar(&gateway, "gateway", "", "the Unix socket of the worker's gateway, with the sandbox's own key to it: the agent clones its task's repositories at the forge through it (the worker adds the token), and the agent CLI reaches its model through it alone (ANTHROPIC_BASE_URL, 127.0.0.1:"+strconv.Itoa(agent.GatewayPort)+" in its jail)")
	f.StringVar(&gatewayURL, "gateway-url", os.Getenv(protocol.EnvGatewayURL), "the worker's gateway as http://HOST:PORT, reached over the network (Kubernetes sandboxes), as --gateway is by a socket (default $"+protocol.EnvGatewayURL+")")
	f.BoolVar(&gwEgress, "gateway-egress", os.Getenv(protocol.EnvGatewayEgress) != "", "with --gateway-url: jailed commands reach the network through the worker's egress proxy, which its gateway serves to this sandbox's key, as through --egress-socket (default: whether $"+protocol.EnvGatewayEgress+" is set)")
	f.BoolVar(&gwFiles, "gateway-files", os.Getenv(protocol.EnvGatewayFiles) != "", "the --gateway serves the task's local repositories (file:// URLs and absolute paths) from the worker's files, which this sandbox cannot see: clone them through it (default: whether $"+protocol.EnvGatewayFiles+" is set)")
	f.StringArrayVar(&gatewayAPIs, "gateway-api", splitList(os.Getenv(protocol.EnvGatewayAPIs), ","), "a model API the --gateway serves, anthropic or openai (repeatable): the agent CLI reaches it through the gateway, with the sandbox's key; others as its own variables say")
	f.Int64Var(&limits.Memory, "max-memory", 0, "the most memory in bytes each jailed command and what it starts may use (a cgroup's, where one can be made); 0: no bound")
	f.IntVar(&limits.Processes, "max-processes", 0, "the most processes and threads each jailed command may run at once; 0: no bound")
	f.Float64Var(&limits.CPU, "max-cpu", 0, "the most processors' worth of CPU each jailed command may use (a cgroup's); 0: no bound")
	f.Int64Var(&limits.TmpSize, "tmp-size", 0, "the size in bytes of each jailed command's private /tmp, /var/tmp and /dev/shm; 0: the kernel's default, half the memory")
	f.Int64Var(&limits.FileSize, "max-file-size", 0, "the largest file in bytes a jailed command may write; 0: no bound")
	f.Int64Var(&diskReserve, "disk-reserve", 0, "the free space in bytes to keep on the disk holding the workspace: a jailed command that leaves less is stopped and its step fails; 0: none kept")
	f.IntVar(&nextFD, "next-fd", 0, "a socket, open as this descriptor, on which the agent says it is idle once it has finished a sandbox and is told the next sandbox it serves (protocol.Next), exiting when it closes (needs --isolation "+protocol.IsolationNamespaces+")")
	return cmd
}

// jailSelf is the argv that runs the jail entry point of this executable:
// the arguments this process was started with up to "serve", then "jail"
// (the sibling of serve that NewJailCommand makes), so "fleetlift-agent
// jail" or "fleetlift agent jail". When serve was not on the command line
// (a program running the command itself), it is serve's parents but the
// root. A program given (--jail-program) is taken as it is: whoever
// starts the agent asked it for its protocol (jail.Program) once, rather
// than every agent asking again.
func jailSelf(serve *cobra.Command, program string) ([]string, error) {
	if program != "" {
		if !filepath.IsAbs(program) {
			return nil, fmt.Errorf("--jail-program %s: not an absolute path", program)
		}
		return []string{program}, nil
	}
	if exe, err := os.Executable(); err == nil {
		if p := jail.Program(filepath.Dir(exe)); p != "" {
			return []string{p}, nil
		}
	}
	prefix := []string{"/proc/self/exe"}
	if i := slices.Index(os.Args, "serve"); i > 0 {
		prefix = append(prefix, os.Args[1:i]...)
	} else {
		var parents []string
		for c := serve.Parent(); c != nil && c.HasParent(); c = c.Parent() {
			parents = append([]string{c.Name()}, parents...)
		}
		prefix = append(prefix, parents...)
	}
	return append(prefix, "jail"), nil
}

// NewJailCommand returns the hidden jail command, the sibling of serve
// that runs one command the agent jails (see package jail): mount it
// wherever serve is mounted.
func NewJailCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "jail",
		Short:              "Run one command in the agent's jail (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(jail.Main(args))
		},
	}
}

// JailArgs reports whether args, a command line without the program
// name, start the jail entry point below parents ("jail ..." for
// fleetlift-agent, "agent jail ..." for fleetlift), and returns the jail's
// own arguments. Mains check it before anything else and hand the rest to
// jail.Main: a jail starts for every command the agent runs.
func JailArgs(args []string, parents ...string) ([]string, bool) {
	want := append(append([]string{}, parents...), "jail")
	if len(args) < len(want) {
		return nil, false
	}
	for i, w := range want {
		if args[i] != w {
			return nil, false
		}
	}
	return args[len(want):], true
}

// RunAgent runs args, a command line without the program name, when it
// starts with "agent": a program that is its own sandboxes' agent (a test
// binary, a benchmark) calls it first thing and exits with code when ok.
func RunAgent(args []string) (code int, ok bool) {
	if len(args) == 0 || args[0] != "agent" {
		return 0, false
	}
	cmd := NewAgentCommand()
	cmd.SetArgs(args[1:])
	if err := cmd.Execute(); err != nil {
		return 1, true
	}
	return 0, true
}

// NewAgentCommand returns a hidden "agent" command holding serve (and its
// jail and entrypoint), for the fleetlift binary.
func NewAgentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Run the in-sandbox agent",
		Hidden: true,
	}
	cmd.AddCommand(NewServeCommand(), NewJailCommand(), NewEntrypointCommand())
	return cmd
}

// splitList splits a list of sep-separated values, dropping empty ones.
func splitList(s, sep string) []string {
	var out []string
	for _, v := range strings.Split(s, sep) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
