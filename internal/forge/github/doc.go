// Package github is the forge.Hub for GitHub (github.com and GitHub
// Enterprise), built on go-github v60: it pushes the head branch with the
// git package, opens or finds the pull request from it (branch names are
// deterministic, so a retry finds the one it opened), adds labels,
// requests user and team reviewers, lists reviews, finds the pull request
// a commit was merged from, keeps one comment per marker and sets commit
// statuses.
//
// Repository arguments are clone URLs (https, ssh or scp-like); owner and
// name come from the URL, and a URL on another host than the forge's is
// refused. The token goes into the Authorization header of requests to
// the API host only, and into git's environment for the credential
// helper the git package configures; never into a URL, a log line or an
// error.
//
// Every request goes through a Budget, an http.RoundTripper wrapper that
// one forge account's Forge values share: a token bucket for requests
// and one for writes, a bound on requests in flight, and, when GitHub
// reports its primary rate limit used up (403/429 with
// X-RateLimit-Remaining: 0) or a secondary rate limit (Retry-After, or
// its message), a pause for every caller until the forge's time, after
// which the request is retried. After a server error or a broken
// connection the forge may have acted, so only requests that change
// nothing when repeated (reads, PUT, DELETE, and writes marked with
// Idempotent: edits, labels, review requests, statuses) are retried, with
// exponential backoff and jitter; a write that makes something new (a
// pull request, a comment, a Gitea label) goes through API.Create, which
// looks for what an unanswered attempt may have made before posting
// again. go-github never sees a rate-limit header the budget acted on.
//
// Forges that speak GitHub's REST API with differences (Gitea) reuse the
// Forge through a Dialect: its name, auth scheme, page-size parameter,
// how to list pull requests by head, review state names, draft marking,
// labels, team membership and the merged pull request of a commit.
//
// github imports go-github, the forge and git packages and the standard
// library; it must not import other adapters, agent, sandbox or Temporal.
package github
