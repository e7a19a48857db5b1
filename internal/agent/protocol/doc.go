// Package protocol is the file protocol between the fleetlift worker and
// fleetlift-agent inside a sandbox (seed 000): the worker writes
// manifest.json and steering.json under <workspace>/.fleetlift/, the agent
// writes status.json and result.json there.
//
// It imports only the standard library: both the worker and the agent,
// which has no Temporal dependency, use it.
package protocol
