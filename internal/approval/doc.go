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
// PathName names a target in branch and file names, one name per target;
// RecordPath and SecondRecordPath name a record's file under approvals/.
//
// Writing records (`fleetlift approve --git` and its kin) is the inverse
// of reading them: a Draft is a Record with a comment, Encode writes its
// file in the layout the reconciler reads (package spec loads it and
// package desired turns it into a Record), Place decides its file among
// the records already there, and CommitMessage and ProposalBranch name
// the commit and branch that carry it. Package userrepo runs git in the
// approver's own clone to commit them.
//
// All of it is pure: the forge is asked about team membership through a
// function the caller passes (IsMember), files are read through a
// function too (Place), and Git commits and reviews come in as values.
//
// approval imports only the standard library and gopkg.in/yaml.v3 (to
// write record files): no SDK (Temporal, client-go, go-github, Docker),
// no CUE, and none of fleetlift's packages.
// Rule has the fields of spec.ApproverRule and Review those of
// forge.Review, so callers convert with approval.Rule(r) and
// approval.Review(r); the tests hold them to it.
package approval
