package agentcmd

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/local"
	"github.com/fleetlift/fleetlift/internal/git"
)

// DefaultWorkspace is the sandbox workspace of seed 000.
const DefaultWorkspace = "/workspace"

// NewServeCommand returns the serve command: wait for the manifest in the
// workspace, run it, and exit once a terminal phase is written.
func NewServeCommand() *cobra.Command {
	var (
		workspace string
		opts      agent.Options
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Wait for .fleetlift/manifest.json in the workspace and run it",
		Long: `serve waits for <workspace>/.fleetlift/manifest.json, then clones, transforms,
verifies, reports and opens pull requests as the manifest says, writing
status.json and result.json and reading steering.json beside it.

The agent CLI for agentic runs is "claude -p --output-format text
--permission-mode acceptEdits" unless ` + agent.EnvAgentCLI + ` holds a JSON array argv.
An HTTPS token for git remotes comes from ` + git.DefaultTokenEnv + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			g := &git.Git{}
			opts.Workspace = workspace
			opts.Git = g
			opts.Forges = Forges(g)
			opts.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if err := agent.Serve(ctx, opts); err != nil {
				return fmt.Errorf("serve %s: %w", workspace, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&workspace, "workspace", DefaultWorkspace, "the sandbox workspace")
	f.DurationVar(&opts.ManifestPoll, "manifest-poll", agent.DefaultManifestPoll, "how often to look for manifest.json")
	f.DurationVar(&opts.SteeringPoll, "steering-poll", agent.DefaultSteeringPoll, "how often to look for steering.json")
	return cmd
}

// NewAgentCommand returns a hidden "agent" command holding serve, for the
// fleetlift binary.
func NewAgentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "agent",
		Short:  "Run the in-sandbox agent",
		Hidden: true,
	}
	cmd.AddCommand(NewServeCommand())
	return cmd
}

// Forges returns the forges the agent can open pull requests with.
func Forges(g *git.Git) func(name string) (forge.Forge, error) {
	return func(name string) (forge.Forge, error) {
		switch name {
		case "", "local":
			return local.New(g), nil
		default:
			return nil, fmt.Errorf("forge %q is not available in the agent (only local)", name)
		}
	}
}
