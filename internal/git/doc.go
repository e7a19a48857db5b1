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
// fails it.
//
// SafeJoin and ValidateName keep workspace paths inside the workspace.
//
// git imports only the standard library; it must not import other
// fleetlift packages (it sits below agent and the forges).
package git
