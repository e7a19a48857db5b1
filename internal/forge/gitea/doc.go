// Package gitea is the forge.Hub for Gitea. Gitea's REST API (under
// <root>/api/v1/) has GitHub's shape for most of what fleetlift needs —
// creating, editing and listing pull requests, review requests, reviews,
// issue comments and commit statuses take the same paths and JSON — so
// the Forge is the github package's Forge with Gitea's Dialect:
//
//   - authorization "token <token>" and page size "limit";
//   - pull requests found by listing the base branch's and checking the
//     head (the list has no head filter);
//   - review states REQUEST_CHANGES, COMMENT and REQUEST_REVIEW
//     normalised to CHANGES_REQUESTED, COMMENTED and PENDING, and a
//     dismissed review reported as DISMISSED;
//   - drafts marked by the "WIP: " title prefix;
//   - labels added by id, looked up among the repository's and the
//     organization's labels and created when missing;
//   - team membership through the organization's teams and
//     /teams/{id}/members/{user};
//   - the pull request a commit was merged from at
//     /repos/{owner}/{repo}/commits/{sha}/pull (GitHub lists the pull
//     requests of a commit at .../commits/{sha}/pulls), and the head it
//     was merged at from refs/pull/{number}/head: Gitea reports a merged
//     pull request's head as its branch's current commit while the
//     branch exists.
//
// It shares the github package's Budget, push through the git package's
// credential helper and refusal of repositories on another host. The
// end-to-end test against a real Gitea lives in internal/forge/giteatest.
//
// gitea imports the forge, forge/github and git packages and the
// standard library; it reuses the GitHub adapter deliberately, since
// Gitea speaks a dialect of its API, and must not import agent, sandbox
// or Temporal.
package gitea
