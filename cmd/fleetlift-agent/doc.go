// Command fleetlift-agent runs inside a sandbox: `fleetlift-agent serve
// --workspace DIR` speaks the agent's file protocol (see package agent).
// It has no Temporal dependency; the pipeline lives in internal/agent,
// the commands in package agentcmd beside this one, and main only wires
// them.
package main
