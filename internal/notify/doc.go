// Package notify tells people that a campaign needs them or ended: the
// messages a campaigns repository's notifications section subscribes to
// (fleetlift.yaml), and their delivery to the services an operator
// configures.
//
// The two halves are owned by different people, as in Argo CD's
// notifications: a campaigns repository says which events go to which
// service, by name, and in which words (Templates); the operator says what
// a service name is (Service: a Slack incoming webhook, or a generic
// webhook signed with HMAC-SHA256) and holds its secrets in the worker's
// environment. Nothing in a campaigns repository chooses where a secret
// goes, and no secret is in a Message: a Message is what a workflow
// carries, and its history keeps it.
//
// Templates are Go text/template texts limited to what a one-line message
// needs (fields, if, with, else and the standard functions): range,
// define, block and template are refused when the config loads, so a
// template's cost is bounded by its length.
//
// Delivery (Send) is one HTTP request; the caller retries. Send says which
// failures are worth retrying (Retryable) and how long a 429 or 503 asked
// to wait (RetryAfter).
//
// notify imports only the standard library and redact.
package notify
