// Package plan pairs the desired state read from Git (definitions, invalid
// definition files, approval records) with the recorded run state, and
// says what reconciling the two would do: which campaigns would be
// created, updated (with a per-field diff and the repositories added and
// removed), suspended, resumed, pruned or left orphaned, and which
// approvals would be applied or ignored, and why.
//
// Compute is pure: no I/O, no context, no clock, no randomness; the same
// inputs give the same Plan, sorted the same way. It is the core of both
// `fleetlift plan` (the dry run posted on pull requests) and the
// reconciler, which carries out the plan it computes at each pass.
// Rendering lives in package render, so that the plan's types stay free of
// presentation.
//
// Rules worth knowing:
//
//   - Campaigns are paired by id, never by file: a renamed file with the
//     same id is the same campaign (unchanged, or updated); a changed id is
//     a new campaign plus an orphaned old one.
//   - A recorded campaign missing from Git is orphaned; it is pruned
//     (its run cancelled) only when the repository config allows pruning
//     AND the campaign was applied with sync_policy.prune, and never while
//     any definition file is invalid. When the campaign's own file is the
//     invalid one, or it cannot be told whether it is, its action is
//     Unknown: the run is left as it is.
//   - Approvals bind to results: approve, reject and steer apply only when
//     the result digest they name is the one awaiting approval now.
//     Conflicting approvals for one result are all ignored, and nothing
//     applies to a run the same plan cancels (prune, or restart).
//
// plan imports spec, state, approval and the standard library. It must not
// import any SDK (Temporal, client-go, go-github, Docker), any state store
// implementation, or render.
package plan
