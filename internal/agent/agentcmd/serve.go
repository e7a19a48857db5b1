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
	"github.com/fleetlift/fleetlift/internal/forge/gitea"
	"github.com/fleetlift/fleetlift/internal/forge/github"
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

// Environment variables that configure the agent's forge when a
// manifest names github or gitea. The worker passes them into the sandbox
// (they are never in a manifest or in workflow history).
const (
	// EnvForgeURL is the forge's root: Gitea's ROOT_URL, or GitHub's API
	// root (empty means https://api.github.com/).
	EnvForgeURL = "FLEETLIFT_FORGE_URL"
	// EnvForgeToken is the forge token, for the API and for pushes.
	EnvForgeToken = "FLEETLIFT_FORGE_TOKEN"
)

// Forges returns the forges the agent can open pull requests with: the
// local forge, and GitHub or Gitea configured from EnvForgeURL and
// EnvForgeToken.
func Forges(g *git.Git) func(name string) (forge.Forge, error) {
	return func(name string) (forge.Forge, error) {
		switch name {
		case "", "local":
			return local.New(g), nil
		case "github", "gitea":
			token := os.Getenv(EnvForgeToken)
			if token == "" {
				return nil, fmt.Errorf("forge %s needs a token in %s", name, EnvForgeToken)
			}
			url := os.Getenv(EnvForgeURL)
			if name == "gitea" {
				if url == "" {
					return nil, fmt.Errorf("forge gitea needs its URL in %s", EnvForgeURL)
				}
				return gitea.New(gitea.Options{URL: url, Token: token, Git: g})
			}
			return github.New(github.Options{BaseURL: url, Token: token, Git: g})
		default:
			return nil, fmt.Errorf("forge %q is not available in the agent: use local, github or gitea", name)
		}
	}
}
