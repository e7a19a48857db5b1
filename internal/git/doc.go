// Package git runs the git command line safely for everything in fleetlift
// that touches repositories: the agent in the sandbox and the forges.
//
// Every invocation runs with hooks, fsmonitor, the ext:: and fd::
// transports and submodule recursion switched off, with no system or
// global configuration and no terminal prompts, and only the file, https
// and ssh transports allowed (plus http to a loopback address). Clones of
// local paths never share objects with their source.
//
// Credentials come only from the environment: an HTTPS token in
// FLEETLIFT_GIT_TOKEN (see Git.TokenEnv) is handed to git through a
// credential helper that is scoped to the remote's origin. It is never put
// into a URL, it is present only in the environment of commands that talk
// to a remote, and those commands run in a scratch repository whose
// configuration fleetlift wrote, so nothing a checked-out repository or an
// agent wrote into a clone's .git/config can divert or capture it. Errors
// and outputs have URL user-info and the token replaced by REDACTED.
//
// Clones, pushes, staging and diffs are git commands run this way, so
// what git refuses (a tree with a path it treats specially) fails as git
// fails it. Two transfers run in this process instead, through go-git's
// smart HTTP client, because a fleet of small repositories spent most of
// its CPU starting git for them (http.go): the worker's copy of a
// repository at an http(s) forge (CloneBare) and pushes to one. They send
// the token to the same origins, refuse the same remotes and follow
// redirects as little as git does. Such a push reads only the objects
// (and the list of shallow commits) of the repository it pushes from, so
// it needs no scratch repository.
//
// SafeJoin and ValidateName keep workspace paths inside the workspace.
//
// git imports the standard library, go-git, x/net's proxy rules and
// redact; it must not import other fleetlift packages (it sits below
// agent and the forges).
package git
