// Package mirror writes the reconciler's status back to Git, as commits on
// a status branch of the campaigns repository (fleetlift/status by
// default), so that people can see what fleetlift is doing where they
// already work: in the repository, on the forge's web view, with git log.
//
// Branch implements reconcile.Mirror. Each write is one commit whose tree
// holds:
//
//	README.md            revision applied, time, a table of campaigns (kind,
//	                     phase, generation, repositories completed / failed /
//	                     total, pull requests, approvals awaited), what awaits
//	                     approval with the approval record that approves it,
//	                     approval records that do not apply, campaigns left
//	                     alone, failed actions, invalid definition files
//	status.json          the same for machines (format_version 1): revision,
//	                     time, summary, campaigns (state.Campaign without its
//	                     spec), errors, outcomes, approvals; lists sorted,
//	                     [] rather than null
//	campaigns/<id>.md    one page per recorded campaign: its phase and
//	                     message (how it ended: "completed_with_failures",
//	                     "1 of 3 repositories failed, 2 completed"), its
//	                     repositories with branch and pull request, and the
//	                     files of each result awaiting approval
//	reports/<id>/        for a report-mode run (package report):
//	                     README.md, the table of every repository's (and
//	                     for_each target's) frontmatter with status,
//	                     problems and a link to each report's own file,
//	                     <name>.md, its frontmatter and body (or, for one
//	                     that failed, what the agent wrote); README.md and
//	                     the campaign's page link to it, and status.json
//	                     holds the reports without their texts
//
// To read it:
//
//	git fetch origin fleetlift/status
//	git show origin/fleetlift/status:README.md
//	git log origin/fleetlift/status
//
// The status is never written onto the watched branch: Branch refuses to
// write when its branch is the watched one or the watched branch is not
// set (ErrWatchedBranch), and it pushes no ref but its own. The commit's
// parent is the previous status commit, and the push carries a lease on
// it; when another writer moved the branch in between, Write reads it
// again and tries once more. Render is pure and sorts everything, so an
// equal status gives an equal tree; a status whose files equal the
// branch tip's, or differ only in the time, makes no commit: the time
// shown is when the status last changed.
//
// Nothing written carries a credential: the spec (which names repository
// URLs) is left out, and URL user-info in every field and file is
// replaced by REDACTED (git.Redact).
//
// mirror imports reconcile, plan, approval, state, report, git, markdown
// and the standard library. It must not import any SDK (Temporal, go-github,
// client-go), a forge, or a state store: it only shows the status it is
// handed.
package mirror
