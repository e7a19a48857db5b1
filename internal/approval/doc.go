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
// who may approve (approvers in the repository config, CODEOWNERS, "the
// author of a change cannot approve it alone") and turning an applied record
// into a workflow signal all belong to this package as it grows; the plan
// only consumes the records.
//
// approval imports only the standard library: no SDK (Temporal,
// client-go, go-github, Docker), no CUE, and none of fleetlift's packages.
package approval
