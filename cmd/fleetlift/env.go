package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix starts the name of the environment variable each flag reads.
const envPrefix = "FLEETLIFT_"

// perCommandEnv are the flags whose meaning is the command's own: --output
// takes other formats in plan, reports, status and validate, and --dir is
// where demo makes its repositories but where schema writes its files.
// Each command's reads a variable of its own, so that a variable set for
// one command never changes (or breaks) another.
var perCommandEnv = map[string]bool{"output": true, "dir": true}

// ownEnv are flags, as "command/flag", that mean something of their own
// in one command where another command has a flag of the same name:
// prs --state (a pull request's state, not plan's recorded state),
// prs close --comment (left on pull requests, not kept in a record),
// prs merge, close, update and retry --repository (a list, where
// approve takes one), run --failed-only (a variable set for retry must not
// turn every run into a retry).
// They read a variable named after the command, as perCommandEnv's do.
var ownEnv = map[string]bool{"prs/state": true, "close/comment": true, "merge/repository": true, "close/repository": true,
	"update/repository": true, "retry/repository": true, "run/failed-only": true}

// envName is the environment variable flag of cmd reads when it is not
// given on the command line: FLEETLIFT_ and the flag's name in capitals,
// dashes as underscores (--temporal-tls-cert: FLEETLIFT_TEMPORAL_TLS_CERT),
// the same for every command; for a flag in perCommandEnv, FLEETLIFT_, the
// command's name and the flag's (status --output: FLEETLIFT_STATUS_OUTPUT).
func envName(cmd *cobra.Command, flag string) string {
	name := flag
	if cmd != nil && (perCommandEnv[flag] || ownEnv[cmd.Name()+"/"+flag]) {
		name = cmd.Name() + "-" + flag
	}
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// legacyEnv is a variable a flag read before every flag read its
// FLEETLIFT_ name; still honoured when that name is unset.
func legacyEnv(flag string) string {
	switch flag {
	case "sandbox":
		return "SANDBOX_PROVIDER"
	case "allow-file-root":
		return "FLEETLIFT_ALLOW_FILE_ROOTS"
	case "sandbox-secret-ref":
		return "FLEETLIFT_SANDBOX_SECRETS"
	}
	return ""
}

// bindEnv makes every flag of every command under root (but hidden ones:
// the agent in a sandbox reads FLEETLIFT_ variables of its own) read its
// environment variable, and says which in its help. The order is: the
// command line, then the variable, then the flag's default. No flag holds
// a secret: tokens and the webhook secret are read from the variables the
// *-env flags name. A command warns, in one log line, of the FLEETLIFT_
// variables nothing reads (a misspelt name).
func bindEnv(root *cobra.Command) {
	walkFlags(root, func(c *cobra.Command, f *pflag.Flag) {
		if !strings.Contains(f.Usage, "(env ") {
			f.Usage += " (env " + envName(c, f.Name) + ")"
		}
	})
	prev := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := flagsFromEnv(cmd); err != nil {
			return err
		}
		if prev != nil {
			if err := prev(cmd, args); err != nil {
				return err
			}
		}
		if cmd.Hidden {
			return nil
		}
		if unread := unreadEnv(cmd, os.Environ()); len(unread) > 0 {
			log, err := processLogger(cmd)
			if err != nil {
				return err
			}
			log.Warn("fleetlift reads none of these environment variables: a typo? (docs/environment.md lists those it reads)", "variables", strings.Join(unread, " "))
		}
		return nil
	}
}

// flagsFromEnv sets each flag of cmd not given on the command line from
// its environment variable, when that is set and not empty. A list flag
// takes a comma-separated list; --forge, whose values hold commas, one
// per line.
func flagsFromEnv(cmd *cobra.Command) error {
	if cmd.Hidden {
		return nil
	}
	var errs []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" {
			return
		}
		name := envName(cmd, f.Name)
		v := os.Getenv(name)
		if v == "" {
			if old := legacyEnv(f.Name); old != "" {
				name, v = old, os.Getenv(old)
			}
		}
		if v == "" {
			return
		}
		values := []string{v}
		if f.Value.Type() == "stringArray" {
			values = nil
			for _, line := range strings.Split(v, "\n") {
				if line = strings.TrimSpace(line); line != "" {
					values = append(values, line)
				}
			}
		}
		for _, one := range values {
			if err := cmd.Flags().Set(f.Name, one); err != nil {
				// The value is not quoted: a variable set by mistake to
				// a secret must not be echoed.
				errs = append(errs, fmt.Sprintf("$%s (for --%s): not a valid %s", name, f.Name, f.Value.Type()))
				return
			}
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
