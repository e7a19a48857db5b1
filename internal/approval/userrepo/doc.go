// Package userrepo runs git in a person's own clone of the campaigns
// repository, as they run it themselves: with their configuration,
// identity, hooks, commit signing and credentials. It is how `fleetlift
// approve --git` (and reject and steer) commits approval records as the
// approver, so that the reconciler counts them.
//
// It is deliberately not package git, which runs git with no user
// configuration and no hooks, for repositories fleetlift and agents work
// in: here the repository is the user's, not a sandbox, and the commit
// must be theirs.
//
// userrepo imports only the standard library and package approval (for
// Identity).
package userrepo
