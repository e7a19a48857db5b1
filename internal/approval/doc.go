// Package approval holds approval records: what a person decided about a
// result a campaign or task is waiting on, as committed to the campaigns
// repository (approvals/**.yaml) or given by a review on an approval pull
// request.
//
// Approvals are desired state, like definitions: the reconciler reads them
// at each revision and the plan (package plan) binds each to the recorded
// run state, applying it only when the result it names is still the one
// awaiting approval. The types live here, not in plan, because approvals
// have a life of their own beside the plan: reading the records, deciding
// who may approve and turning an applied record into a workflow signal
// belong to this package; the plan only consumes the records.
//
// Who may approve:
//
//   - Policy: the approver rules of the repository config (Rule, a path
//     Glob with users and teams) and, when switched on, CODEOWNERS
//     (ParseCodeOwners, ReadCodeOwners). Policy.Allowed answers for one
//     user and one definition file.
//   - Policy.GateCommits: which committed records count — the approver is
//     allowed, the record's commit is theirs, and "the author of a change
//     cannot approve it alone".
//   - DecideReviews: what the reviews of an approval pull request decide
//     (approve, steer, reject, or nothing yet), with GitHub's rules for
//     which review counts; closing it rejects only when the closer may
//     approve.
//
// A record names the run it decides about: approve, reject and steer by
// the result's digest, continue, abort and retry by the run's generation
// (Record.Generation, which approve, reject and steer may name too).
// PathName names a target in branch and file names, one name per target.
//
// All of it is pure: the forge is asked about team membership through a
// function the caller passes (IsMember), and Git commits and reviews come
// in as values.
//
// approval imports only the standard library: no SDK (Temporal,
// client-go, go-github, Docker), no CUE, and none of fleetlift's packages.
// Rule has the fields of spec.ApproverRule and Review those of
// forge.Review, so callers convert with approval.Rule(r) and
// approval.Review(r); the tests hold them to it.
package approval
