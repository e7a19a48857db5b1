package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// choice is a string flag that takes one of a fixed list of values: any
// other is a usage error when the command line is parsed, and shell
// completion offers the list.
type choice struct {
	value   *string
	allowed []string
}

// newChoice is a choice flag value of its own, set to def.
func newChoice(def string, allowed ...string) *choice {
	return choiceVar(new(string), def, allowed...)
}

// choiceVar is a choice flag value kept in *p, set to def.
func choiceVar(p *string, def string, allowed ...string) *choice {
	*p = def
	return &choice{value: p, allowed: allowed}
}

func (c *choice) String() string { return *c.value }
func (c *choice) Type() string   { return "string" }

func (c *choice) Set(v string) error {
	if !slices.Contains(c.allowed, v) {
		return fmt.Errorf("want %s", orList(c.allowed))
	}
	*c.value = v
	return nil
}

// orList is "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// sandboxKinds are the values of --sandbox.
var sandboxKinds = []string{sandboxLocal, sandboxDocker, sandboxKubernetes, sandboxKubernetesJobs}

// runIDCommands take a run's ID as their argument.
var runIDCommands = []string{"status", "approve", "reject", "steer", "continue", "abort", "retry", "reports"}

// completionBudget bounds how long completing a run ID may take: a
// shell waits on it at every tab.
const completionBudget = 2 * time.Second

// registerCompletions has shells complete the values of every choice
// flag and of --sandbox, and run IDs, read from Temporal, for the
// commands that take one.
func registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command, flags *pflag.FlagSet)
	walk = func(c *cobra.Command, flags *pflag.FlagSet) {
		flags.VisitAll(func(f *pflag.Flag) {
			values := sandboxKinds
			if ch, ok := f.Value.(*choice); ok {
				values = ch.allowed
			} else if f.Name != "sandbox" {
				return
			}
			_ = c.RegisterFlagCompletionFunc(f.Name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		})
		if slices.Contains(runIDCommands, c.Name()) && c.Parent() == root {
			c.ValidArgsFunction = completeRunID
		}
		for _, sub := range c.Commands() {
			walk(sub, sub.LocalNonPersistentFlags())
		}
	}
	walk(root, root.PersistentFlags())
}

// completeRunID offers the IDs of the runs Temporal records, when it
// answers within completionBudget; nothing otherwise.
func completeRunID(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	if len(args) > 0 || flagsFromEnv(cmd) != nil {
		return nil, none
	}
	f, ok := temporalFlagsOf(cmd)
	if !ok || !listening(f.address) {
		return nil, none
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionBudget)
	defer cancel()
	c, err := f.dial(ctx)
	if err != nil {
		return nil, none
	}
	defer c.Close()
	runs, err := runReader(c, f.namespace).Runs(ctx)
	if err != nil {
		return nil, none
	}
	// Newest first; a definition started again lists once, as its
	// latest run.
	var ids []cobra.Completion
	seen := map[string]bool{}
	for _, r := range runs {
		fleetlifts := strings.HasPrefix(r.ID, "campaign/") || strings.HasPrefix(r.ID, "task/")
		if fleetlifts && strings.HasPrefix(r.ID, toComplete) && !seen[r.ID] {
			seen[r.ID] = true
			ids = append(ids, cobra.CompletionWithDesc(r.ID, r.Status))
		}
	}
	return ids, none
}

// temporalFlagsOf reads the Temporal connection flags of cmd as parsed.
func temporalFlagsOf(cmd *cobra.Command) (*temporalFlags, bool) {
	var f temporalFlags
	for name, p := range map[string]*string{
		"temporal-address": &f.address, "namespace": &f.namespace, "state-dir": &f.stateDir,
		"temporal-tls-cert": &f.tls.cert, "temporal-tls-key": &f.tls.key, "temporal-tls-ca": &f.tls.ca,
		"temporal-tls-server-name": &f.tls.serverName, "temporal-tls": &f.tls.mode, "temporal-api-key-env": &f.tls.apiKeyEnv,
	} {
		v, err := cmd.Flags().GetString(name)
		if err != nil {
			return nil, false
		}
		*p = v
	}
	return &f, true
}
