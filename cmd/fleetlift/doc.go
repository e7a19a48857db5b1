// Command fleetlift runs code-change campaigns across many repositories,
// driven by definitions kept in a Git repository.
//
// One file per command; this is the only place that wires dependencies
// together. It also serves as its own spec evaluation worker (see
// spec.Pool), so it checks spec.IsWorker before anything else.
package main
