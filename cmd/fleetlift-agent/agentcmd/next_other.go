//go:build !linux

package agentcmd

import "errors"

// redirectOutput is for agents that serve more than one sandbox, which
// jailed work needs (Linux).
func redirectOutput(string) error {
	return errors.New("an agent serves one sandbox on this system")
}

func closeOnExec(int) error {
	return errors.New("an agent serves one sandbox on this system")
}
