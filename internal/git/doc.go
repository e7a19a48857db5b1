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
// One clone and one push are made without git, speaking git's smart HTTP
// protocol in this process (smartHTTP): the shallow clone of one branch
// over http(s), the clone of every repository of a campaign, which keeps
// the fetched pack, indexes it and checks the branch out (httpClone); and
// a single branch pushed on a lease, which sends the loose objects the
// commit reaches. Both send the token only to an allowed origin, follow
// no redirect, take no proxy and trust the certificate authorities git
// would (GIT_SSL_CAINFO, GIT_SSL_CAPATH); whatever they do not take, or
// the server refuses, git clone or git push then does.
//
// SafeJoin and ValidateName keep workspace paths inside the workspace.
//
// git imports only the standard library; it must not import other
// fleetlift packages (it sits below agent and the forges).
package git
