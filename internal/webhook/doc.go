// Package webhook receives GitHub and Gitea webhooks (push, pull_request
// and pull request reviews) and turns them into hints. A hint only makes
// the reconciler read Git sooner: the loop is level-based, so a lost,
// refused or repeated hint costs at most a poll interval, and nothing in a
// hint is trusted as state.
//
// # Checks
//
// A Handler answers POST only (405 otherwise). From the headers alone it
// refuses a request with no event or delivery id (400), no or a malformed
// signature (401), an unsupported content type (415) or a declared length
// over the cap (413). It then reads the body through http.MaxBytesReader,
// so a longer body is cut off at the cap (413), and checks the
// HMAC-SHA256 of the raw body against the secret with hmac.Equal (401)
// before anything in it is parsed. GitHub signs in X-Hub-Signature-256
// ("sha256=<hex>"); Gitea in X-Gitea-Signature ("<hex>") and also
// X-Hub-Signature-256: at least one must be present and every one present
// must be right.
//
// Verified bodies are parsed with encoding/json for the few fields a hint
// carries (400 if malformed). GitHub may send application/json or
// application/x-www-form-urlencoded (JSON in the payload field; GitHub
// signs the form as sent). Gitea signs the JSON inside its form rather than
// the form, so for Gitea only application/json is accepted (415 with a
// message saying so).
//
// # Events
//
// The source is Gitea when X-Gitea-Event or X-Gitea-Delivery is present
// (Gitea and Forgejo also send GitHub's headers), GitHub otherwise. Pushes
// give Push hints; pull request changes give PullRequest hints; reviews
// and review comments (GitHub's pull_request_review*, Gitea's
// pull_request_review_approved, _rejected and _comment) give Review hints;
// commit statuses and checks (GitHub's status, check_run and check_suite,
// Gitea's status) give Status hints, for followed repositories only.
// GitHub's ping answers 200 "pong", or 404 when it names a repository that
// is not watched, so a misconfigured hook shows up when it is created.
// Other events answer 202 "event ignored".
//
// # Repositories
//
// An event for a repository not in Options.Repos answers 404 "repository
// not watched" and gives no hint. A 404 rather than a 2xx makes the
// misconfiguration visible in the forge's delivery log; an organization
// hook should be narrowed to the watched repositories.
//
// With Options.Followed, events for the repositories it names (the
// target repositories of campaigns, with open pull requests) are hints
// too, with Event.Followed set; an event for a repository neither watched
// nor followed then answers 202 "no pull request followed in this
// repository", since which repositories are followed changes with the
// campaigns, and an organization hook reaches them all.
//
// # Replays
//
// Every delivery that gave a hint is remembered by its id
// (X-GitHub-Delivery, X-Gitea-Delivery) and by the SHA-256 of its body, up
// to ReplayEntries deliveries for up to ReplayWindow, and a delivery with
// a remembered id or body answers 200 "duplicate delivery, ignored" with
// no hint. The signature covers the body alone: a body sent again under a
// new id is a replay all the same. Ids are remembered only
// after the signature has been checked and the event accepted, so a forged
// or refused request cannot use up an id. The ids live in memory: a
// restarted receiver accepts a replay once more, which costs one extra
// read of Git.
//
// Responses are short plain text and never repeat the body or the secret.
// Hint is called on the request's goroutine and must not block.
//
// # Serving
//
// Listen serves a Handler at /webhook, and "ok" at /healthz for probes,
// with the request's headers due within 10s and the whole of it within
// 30s; Server.Close lets requests in flight finish for up to 5s.
//
// webhook imports only the standard library. It must not import source,
// reconcile, forge or any SDK: cmd/ wires a Handler's hints to the loop.
package webhook
