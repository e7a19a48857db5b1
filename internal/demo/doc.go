// Package demo makes the repositories `fleetlift demo` walks through, as
// plain git repositories under a directory: three target repositories, a
// campaigns repository with its config, and the campaign that changes
// the targets. The command runs the loop on them; the end-to-end tests of
// cmd/fleetlift use them too.
//
// It runs the git command line with no system or global config, as the
// demo's people (Author, Approver), and imports only the standard library.
package demo
