package docker

import "strings"

// HostScope is a Scope named after a worker's host: host with every
// character a scope may not hold replaced by '-', without leading '.',
// '_' and '-', cut to 32 characters; DefaultScope when nothing is left.
func HostScope(host string) string {
	scope := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, host)
	scope = strings.TrimLeft(scope, "._-")
	if len(scope) > 32 {
		scope = scope[:32]
	}
	if scope == "" {
		return DefaultScope
	}
	return scope
}
