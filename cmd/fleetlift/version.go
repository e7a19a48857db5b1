package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/schemas"
)

// version is the release this binary was built as: make dist sets it
// (-X main.version=v0.1.0).
var version = "dev"

// releaseVersion is version, or the module version go install recorded.
func releaseVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fleetlift's release and the schema version of the definitions it reads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "fleetlift %s (definitions: schema version %d)\n", releaseVersion(), schemas.Version)
			return err
		},
	}
}
