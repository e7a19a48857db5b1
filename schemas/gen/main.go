// Command gen writes the JSON Schema files in package schemas from
// fleetlift.cue, so YAML authors get completion and checks in editors
// (yaml-language-server). `make generate` runs it; `make verify` fails when
// its output is stale.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/jsonschema"

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
	ctx := cuecontext.New()
	root := ctx.CompileBytes(src, cue.Filename(schemas.CUEFile))
	if err := root.Err(); err != nil {
		return fmt.Errorf("compile %s: %w", schemas.CUEFile, err)
	}
	for def, file := range map[string]string{
		"#Task":     "task.schema.json",
		"#Campaign": "campaign.schema.json",
		"#Config":   "config.schema.json",
		"#Approval": "approval.schema.json",
	} {
		expr, err := jsonschema.Generate(root.LookupPath(cue.ParsePath(def)), &jsonschema.GenerateConfig{})
		if err != nil {
			return fmt.Errorf("generate %s: %w", def, err)
		}
		v := ctx.BuildExpr(expr)
		if err := v.Err(); err != nil {
			return fmt.Errorf("build %s: %w", def, err)
		}
		raw, err := v.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encode %s: %w", def, err)
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		if err := os.WriteFile(filepath.Join(out, file), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
