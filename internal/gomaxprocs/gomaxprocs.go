// Package gomaxprocs carries a GOMAXPROCS past a Go program that runs
// with one of its own (the agent, the jail) to the commands it starts.
package gomaxprocs

import (
	"strconv"
	"strings"
)

// Carry is env for a program that runs on procs processors: GOMAXPROCS
// set to procs, and the GOMAXPROCS env had (empty: none) in carrier.
func Carry(env []string, carrier string, procs int) []string {
	out := make([]string, 0, len(env)+2)
	kept := ""
	for _, kv := range env {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "GOMAXPROCS":
			kept = v
		case carrier:
		default:
			out = append(out, kv)
		}
	}
	return append(out, "GOMAXPROCS="+strconv.Itoa(procs), carrier+"="+kept)
}

// Restore is env, the environment of a program started by Carry, for
// the commands it starts: the GOMAXPROCS carrier holds in place of the
// program's own (none when it is empty), and no carrier. env without a
// carrier is returned as it is.
func Restore(env []string, carrier string) []string {
	kept, carried := "", false
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == carrier {
			kept, carried = v, true
		}
	}
	if !carried {
		return env
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != "GOMAXPROCS" && k != carrier {
			out = append(out, kv)
		}
	}
	if kept != "" {
		out = append(out, "GOMAXPROCS="+kept)
	}
	return out
}
