// Package forgetest is the shared core of the fake forge APIs that the
// tests of the gitea and github adapters run against.
//
// A Server keeps what Gitea's and GitHub's APIs have in common for one
// repository, acme/svc: it records every request (Calls, Count, Bodies),
// refuses requests without the token, lets a test answer a request itself
// (Before), keeps pull requests, their reviews and comments in memory,
// cuts lists into pages and serves the routes both forges answer alike. A
// fake embeds a Server and adds what differs between the forges: the API
// description (authorization scheme, error bodies, JSON shapes), its own
// handlers for the shared routes (Routes), its own routes and its
// pagination headers.
//
// Paced is a forge that enforces GitHub's secondary limits on writes, for
// the tests and the benchmark (bench/pace) of the shared write budget.
//
// forgetest imports only the standard library and is imported only by
// tests and benchmarks; production code must not import it.
package forgetest
