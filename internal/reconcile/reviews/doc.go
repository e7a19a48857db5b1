// Package reviews keeps approval pull requests on the campaigns
// repository for the results awaiting approval, and turns their reviews
// into approval records: PullRequests is the reconciler's Reviews on a
// forge with reviews. It builds each pull request's branch in a scratch
// repository (package git), from the watched branch's head and a summary
// file, and reads who decided through the forge (package forge).
//
// reviews imports reconcile (the interfaces it serves), approval,
// desired, forge, git, markdown and state; never a forge adapter, the
// Temporal SDK or the reconciler's other adapters.
package reviews
