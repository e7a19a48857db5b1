// Package agentcmd is the cobra command that runs the in-sandbox agent,
// `fleetlift-agent serve --workspace DIR`; the fleetlift binary mounts
// the same command as a hidden `fleetlift agent serve`. It wires the
// agent to git, and mounts beside serve the jail every command runs in
// (package jail), a container sandbox's first process (`entrypoint`,
// package entrypoint), and the commands a provider that reaches the
// sandbox only through an exec API runs there (`install`, `idle`,
// `exec`, `file get|put`, package shim).
//
// It is the agent binary's command, so it lives under cmd/fleetlift-agent,
// and outside an internal/ directory there because three kinds of
// program mount it: fleetlift-agent, fleetlift (its hidden agent
// command, the agent when no fleetlift-agent lies beside it), and test
// binaries and benchmarks that are their own sandboxes' agent (RunAgent).
// What the worker and the controller need to start an agent (the
// isolation modes, the orphan wait, the protocol) lives in internal/agent
// and its protocol package, not here.
//
// agentcmd imports agent and its entrypoint, protocol and shim packages,
// git and jail; it must not import Temporal, a forge or a sandbox
// provider.
package agentcmd
