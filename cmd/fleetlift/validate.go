package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/visible"
)

func newValidateCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "validate [DIR]",
		Short: "Check Task and Campaign definitions against the schema",
		Long: `Validate loads every .cue, .yaml and .yml definition under DIR (default ".")
and checks it against fleetlift's schema. When DIR holds a fleetlift.yaml or
fleetlift.cue, DIR is a campaigns repository: its config is checked too and
definitions are read from the config's watch.path (default campaigns/).

Every problem in every file is reported with its file, line, column and field.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			rep, err := validate(cmd, dir)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				rep.writeHuman(cmd.OutOrStdout())
			}
			if !rep.Valid {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().VarP(choiceVar(&output, "human", "human", "json"), "output", "o", "output format: human or json")
	return cmd
}

// validateReport is the result of validate; its JSON form is documented
// output (`fleetlift validate -o json`).
type validateReport struct {
	Valid       bool                 `json:"valid"`
	Config      string               `json:"config,omitempty"`
	Files       int                  `json:"files"`
	Definitions []validateDefinition `json:"definitions"`
	Errors      []*spec.Error        `json:"errors"`
}

type validateDefinition struct {
	ID     string    `json:"id"`
	Kind   spec.Kind `json:"kind"`
	File   string    `json:"file"`
	Digest string    `json:"digest"`
}

func validate(cmd *cobra.Command, dir string) (*validateReport, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	pool, err := spec.NewSelfPool()
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	loader := &spec.Loader{Eval: pool}
	fsys := os.DirFS(dir)
	rep := &validateReport{Definitions: []validateDefinition{}, Errors: []*spec.Error{}}
	cfg, cfgName, cfgErrs, err := desired.Config(cmd.Context(), loader, fsys)
	if err != nil {
		return nil, err
	}
	if cfgName != "" {
		rep.Config = filepath.Join(dir, cfgName)
	}
	rep.Errors = append(rep.Errors, cfgErrs...)
	defsDir := desired.DefinitionsDir(cfg, cfgErrs)
	res := &spec.Result{}
	if _, err := fs.Stat(fsys, defsDir); err == nil || defsDir == "." {
		res, err = loader.Load(cmd.Context(), fsys, defsDir)
		if err != nil {
			return nil, err
		}
	} else {
		rep.Errors = append(rep.Errors, &spec.Error{File: defsDir, Msg: "definitions directory does not exist"})
	}
	rep.Files = res.Files
	rep.Errors = append(rep.Errors, res.Errors...)
	for _, e := range rep.Errors {
		e.File = filepath.Join(dir, e.File)
	}
	for _, d := range res.Definitions {
		rep.Definitions = append(rep.Definitions, validateDefinition{ID: d.ID, Kind: d.Kind, File: filepath.Join(dir, d.File), Digest: d.Digest})
	}
	rep.Valid = len(rep.Errors) == 0
	return rep, nil
}

// writeHuman prints the report; its ids, files and messages come from the
// definitions, and are shown through package visible.
func (r *validateReport) writeHuman(out io.Writer) {
	tabs := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	tw := visible.Writer(tabs)
	w := visible.Writer(out)
	for _, d := range r.Definitions {
		fmt.Fprintf(tw, "ok\t%s\t%s\t%s\t%s\n", d.Kind, d.ID, d.File, approval.ShortDigest(d.Digest))
	}
	tabs.Flush()
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	files := map[string]bool{}
	for _, e := range r.Errors {
		files[e.File] = true
	}
	switch {
	case r.Valid:
		fmt.Fprintf(w, "%d definitions valid in %d files\n", len(r.Definitions), r.Files)
	default:
		fmt.Fprintf(w, "%d definitions valid; %d errors in %d files\n", len(r.Definitions), len(r.Errors), len(files))
	}
}
