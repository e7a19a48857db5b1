package main

import (
	"fmt"
	"strings"
)

// Mode is what a round kills.
type Mode int

const (
	// WholeTree kills `up` and every process under it: agents in their
	// own process groups, their jails and the commands in them.
	WholeTree Mode = iota
	// AgentsOnly kills the fleetlift-agent processes (agents and their
	// jails) and leaves `up` running.
	AgentsOnly
	// UpOnly kills `up`'s process group and leaves the agents running.
	UpOnly
	// Approvals requires approval of every result; the harness approves
	// them one at a time and kills the whole tree between approvals.
	Approvals
	// FirstStart kills the whole tree during first starts of `up`, each
	// on a fresh state directory, and starts it again there.
	FirstStart
)

var modeNames = [...]string{
	WholeTree:  "whole-tree",
	AgentsOnly: "agents",
	UpOnly:     "up",
	Approvals:  "approvals",
	FirstStart: "first-start",
}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// restarts reports whether the mode's kills take `up` down, so that it is
// started again after each.
func (m Mode) restarts() bool { return m != AgentsOnly }

// describe says what a round of the mode does.
func (m Mode) describe() string {
	switch m {
	case WholeTree:
		return "kill up and every process under it (agents, jails, commands), restart up"
	case AgentsOnly:
		return "kill the agents (and their jails), leave up running"
	case UpOnly:
		return "kill up's process group, leave the agents running, restart up"
	case Approvals:
		return "approval required; approve results one by one, kill the whole tree between approvals, restart up"
	case FirstStart:
		return "kill the whole tree during first starts of up on fresh state directories (probes, then the round's own), restart up"
	}
	return m.String()
}

// parseModes reads a comma-separated list of mode names, or "all".
func parseModes(s string) ([]Mode, error) {
	if strings.TrimSpace(s) == "all" {
		return []Mode{WholeTree, AgentsOnly, UpOnly, Approvals, FirstStart}, nil
	}
	var out []Mode
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		found := false
		for m, n := range modeNames {
			if n == name {
				out = append(out, Mode(m))
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown mode %q: want all, or some of %s", name, strings.Join(modeNames[:], ", "))
		}
	}
	return out, nil
}
