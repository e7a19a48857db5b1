// Package state holds the recorded run state of campaigns: for each Task
// or Campaign id, the spec it was last applied with (digest, and the
// normalised spec itself when known), the source revision and generation,
// the workflow running it, its phase, what happened in each repository,
// which results wait for approval and, for a report, every report.
//
// The plan (package plan) pairs this recorded state with the desired state
// read from Git. Stores keep it: Reader is all the plan needs; Writer is for
// stores the reconciler writes to. Implementations:
//
//   - memory: in process, for tests and `--state none`-style empty state.
//   - file:   one JSON file (format documented in package file), for
//     `fleetlift plan --state file:PATH` offline and in CI.
//   - temporal: read from the workflows' memos, queries and results; the
//     workflows write it, so it is only a Reader.
//
// Every implementation runs the shared conformance suite in package
// statetest.
//
// state imports only the standard library: no SDK (Temporal, client-go,
// go-github, Docker), and not package spec, so that workflow code and the
// Temporal store can use these types without linking CUE. Kind mirrors
// spec.Kind by value.
package state
