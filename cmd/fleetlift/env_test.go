package main

import (
	"io"
	"regexp"
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
			if f.Name != "help" && !strings.Contains(f.Usage, "(env "+envName(f.Name)+")") {
				t.Errorf("%s --%s: its help does not name $%s: %q", c.CommandPath(), f.Name, envName(f.Name), f.Usage)
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
}

// TestNoFlagHoldsASecret: tokens, keys and the webhook secret come from
// the environment or files whose names flags give (-env, -file), or from
// Kubernetes Secrets a flag refers to (-ref), never from a flag's value,
// which process listings and shell histories show.
func TestNoFlagHoldsASecret(t *testing.T) {
	secretish := regexp.MustCompile(`token|secret|password|passwd|api-key|credential`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if secretish.MatchString(f.Name) && !strings.HasSuffix(f.Name, "-env") && !strings.HasSuffix(f.Name, "-file") && !strings.HasSuffix(f.Name, "-ref") {
				t.Errorf("%s --%s takes a secret's value: name a variable (-env) or a file (-file) instead", c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(io.Discard, io.Discard))
}
