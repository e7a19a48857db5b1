// Command fleetlift-agent runs inside a sandbox: `fleetlift-agent serve
// --workspace DIR` speaks the file protocol of seed 000 (see package
// agent). It has no Temporal dependency; everything but the wiring lives
// in internal/agent and internal/agent/agentcmd.
package main
