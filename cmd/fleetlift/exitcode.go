package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// Exit statuses, the same for every command (docs/cli.md).
const (
	exitOK      = 0 // done
	exitFailed  = 1 // the operation failed, or found problems
	exitUsage   = 2 // the command line is wrong; nothing was done
	exitChanges = 2 // plan --detailed-exitcode: there are changes
)

// exitError carries an exit code out of a command that has already told
// the user what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError is a command line that is wrong: an unknown command or
// flag, a value a flag does not take, a flag or argument missing or one
// too many. It exits with exitUsage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// exitCode is the exit status of a command that returned err. cobra's
// own errors for an unknown command or arguments it checks carry no
// type: they are told by their text. Under plan --detailed-exitcode, 2
// means changes, as with terraform plan, so a usage error there is 1.
func exitCode(err error, args []string) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command ") {
		if detailedExitcode(args) {
			return exitFailed
		}
		return exitUsage
	}
	return exitFailed
}

// detailedExitcode reports whether args (or the environment) ask plan
// for --detailed-exitcode, judged without parsing them: they may not
// parse.
func detailedExitcode(args []string) bool {
	on := false
	if v, err := strconv.ParseBool(os.Getenv(envName(nil, "detailed-exitcode"))); err == nil {
		on = v
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--detailed-exitcode" {
			on = true
		} else if v, ok := strings.CutPrefix(a, "--detailed-exitcode="); ok {
			on, _ = strconv.ParseBool(v)
		}
	}
	return on
}

// exitCodes is the "Exit status" section of a command's help: failed
// says what 1 means for that command; more are lines after 2's.
func exitCodes(failed string, more ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n\nExit status:\n  %d  success\n  %d  %s\n", exitOK, exitFailed, failed)
	fmt.Fprintf(&b, "  %d  the command line is wrong (an unknown command or flag, a value a flag\n     does not take, a flag or argument missing or one too many): nothing was done", exitUsage)
	for _, m := range more {
		b.WriteString("\n  " + m)
	}
	return b.String()
}

// usageArgs makes the argument checks of every command under c return
// usage errors.
func usageArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}
