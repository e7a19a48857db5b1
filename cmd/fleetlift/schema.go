package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/schemas"
)

func newSchemaCmd() *cobra.Command {
	var dir string
	var kinds []string
	for _, f := range schemas.Files() {
		kinds = append(kinds, strings.ToLower(f.Kind))
	}
	cmd := &cobra.Command{
		Use:   "schema [" + strings.Join(kinds, "|") + "]",
		Short: "Print the JSON Schema of a kind of file, as this release checks it",
		Long: `Schema prints the JSON Schema 2020-12 this fleetlift checks files of a kind
against: task and campaign for definitions, config for fleetlift.yaml, approval
for approval records (the files the release publishes; see docs/definitions.md). With
--dir, it writes all four there as <kind>.schema.json, for an editor or a
linter that reads them from disk: every fleetlift binary and image carries
them.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir != "" {
				if len(args) > 0 {
					return usageErrorf("--dir writes every schema: give no kind")
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				for _, f := range schemas.Files() {
					b, err := fs.ReadFile(schemas.FS, f.Name)
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(dir, f.Name), b, 0o644); err != nil {
						return fmt.Errorf("write schema: %w", err)
					}
				}
				return nil
			}
			if len(args) == 0 {
				return fmt.Errorf("name a kind (%s), or write them all with --dir", strings.Join(kinds, ", "))
			}
			for _, f := range schemas.Files() {
				if strings.EqualFold(f.Kind, args[0]) {
					b, err := fs.ReadFile(schemas.FS, f.Name)
					if err != nil {
						return err
					}
					_, err = cmd.OutOrStdout().Write(b)
					return err
				}
			}
			return fmt.Errorf("no schema for %q: the kinds are %s", args[0], strings.Join(kinds, ", "))
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "write every schema into this directory")
	return cmd
}
