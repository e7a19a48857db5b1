package agentcmd

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/agent/entrypoint"
)

// NewEntrypointCommand returns the hidden entrypoint command, a container
// sandbox's first process (see package entrypoint): it executes this
// binary again with the arguments after "--", below the same commands,
// so mount it beside serve ("fleetlift-agent entrypoint -- serve" runs
// "fleetlift-agent serve", "fleetlift agent entrypoint -- serve" runs
// "fleetlift agent serve").
func NewEntrypointCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "entrypoint [--user NAME|UID[:GID]] [--workdir DIR] -- ARGS...",
		Short:              "Start a container sandbox: strip the control plane's variables, drop to the agent user, run the agent as PID 1 (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := entrypoint.Parse(args)
			if err != nil {
				return fmt.Errorf("entrypoint: %w", err)
			}
			return fmt.Errorf("entrypoint: %w", entrypoint.Run(cfg, commandsAbove(cmd, "entrypoint")))
		},
	}
}

// commandsAbove are the arguments between the program name and name on
// this process's command line ("agent" for "fleetlift agent entrypoint"),
// or, when name is not on it (a program running the command itself),
// the names of cmd's parents but the root.
func commandsAbove(cmd *cobra.Command, name string) []string {
	if i := slices.Index(os.Args, name); i > 0 {
		return slices.Clone(os.Args[1:i])
	}
	var parents []string
	for c := cmd.Parent(); c != nil && c.HasParent(); c = c.Parent() {
		parents = append([]string{c.Name()}, parents...)
	}
	return parents
}
