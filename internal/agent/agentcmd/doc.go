// Package agentcmd is the cobra command that runs the in-sandbox agent,
// `fleetlift-agent serve --workspace DIR`; the fleetlift binary can mount
// the same command as a hidden `fleetlift agent serve`. It wires the
// agent to git and the forges it can use, and mounts beside serve the
// jail every command runs in (package jail), a container sandbox's first
// process (`entrypoint`, package entrypoint), and the commands a provider
// that reaches the sandbox only through an exec API runs there (`install`,
// `idle`, `exec`, `file get|put`, package shim).
//
// agentcmd imports agent, git, forge and the forge adapters that work in a
// sandbox (local); it must not import Temporal or the sandbox providers.
package agentcmd
