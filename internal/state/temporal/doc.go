// Package temporal reads recorded run state from Temporal: each definition
// runs as the workflow "task/<id>" or "campaign/<id>", whose memo (set when
// the run starts) holds the definition's id, kind, file, digest, normalised
// spec and generation, and whose status query or result holds per-repository
// outcomes. The workflows write it; this package only reads, so Reader is
// all it implements.
//
// It imports the Temporal SDK client, state and workflow (for the status
// types); never the server.
package temporal
