// Package workflow holds fleetlift's Temporal workflows: Task (seed 000's
// TransformV2: provision a sandbox, hand the agent its manifest, wait,
// then the approval loop) and Campaign (its units as child Tasks, or as
// activities of its own when they need no decision, in a sliding window
// or strict batches, with a failure threshold, signals, a PR budget and
// continue-as-new).
//
// Workflow code is deterministic: no I/O, no wall clock, no randomness,
// no goroutines — only the SDK's workflow package. It imports the SDK's
// workflow and temporal packages, spec, the agent protocol, the activity
// types, status (the records it writes: states, results, memo keys) and
// sandbox's value types (resources, secret references); never the
// server, a sandbox provider or a forge.
//
// No release has run these workflows yet, so each has one code path and
// records no version marker. From the first release on, every change to
// the commands a workflow issues goes behind workflow.GetVersion, and
// the replay tests (replay_test.go) keep a recorded run of the version
// before it.
package workflow
