package agent

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/git"
)

// TestRedactKeepsWhatIsNotACredential: what the agent writes out loses
// URL credentials and secret values, and keeps the rest of every URL.
func TestRedactKeepsWhatIsNotACredential(t *testing.T) {
	const token = "ghp_0123456789abcdef"
	r := &runner{secrets: secretValues([]string{
		"FLEETLIFT_GIT_TOKEN=" + token,
		"FLEETLIFT_GIT_TOKEN_ORIGINS=https://github.com,https://git.example.com:8443",
		"DEPLOY_TOKEN_URL=https://hooks.example.com/services/T0/B0/secretpath",
	}, &git.Git{})}
	for _, tc := range []struct{ name, in, want string }{
		{"no change", "clone https://github.com/acme/service-a.git: exit status 128", "clone https://github.com/acme/service-a.git: exit status 128"},
		{"user-info", "clone https://x-access-token:" + token + "@github.com/acme/service-a.git: 403", "clone https://REDACTED@github.com/acme/service-a.git: 403"},
		{"token in the query", "fetch https://git.example.com:8443/acme/a.git?private_token=" + token, "fetch https://git.example.com:8443/acme/a.git?private_token=REDACTED"},
		{"token in plain text", "auth failed for token " + token + ".", "auth failed for token REDACTED."},
		{"a secret that is a URL", "posted to https://hooks.example.com/services/T0/B0/secretpath", "posted to REDACTED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.redact(tc.in); got != tc.want {
				t.Errorf("redact(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}
