package source_test

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/source"
)

// TestLocalDir: a campaigns repository given as a path or file:// URL is
// a directory the reconciler can watch; one reached over a network, as
// git reads it (a scheme, or a colon before the first slash), is not.
func TestLocalDir(t *testing.T) {
	for _, c := range []struct{ repo, want string }{
		{"/srv/campaigns", "/srv/campaigns"},
		{"campaigns", "campaigns"},
		{"./my:campaigns", "./my:campaigns"},
		{"file:///srv/campaigns", "/srv/campaigns"},
		{"https://git.example.com/acme/campaigns.git", ""},
		{"ssh://git@git.example.com/acme/campaigns.git", ""},
		{"git@git.example.com:acme/campaigns.git", ""},
		{"git.example.com:acme/campaigns.git", ""},
	} {
		if got := source.LocalDir(c.repo); got != c.want {
			t.Errorf("LocalDir(%q) = %q, want %q", c.repo, got, c.want)
		}
	}
}
