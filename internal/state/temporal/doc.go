// Package temporal reads recorded run state from Temporal: each definition
// runs as the workflow "task/<id>" or "campaign/<id>", whose memo (set when
// the run starts) holds the definition's id, kind, file, digest, normalised
// spec and generation, and whose status query or result holds per-repository
// outcomes. The workflows write it; this package only reads, so Reader is
// all it implements.
//
// The reports of a report-mode run come from the same places: the task's
// result (or status, while it runs), and for a campaign each unit's task,
// whose result is read once it finished and kept. A running campaign's
// runs of units add what their heartbeats tell (RunsProgressOf).
//
// For the commands that show one run as its workflow records it (status,
// run), Status, Awaiting and Runs read status.Run and status.Entry: all
// the workflow records, where state.Campaign keeps what the plan needs.
//
// It imports the Temporal SDK client and API, state, payload and status
// (the records the workflows write); never the workflows, the activities,
// package report or the server.
package temporal
