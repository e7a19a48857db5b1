// Package giteatest runs a real Gitea server for end-to-end tests of the
// gitea forge adapter and of the flows that review pull requests.
//
// Start runs bin/gitea (built by `make bin/gitea`, see internal/forge/giteatest/gitea) on
// 127.0.0.1 with a free port, SQLite and everything in t.TempDir(), and
// stops it when the test ends. It creates a site administrator; the other
// helpers (CreateUser, CreateOrg, CreateTeam, CreateRepo, AddCollaborator,
// Do) go through Gitea's API with that administrator's token. Git commands
// get credentials only through GitEnv (http.extraHeader in GIT_CONFIG_*),
// never in a URL or on a command line. Gitea's logs reach the test log only
// when the test failed.
//
// Launch does the same for a program (the benchmarks), in a directory it
// is given, until Close; Call is Do returning its error, and
// Options.MaxResponseItems raises Gitea's page cap of 50 for clients that
// read only the first page.
//
// The binary is found through $FLEETLIFT_GITEA_BINARY or as bin/gitea in the
// module root above the working directory. A missing binary fails the test;
// it never skips. Gitea's templates and options come from its module source
// (STATIC_ROOT_PATH), $FLEETLIFT_GITEA_STATIC_ROOT or the module cache.
//
// giteatest imports only the standard library.
package giteatest
