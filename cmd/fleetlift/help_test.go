package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagUsageHasNoBackticks: pflag takes text in backticks in a flag's
// usage for the name of its value, so that `run --help` showed "--detach
// fleetlift status ID". No flag's help may lose its words that way.
func TestFlagUsageHasNoBackticks(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				name, _ := pflag.UnquoteUsage(f)
				t.Errorf("%s --%s: its help shows as \"--%s %s\": %q", c.CommandPath(), f.Name, f.Name, name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(io.Discard, io.Discard))
}

// TestSchemaCommand: every binary (and so every image) gives out the
// JSON Schema files the release publishes, byte for byte.
func TestSchemaCommand(t *testing.T) {
	out, code := runCLI(t, "schema", "campaign")
	want, err := os.ReadFile("../../schemas/campaign.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || out != string(want) {
		t.Errorf("schema campaign: exit %d, %d bytes, want schemas/campaign.schema.json (%d bytes)", code, len(out), len(want))
	}
	dir := filepath.Join(t.TempDir(), "schemas")
	if out, code := runCLI(t, "schema", "--dir", dir); code != 0 {
		t.Fatalf("schema --dir: exit %d: %s", code, out)
	}
	for _, name := range []string{"task", "campaign", "config", "approval"} {
		got, err := os.ReadFile(filepath.Join(dir, name+".schema.json"))
		want, _ := os.ReadFile("../../schemas/" + name + ".schema.json")
		if err != nil || string(got) != string(want) {
			t.Errorf("%s.schema.json written by --dir differs: %v", name, err)
		}
	}
	if out, code := runCLI(t, "schema", "pipeline"); code == 0 || !strings.Contains(out, "the kinds are task, campaign, config, approval") {
		t.Errorf("an unknown kind: exit %d: %s", code, out)
	}
}
