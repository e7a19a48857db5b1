// Package leader elects one leader among several reconciler replicas,
// with Temporal as the only shared service: the replica whose Lease
// workflow (package workflow) runs under a fixed workflow id leads.
//
// A replica campaigns by starting the Lease workflow with the id-conflict
// policy FAIL, so at most one start succeeds while a lease runs. The
// winner renews through an Update every TTL/3; the others describe the
// workflow every TTL/3 and start it anew once it has closed (expired, or
// released by a leader that shut down).
//
// # Safety
//
// The old leader stops acting before anyone else can lead. The lease
// workflow's deadline is TTL after it handles a renewal, and it handles a
// renewal no earlier than the leader sent it. The leader counts from when
// it sent its last successful renewal (or its start request) and cancels
// the context it handed to lead as soon as TTL*2/3 have passed without
// another success, or at once when a renewal is rejected or finds the
// lease closed. That leaves TTL/3 between the old leader's cancellation
// and the earliest moment the lease can pass on, for lead to notice and
// return. lead must therefore check its context before every action that
// only the leader may take, and return promptly once it is cancelled; the
// Elector waits for it to return before it releases the lease or
// campaigns again.
//
// The argument assumes that the leader's and the server's clocks run at
// about the same rate (their offset does not matter), that each replica's
// Identity is unique, and that nobody terminates or resets the lease
// workflow by hand: a terminated lease frees the id at once, and the old
// leader learns of it only at its next renewal, up to TTL/3 later.
//
// Renewals are Updates, which a fleetlift worker must process: with no
// worker polling the task queue, the leader steps down after TTL*2/3 and
// nobody leads until a worker returns.
//
// The package imports the Temporal SDK client and package workflow (for
// the Lease workflow's names and types); never the Temporal server.
package leader
