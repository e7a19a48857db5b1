package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/spec"
)

func newMigrateCmd() *cobra.Command {
	var file, to, defaults, out string
	cmd := &cobra.Command{
		Use:   "migrate --file FILE",
		Short: "Write a definition in normalised form, or converted between YAML and CUE",
		Long: `Migrate loads the Task or Campaign in FILE, checks it as validate does, and
writes it again as a definition of the schema version this fleetlift reads
(version 1): normalised, with keys in one order (the order of the digest) and
map keys sorted.

  --to yaml|cue               the language written (default: FILE's own)
  --defaults omit|explicit    leave out every field the schema would give anyway
                              (defaults, a repository name its URL gives), or
                              write them all (default: omit)

The file written means exactly what FILE means: the same digest, so the plan
shows no change when it replaces FILE. What a CUE file computes (let,
comprehensions) is written as the data it came to, and comments are not
kept. The result goes to standard output, or to --out (which may be FILE
itself).

Only schema version 1 exists; when there is a version 2, migrate is what
upgrades version 1 definitions to it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErrorf("--file is required")
			}
			format, ok := spec.FormatOf(file)
			if !ok {
				return fmt.Errorf("%s: not a definition file: the extension must be .cue, .yaml or .yml", file)
			}
			if to != "" {
				format = spec.Format(to)
			}
			if format != spec.FormatYAML && format != spec.FormatCUE {
				return usageErrorf("--to %s: use yaml or cue", to)
			}
			d := spec.Defaults(defaults)
			if d != spec.DefaultsOmit && d != spec.DefaultsExplicit {
				return usageErrorf("--defaults %s: use omit or explicit", defaults)
			}
			if out != "" {
				if f, ok := spec.FormatOf(out); !ok || f != format {
					return usageErrorf("--out %s: the name of a %s file ends in .%s", out, format, format)
				}
			}
			def, err := loadOne(cmd.Context(), file)
			if err != nil {
				return err
			}
			data, err := spec.Migrate(cmd.Context(), *def, spec.MigrateOptions{Format: format, Defaults: d})
			if err != nil {
				return err
			}
			if out == "" {
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			return writeFileAtomic(out, data)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "definition file (.yaml, .yml or .cue)")
	cmd.Flags().StringVar(&to, "to", "", "write yaml or cue (default: the format of --file)")
	cmd.Flags().StringVar(&defaults, "defaults", string(spec.DefaultsOmit), "omit or explicit: leave out, or write, the fields the schema gives anyway")
	cmd.Flags().StringVar(&out, "out", "", "write the result to this file instead of standard output")
	return cmd
}

// writeFileAtomic replaces path with data: a reader sees the old file or
// the new one, never part of one.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
