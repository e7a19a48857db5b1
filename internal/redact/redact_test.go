package redact_test

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/redact"
)

// URLs hides the credentials of URLs in messages, and nothing else.
func TestRedact(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no change", "fatal: repository not found", "fatal: repository not found"},
		{"token in https URL", "could not read from https://x-access-token:ghp_secret@github.com/o/r.git: 403",
			"could not read from https://REDACTED@github.com/o/r.git: 403"},
		{"user only", "ssh://git@host/r.git", "ssh://REDACTED@host/r.git"},
		{"two URLs", "https://a:b@h1/x and http://c@h2/y", "https://REDACTED@h1/x and http://REDACTED@h2/y"},
		{"email is not a URL", "commit by dev@example.com", "commit by dev@example.com"},
		{"at sign in path", "https://host/a@b", "https://host/a@b"},
		{"no user-info", "clone https://github.com/acme/service-a.git: 404", "clone https://github.com/acme/service-a.git: 404"},
		{"token in the query", "clone https://git.example.com/acme/a.git?access_token=glpat-secret&ref=main: 403",
			"clone https://git.example.com/acme/a.git?access_token=REDACTED&ref=main: 403"},
		{"signature in the query", "get https://s3.example.com/b/o?X-Amz-Signature=abc123#f", "get https://s3.example.com/b/o?X-Amz-Signature=REDACTED#f"},
		{"ordinary query", "https://host/x?ref=main&page=2", "https://host/x?ref=main&page=2"},
		{"user-info and query", "'https://u:p@h/x?token=t'", "'https://REDACTED@h/x?token=REDACTED'"},
		{"quoted in a definition's error", `repositories.0.url: "HTTPS://tok@git.example.com/a.git" is not allowed`,
			`repositories.0.url: "HTTPS://REDACTED@git.example.com/a.git" is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redact.URLs(tt.in); got != tt.want {
				t.Errorf("URLs(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
