// Package workflow holds fleetlift's Temporal workflows: Task (seed 000's
// TransformV2: provision a sandbox, hand the agent its manifest, wait,
// then the approval loop) and Campaign (child Tasks in batches with a
// failure threshold, signals, a PR budget and continue-as-new).
//
// Workflow code is deterministic: no I/O, no wall clock, no randomness,
// no goroutines — only the SDK's workflow package. It imports the SDK's
// workflow and temporal packages, spec, the agent protocol, the activity
// types and sandbox's value types (resources, secret references); never
// the server, a sandbox provider or a forge.
package workflow
