// Command gen writes the JSON Schema files in package schemas from
// fleetlift.cue, so YAML authors get completion and checks in editors
// (yaml-language-server) and any JSON Schema 2020-12 validator checks
// definitions as fleetlift does, cross-field checks included, but for
// those that compute (names unique in a list, a duration's length).
// `make generate` runs it; `make check-generated` fails when its output
// is stale.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fleetlift/fleetlift/schemas"
)

func main() {
	out := flag.String("out", ".", "directory to write *.schema.json into")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	src, err := schemas.FS.ReadFile(schemas.CUEFile)
	if err != nil {
		return err
	}
	c, err := newConverter(schemas.CUEFile, src)
	if err != nil {
		return err
	}
	for _, f := range schemas.Files() {
		s, err := c.Document(f.Definition)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Definition, err)
		}
		s.Schema = "https://json-schema.org/draft/2020-12/schema"
		s.ID = schemas.ID(f.Name)
		s.Title = fmt.Sprintf("fleetlift %s, schema version %d", f.Kind, schemas.Version)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(s); err != nil {
			return fmt.Errorf("encode %s: %w", f.Definition, err)
		}
		if err := os.WriteFile(filepath.Join(out, f.Name), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
