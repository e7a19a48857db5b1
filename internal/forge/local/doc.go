// Package local is the forge for repositories reachable without a forge
// API: a bare repository on disk, a file:// URL, http(s) on loopback, or
// ssh. A "pull request" is the head branch pushed to the repository plus a
// record of what was proposed.
//
// The record is the JSON file pr.json (title, body, labels, reviewers,
// draft, base, head, commit, url, created_at, updated_at) in a commit on
// the ref refs/fleetlift/pr/<branch> of the same repository, pushed
// atomically with the branch. Each update is a new commit whose parent is
// the previous record, so the history is there too. To look at it:
//
//	git fetch origin 'refs/fleetlift/pr/*:refs/fleetlift/pr/*'
//	git show refs/fleetlift/pr/<branch>:pr.json
//	git log refs/fleetlift/pr/<branch>
//
// The URL of a pull request is "<repository url>#<branch>"; Number is 0.
//
// Pushes go through a scratch repository (see git.Scratch); a Forge keeps
// one from one pull request to the next and Close removes it.
//
// local imports the forge and git packages and the standard library; it
// must not import agent, sandbox or any SDK.
package local
