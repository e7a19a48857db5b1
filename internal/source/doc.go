// Package source reads the campaigns repository at a revision: it resolves
// a branch, tag or commit to a commit SHA and exposes that commit's tree as
// an fs.FS, optionally rooted at a sub-path, without a work tree.
//
// A local path is read in place. Any other URL (file://, https://, ssh://,
// scp-like) is mirrored into a bare repository in a cache directory, one
// per URL. Resolve asks the remote for its refs first and fetches only when
// the remote's SHA for the requested ref differs from the cached one; a
// fetch mirrors every branch and tag with forced updates and pruning, so
// force-pushed and deleted refs are followed.
//
// Credentials come from the environment: an HTTPS token from the variable
// Options.TokenEnv names, an SSH key from a file. They are never put into
// URLs, and errors have URL user-info and the token removed.
//
// source imports go-git, internal/git (URL checks and redaction) and the
// standard library. It must not import spec, plan, state, reconcile or any
// other SDK (Temporal, client-go, go-github, Docker).
package source
