// Command fleetlift-jail is the agent's jail entry point as a program of
// its own (see package jail). fleetlift-agent runs it, when it lies beside
// the agent, for every command it jails, twice each (the jail's init, then
// the command's own namespace): it starts in about a millisecond where
// fleetlift-agent, a larger program whose packages do more at start, takes
// five. Without it the agent runs its own hidden jail command.
package main

import (
	"os"

	"github.com/fleetlift/fleetlift/internal/jail"
)

func main() { os.Exit(jail.Main(os.Args[1:])) }
