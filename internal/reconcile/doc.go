// Package reconcile is fleetlift's GitOps loop: read the campaigns
// repository at the watched branch's head, read the recorded run state,
// compute the plan, carry it out, and write the status mirror. It is
// level-based: every pass works from what Git and the recorded state say
// now, not from the events that woke it, so a missed or repeated trigger
// (poll tick, webhook, file-system event) costs one pass and nothing else.
//
// Carrying out a plan is idempotent. Workflows have deterministic IDs and
// are started with a conflict policy that refuses a second run of the same
// ID, approval decisions name the result they decide about, and campaign
// actions name the approval record they carry out and the generation of
// the run it decides about, so a restarted or duplicated reconciler never
// starts or signals anything twice to effect, and a record about one run
// never acts on a later one.
// Errors are per campaign: one campaign that cannot be applied is reported
// and the others are applied.
//
// The package talks to its surroundings through small interfaces (Source,
// state.Reader, Dispatcher, Mirror, Reviews) so that the loop is tested
// with fakes; package dispatch carries plans out on Temporal, package
// mirror writes the status branch, package reviews keeps approval pull
// requests on a forge.
package reconcile
