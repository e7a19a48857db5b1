package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
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

// TestEveryCommandHasExamplesAndExitCodes: `fleetlift X --help` shows
// examples of X, each a command line X accepts (its flags exist and take
// the values given, its arguments are as many as X takes), and what each
// exit status means for X.
func TestEveryCommandHasExamplesAndExitCodes(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	for _, c := range root.Commands() {
		if c.Hidden {
			continue
		}
		name := c.Name()
		help, code := runCLI(t, name, "--help")
		if code != 0 {
			t.Errorf("%s --help: exit %d", name, code)
		}
		for _, want := range []string{"\nExamples:\n  fleetlift " + name, "\nExit status:\n  0  success\n  1  ", "\n  2  the command line is wrong"} {
			if !strings.Contains(help, want) {
				t.Errorf("%s --help has no %q:\n%s", name, want, help)
			}
		}
		if c.Example == "" {
			continue
		}
		for _, line := range strings.Split(c.Example, "\n") {
			args, _ := shellWords(t, name+" example", strings.TrimSpace(line))
			if i := slices.Index(args, ">"); i >= 0 {
				args = args[:i]
			}
			if len(args) < 2 || args[0] != "fleetlift" {
				t.Errorf("%s: example %q is not a fleetlift command line", name, line)
				continue
			}
			// A fresh tree per example: parsing sets its flags.
			found, rest, err := newRootCmd(io.Discard, io.Discard).Find(args[1:])
			if err != nil || found.Name() != name {
				t.Errorf("%s: example %q runs %v: %v", name, line, found.Name(), err)
				continue
			}
			if err := found.ParseFlags(rest); err != nil {
				t.Errorf("%s: example %q: %v", name, line, err)
				continue
			}
			if err := found.ValidateArgs(found.Flags().Args()); err != nil {
				t.Errorf("%s: example %q: %v", name, line, err)
			}
		}
	}
}

// TestOneMeaningPerFlagName: no command has a flag of its own named as a
// global flag (server's --log-level once meant only the server's log).
func TestOneMeaningPerFlagName(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if root.PersistentFlags().Lookup(f.Name) != nil {
				t.Errorf("%s has a --%s of its own beside the global one", c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
