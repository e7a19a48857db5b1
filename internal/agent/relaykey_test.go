package agent

import (
	"net/http"
	"testing"
)

// The relay puts the sandbox's current key wherever a request carries a
// key to the gateway, and leaves the rest of the request alone.
func TestWithKey(t *testing.T) {
	basic := func(user, pass string) string {
		r := &http.Request{Header: http.Header{}}
		r.SetBasicAuth(user, pass)
		return r.Header.Get("Authorization")
	}
	for _, c := range []struct {
		name            string
		in              http.Header
		auth, xAPIKey   string
		otherHeaderKept bool
	}{
		{"messages API", http.Header{"X-Api-Key": {"old"}, "Anthropic-Version": {"2023-06-01"}}, "", "new", true},
		{"OpenAI API", http.Header{"Authorization": {"Bearer old"}}, "Bearer new", "", false},
		{"git", http.Header{"Authorization": {basic("x", "old")}}, basic("x", "new"), "", false},
		{"no key", http.Header{}, "", "new", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			withKey(c.in, "new")
			if got := c.in.Get("Authorization"); got != c.auth {
				t.Errorf("Authorization %q, want %q", got, c.auth)
			}
			if got := c.in.Get("X-Api-Key"); got != c.xAPIKey {
				t.Errorf("X-Api-Key %q, want %q", got, c.xAPIKey)
			}
			if c.otherHeaderKept && c.in.Get("Anthropic-Version") != "2023-06-01" {
				t.Errorf("other headers changed: %v", c.in)
			}
		})
	}
}
