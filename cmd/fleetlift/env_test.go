package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// findCmd is the command of root at path ("up", "reconcile").
func findCmd(t *testing.T, path ...string) *cobra.Command {
	t.Helper()
	root := newRootCmd(io.Discard, io.Discard)
	c, _, err := root.Find(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFlagsFromEnvironment: every flag reads FLEETLIFT_<NAME> when it is
// not on the command line, so that manifests configure through env and
// Secrets; the command line wins.
func TestFlagsFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cmd     string
		args    []string
		env     map[string]string
		flag    string
		want    string
		wantErr string
	}{
		{name: "no change", cmd: "up", flag: "interval", want: "30s"},
		{name: "from the environment", cmd: "up", env: map[string]string{"FLEETLIFT_INTERVAL": "5s"}, flag: "interval", want: "5s"},
		{name: "the command line wins", cmd: "up", args: []string{"--interval", "7s"}, env: map[string]string{"FLEETLIFT_INTERVAL": "5s"}, flag: "interval", want: "7s"},
		{name: "temporal TLS certificate", cmd: "worker", env: map[string]string{"FLEETLIFT_TEMPORAL_TLS_CERT": "/etc/tls/tls.crt"}, flag: "temporal-tls-cert", want: "/etc/tls/tls.crt"},
		{name: "a list", cmd: "worker", env: map[string]string{"FLEETLIFT_SANDBOX_ENV": "GOPROXY,GOFLAGS"}, flag: "sandbox-env", want: "[GOPROXY,GOFLAGS]"},
		{name: "a bool", cmd: "reconcile", env: map[string]string{"FLEETLIFT_LEADER_ELECT": "true"}, flag: "leader-elect", want: "true"},
		{name: "forges one per line", cmd: "reconcile", env: map[string]string{"FLEETLIFT_FORGE": "name=a,type=gitea,url=https://a.example\nname=b,type=github"}, flag: "forge", want: `["name=a,type=gitea,url=https://a.example","name=b,type=github"]`},
		{name: "the old name of --sandbox", cmd: "worker", env: map[string]string{"SANDBOX_PROVIDER": "local"}, flag: "sandbox", want: "local"},
		{name: "the new name wins over the old", cmd: "worker", env: map[string]string{"SANDBOX_PROVIDER": "docker", "FLEETLIFT_SANDBOX": "local"}, flag: "sandbox", want: "local"},
		{name: "output is the command's own", cmd: "status", env: map[string]string{"FLEETLIFT_STATUS_OUTPUT": "json"}, flag: "output", want: "json"},
		{name: "another command's output is not read", cmd: "status", env: map[string]string{"FLEETLIFT_REPORTS_OUTPUT": "csv"}, flag: "output", want: "human"},
		{name: "dir is the command's own", cmd: "schema", env: map[string]string{"FLEETLIFT_DEMO_DIR": "/tmp/demo"}, flag: "dir", want: ""},
		{name: "a persistent flag", cmd: "worker", env: map[string]string{"FLEETLIFT_LOG_FORMAT": "json"}, flag: "log-format", want: "json"},
		{name: "a bad value is not echoed", cmd: "up", env: map[string]string{"FLEETLIFT_INTERVAL": "hunter2"}, flag: "interval", wantErr: "$FLEETLIFT_INTERVAL (for --interval): not a valid duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c := findCmd(t, tc.cmd)
			if err := c.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			err := flagsFromEnv(c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("the error quotes the variable's value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f := c.Flags().Lookup(tc.flag)
			if f == nil {
				t.Fatalf("%s has no --%s", tc.cmd, tc.flag)
			}
			if got := f.Value.String(); got != tc.want {
				t.Errorf("--%s = %s, want %s", tc.flag, got, tc.want)
			}
		})
	}
}

// TestHelpNamesEveryVariable: each flag's help says which variable it
// reads.
func TestHelpNamesEveryVariable(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name != "help" && !strings.Contains(f.Usage, "(env "+envName(c, f.Name)+")") {
				t.Errorf("%s --%s: its help does not name $%s: %q", c.CommandPath(), f.Name, envName(c, f.Name), f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(io.Discard, io.Discard))
	out, _ := runCLI(t, "up", "--help")
	if !strings.Contains(out, "(env FLEETLIFT_TEMPORAL_TLS_CERT)") {
		t.Errorf("up --help does not name FLEETLIFT_TEMPORAL_TLS_CERT:\n%s", out)
	}
	out, _ = runCLI(t, "status", "--help")
	if !strings.Contains(out, "(env FLEETLIFT_STATUS_OUTPUT)") {
		t.Errorf("status --help does not name FLEETLIFT_STATUS_OUTPUT:\n%s", out)
	}
}

// TestNoFlagHoldsASecret: tokens, keys and the webhook secret come from
// the environment or files whose names flags give (-env, -file), or from
// Kubernetes Secrets a flag refers to (-ref), never from a flag's value,
// which process listings and shell histories show. A flag that takes a
// number (--tokens-per-minute) holds a count, not a secret.
func TestNoFlagHoldsASecret(t *testing.T) {
	secretish := regexp.MustCompile(`token|secret|password|passwd|api-key|credential`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			numeric := slices.Contains([]string{"int", "int64", "uint", "float64", "duration"}, f.Value.Type())
			if secretish.MatchString(f.Name) && !numeric && !strings.HasSuffix(f.Name, "-env") && !strings.HasSuffix(f.Name, "-file") && !strings.HasSuffix(f.Name, "-ref") {
				t.Errorf("%s --%s takes a secret's value: name a variable (-env) or a file (-file) instead", c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(io.Discard, io.Discard))
}

// TestEveryVariableHasOneMeaning: a variable configures flags that mean
// the same thing (same type, same help) in every command that reads it,
// so that setting it for one command does not break another.
func TestEveryVariableHasOneMeaning(t *testing.T) {
	type meaning struct{ typ, usage, cmd string }
	seen := map[string]meaning{}
	walkFlags(newRootCmd(io.Discard, io.Discard), func(c *cobra.Command, f *pflag.Flag) {
		name := envName(c, f.Name)
		m := meaning{f.Value.Type(), f.Usage, c.CommandPath()}
		if prev, ok := seen[name]; ok && (prev.typ != m.typ || prev.usage != m.usage) {
			t.Errorf("$%s means two things:\n  %s --%s: %s %q\n  %s --%s: %s %q", name, prev.cmd, f.Name, prev.typ, prev.usage, m.cmd, f.Name, m.typ, m.usage)
		}
		seen[name] = m
	})
}

// TestUnreadVariablesWarnOnce: a FLEETLIFT_ variable nothing reads (a
// typo) is named in one warning; the variables fleetlift, its controller
// and the agent read, and those a flag names, are not.
func TestUnreadVariablesWarnOnce(t *testing.T) {
	for k, v := range map[string]string{
		"FLEETLIFT_SANDBX":            "hunter2",
		"FLEETLIFT_OUTPUT":            "json",
		"FLEETLIFT_FORGE_TOKEN":       "t",
		"FLEETLIFT_GIT_TOKEN_ORIGINS": "https://git.example.com",
		"FLEETLIFT_ALLOWED_IMAGES":    "fleetlift/sandbox:*",
		"FLEETLIFT_ACME_TOKEN":        "t",
		"FLEETLIFT_VALIDATE_OUTPUT":   "human",
	} {
		t.Setenv(k, v)
	}
	out, code := runCLI(t, "validate", "--log-format", "json", "../../examples")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var warnings []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"level":"WARN"`) {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", len(warnings), out)
	}
	w := warnings[0]
	for _, want := range []string{"FLEETLIFT_SANDBX", "FLEETLIFT_OUTPUT (now FLEETLIFT_<COMMAND>_OUTPUT)", "FLEETLIFT_ACME_TOKEN"} {
		if !strings.Contains(w, want) {
			t.Errorf("the warning does not name %s: %s", want, w)
		}
	}
	for _, read := range []string{"FLEETLIFT_FORGE_TOKEN", "FLEETLIFT_GIT_TOKEN_ORIGINS", "FLEETLIFT_ALLOWED_IMAGES", "FLEETLIFT_VALIDATE_OUTPUT", "hunter2"} {
		if strings.Contains(w, read) {
			t.Errorf("the warning names %s: %s", read, w)
		}
	}

	// A variable a flag names holds something: no warning.
	out, _ = runCLI(t, "validate", "--log-format", "json", "--forge-token-env", "FLEETLIFT_ACME_TOKEN", "../../examples")
	if strings.Contains(out, "FLEETLIFT_ACME_TOKEN") {
		t.Errorf("warned of the variable --forge-token-env names:\n%s", out)
	}
}

// TestEveryVariableInTheRepositoryIsRead: each FLEETLIFT_ variable the
// repository's code, manifests, images and docs mention is one a flag or
// otherEnvs accounts for, so that no command warns about a variable a
// manifest sets on purpose.
func TestEveryVariableInTheRepositoryIsRead(t *testing.T) {
	names := map[string]bool{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || bytes.IndexByte(b, 0) >= 0 { // a binary built here
			return err
		}
		for _, n := range envToken.FindAllString(string(b), -1) {
			// Not a prefix (FLEETLIFT_TEMPORAL_*), nor what test helpers
			// set in the sandboxes of their tests.
			if !strings.HasSuffix(n, "_") && !strings.HasPrefix(n, "FLEETLIFT_TEST_") {
				names[n] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 40 {
		t.Fatalf("found only %d variables: %v", len(names), names)
	}
	var environ []string
	for n := range names {
		if _, renamed := renamedEnv[n]; !renamed {
			environ = append(environ, n+"=x")
		}
	}
	if unread := unreadEnv(findCmd(t, "worker"), environ); len(unread) > 0 {
		t.Errorf("the repository uses variables a command would warn about: %v", unread)
	}
}

var updateDocs = flag.Bool("update", false, "rewrite docs/environment.md")

// TestEnvironmentDoc: docs/environment.md lists every variable fleetlift
// reads, as the flags and otherEnvs say (refresh with -update).
func TestEnvironmentDoc(t *testing.T) {
	const path = "../../docs/environment.md"
	got := environmentDoc(newRootCmd(io.Discard, io.Discard))
	if *updateDocs {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s is out of date: run go test ./cmd/fleetlift -run TestEnvironmentDoc -update", path)
	}
}

// environmentDoc is docs/environment.md.
func environmentDoc(root *cobra.Command) string {
	type row struct {
		flag, usage string
		cmds        []string
	}
	rows := map[string]*row{}
	walkFlags(root, func(c *cobra.Command, f *pflag.Flag) {
		name := envName(c, f.Name)
		r := rows[name]
		if r == nil {
			usage, _, _ := strings.Cut(f.Usage, " (env ")
			r = &row{flag: f.Name, usage: usage}
			rows[name] = r
		}
		if c != root && !slices.Contains(r.cmds, c.Name()) {
			r.cmds = append(r.cmds, c.Name())
		}
	})
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	var b strings.Builder
	b.WriteString(`# Environment variables

Every flag of every command can also be set by an environment variable:
` + "`FLEETLIFT_`" + ` and the flag's name in capitals, with ` + "`_` for `-`" + `. A flag
whose meaning is its command's own (` + "`--output`, `--dir`" + `) reads a variable
with the command's name in it: ` + "`FLEETLIFT_STATUS_OUTPUT`" + `,
` + "`FLEETLIFT_SCHEMA_DIR`" + `. The command line wins over the variable, the
variable over the default; a list takes commas, ` + "`FLEETLIFT_FORGE`" + ` one
` + "`--forge`" + ` per line. Each command's ` + "`--help`" + ` names the variable of each of its
flags. A command warns, in one log line, of a ` + "`FLEETLIFT_`" + ` variable that
nothing below reads (a typo).

This file is generated: ` + "`go test ./cmd/fleetlift -run TestEnvironmentDoc -update`" + `.

## Flags

| Variable | Flag | Commands | Meaning |
|---|---|---|---|
`)
	names := slices.Sorted(maps.Keys(rows))
	for _, n := range names {
		r := rows[n]
		slices.Sort(r.cmds)
		fmt.Fprintf(&b, "| `%s` | `--%s` | %s | %s |\n", n, r.flag, strings.Join(r.cmds, ", "), cell(r.usage))
	}
	b.WriteString(`
## Read without a flag

| Variable | Read for |
|---|---|
`)
	others := slices.Clone(otherEnvs)
	slices.SortFunc(others, func(a, b otherEnv) int { return strings.Compare(a.name, b.name) })
	for _, o := range others {
		fmt.Fprintf(&b, "| `%s` | %s |\n", o.name, cell(o.use))
	}
	b.WriteString(`
## Renamed

| Variable | Now |
|---|---|
`)
	for _, old := range slices.Sorted(maps.Keys(renamedEnv)) {
		fmt.Fprintf(&b, "| `%s` | %s |\n", old, renamedEnv[old])
	}
	return b.String()
}
