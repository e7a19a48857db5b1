package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/schemas"
)

// What this binary was built from: make build and make dist set them
// (-X main.version=v0.1.0 -X main.commit=<sha> -X main.date=<RFC 3339>).
// date is the commit's time, not the clock's, so that a release build
// stays reproducible.
var (
	version = "dev"
	commit  = ""
	date    = ""
)

// buildInfo is what `fleetlift version` says.
type buildInfo struct {
	Version       string `json:"version"`
	Commit        string `json:"commit"`
	Date          string `json:"date"`
	SchemaVersion int    `json:"schema_version"`
}

// releaseVersion is version, or the module version go install recorded.
func releaseVersion() string { return currentBuild().Version }

// currentBuild is the release, commit and date the linker was given, or
// else what the go command recorded: the module version (go install) and
// the VCS revision and its time (a build in a clone); "unknown" when
// neither says.
func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Date: date, SchemaVersion: schemas.Version}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Commit == "":
				b.Commit = s.Value
			case s.Key == "vcs.time" && b.Date == "":
				b.Date = s.Value
			}
		}
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print fleetlift's release, commit and build date, and the schema version of the definitions it reads",
		Long: `Version prints the release this binary is, the commit it was built from
and that commit's date, and the schema version of the definitions it reads.
-o json prints the same as one JSON object: {"version", "commit", "date",
"schema_version"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := currentBuild()
			w := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(b)
			}
			_, err := fmt.Fprintf(w, "fleetlift %s (commit %s, built %s; definitions: schema version %d)\n", b.Version, b.Commit, b.Date, b.SchemaVersion)
			return err
		},
	}
	cmd.Flags().VarP(choiceVar(&output, "human", "human", "json"), "output", "o", "output format: human or json")
	return cmd
}
