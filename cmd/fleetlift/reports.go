package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/report"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/visible"
)

// reportFormats are the views of `fleetlift reports`.
var reportFormats = []string{"table", "json", "csv", "markdown"}

func newReportsCmd() *cobra.Command {
	var f temporalFlags
	var output, forEach, outDir string
	var bodies bool
	cmd := &cobra.Command{
		Use:   "reports ID",
		Short: "Show the reports of a report-mode Task or Campaign as one table",
		Long: `Reports reads the reports of a report-mode run (campaign/<id>, task/<id>, or a
bare definition id), running or finished, and shows them as one table: a row
per repository (and per for_each target), a column per field of the output
schema, each report's status (valid, empty, invalid, missing, failed,
pending, skipped), what is wrong with it, and the file its body goes to.

  -o table      for a terminal (the default)
  -o json       every report with its frontmatter, body, raw text (for one
                that failed), errors and validation errors, for scripts
  -o csv        one line per report, for spreadsheets
  -o markdown   the report page the status mirror writes

--body prints each report's body (or, for one that failed, what the agent
wrote) after the table; --out-dir writes the report page and every body as
markdown files, as the status mirror does under reports/<id>/.

Without a Temporal server at --temporal-address it starts the embedded one on
--state-dir's database for as long as it reads, so the reports of a finished
` + "`fleetlift run`" + ` can be read after it stopped.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A finished run is read from the embedded server's database
			// even after the `fleetlift run` that ran it stopped it.
			c, closeAll, err := f.dialOrEmbed(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeAll()
			id, err := runReader(c, f.namespace).Resolve(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			t, err := readReports(cmd.Context(), c, f.namespace, id)
			if err != nil {
				return err
			}
			if forEach != "" {
				if err := t.Only(forEach); err != nil {
					return err
				}
			}
			if outDir != "" {
				if err := writeReportFiles(outDir, t); err != nil {
					return err
				}
			}
			return writeReports(cmd.OutOrStdout(), t, output, bodies)
		},
	}
	f.register(cmd)
	cmd.Flags().VarP(choiceVar(&output, "table", reportFormats...), "output", "o", "output format: "+strings.Join(reportFormats, ", "))
	cmd.Flags().StringVar(&forEach, "for-each", "", "show only the reports of this for_each target")
	cmd.Flags().BoolVar(&bodies, "body", false, "print each report's body after the table")
	cmd.Flags().StringVar(&outDir, "out-dir", "", "also write the report page (README.md) and each body as markdown files into this directory")
	return cmd
}

// readReports reads the reports of run id (a workflow id), refusing a run
// that is not a report.
func readReports(ctx context.Context, c client.Client, namespace, id string) (*report.Table, error) {
	run, err := (&statetemporal.Reader{Client: c, Namespace: namespace}).GetRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read the reports of %s: %w", id, err)
	}
	if !state.IsReport(run.Spec) {
		return nil, fmt.Errorf("%s is not a report: its mode is transform (see `fleetlift status %s`)", id, id)
	}
	return report.New(id, run.Spec, run.Reports), nil
}

// writeRunReports follows the result table of a finished run with its
// reports, when it is a report, and says how to see more; `fleetlift run`
// calls it.
func writeRunReports(ctx context.Context, c client.Client, namespace, id string, w io.Writer) {
	t, err := readReports(ctx, c, namespace, id)
	if err != nil || len(t.Rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nreports:")
	if writeReports(w, t, "table", false) == nil {
		fmt.Fprintf(w, "each report in full: `fleetlift reports %s --body` (-o json for scripts, --out-dir DIR for markdown files)\n", visible.String(id))
	}
}

// writeReports writes t in format. What the work wrote reaches the
// terminal through visible.Writer, in one piece: its control characters
// are shown, not obeyed. In JSON they come out as \u escapes, which keep it
// valid JSON.
func writeReports(w io.Writer, t *report.Table, format string, bodies bool) error {
	var b bytes.Buffer
	var err error
	switch format {
	case "json":
		err = t.WriteJSON(&b)
	case "csv":
		err = t.WriteCSV(&b)
	case "markdown":
		b.WriteString(t.Markdown())
		if bodies {
			for i, r := range t.Rows {
				if r.BodyFile != "" {
					fmt.Fprintf(&b, "\n<!-- %s -->\n\n%s", r.BodyFile, t.Body(i))
				}
			}
		}
	default:
		err = t.WriteText(&b, bodies)
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(visible.Writer(w), b.String())
	return err
}

// writeReportFiles writes the report page and the bodies into dir, which
// it creates, replacing files of the same names.
func writeReportFiles(dir string, t *report.Table) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	var errs []error
	for name, content := range t.Files() {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
