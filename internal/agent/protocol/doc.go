// Package protocol is the contract between fleetlift-agent inside a
// sandbox and whoever starts and drives it (the worker, a sandbox
// provider, the sandbox controller): the files under
// <workspace>/.fleetlift/ (the worker writes manifest.json and
// steering.json, the agent status.json and result.json), the environment
// variables the agent reads and sets (env.go), and its isolation modes.
//
// It imports only the standard library: the worker, the controller and
// the agent, which has no Temporal dependency, all use it.
package protocol
