package github

import (
	"net/url"
	"strings"
	"testing"
)

func TestParseRepository(t *testing.T) {
	mustURL := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	github := webRoot(mustURL("https://api.github.com/"))
	gitea := webRoot(mustURL("http://127.0.0.1:3000/git/api/v1/"))
	tests := []struct {
		name    string
		web     *url.URL
		raw     string
		want    string
		wantErr string
	}{
		{"https", github, "https://github.com/acme/svc", "acme/svc", ""},
		{"https with .git", github, "https://github.com/acme/svc.git", "acme/svc", ""},
		{"https with trailing slash", github, "https://github.com/acme/svc/", "acme/svc", ""},
		{"https default port", github, "https://GitHub.com:443/acme/svc.git", "acme/svc", ""},
		{"ssh", github, "ssh://git@github.com/acme/svc.git", "acme/svc", ""},
		{"ssh with port", github, "ssh://git@github.com:22/acme/svc.git", "acme/svc", ""},
		{"scp-like", github, "git@github.com:acme/svc.git", "acme/svc", ""},
		{"gitea under a path", gitea, "http://127.0.0.1:3000/git/acme/svc.git", "acme/svc", ""},
		{"gitea ssh", gitea, "git@127.0.0.1:acme/svc.git", "acme/svc", ""},
		{"another host", github, "https://gitlab.com/acme/svc.git", "", "is not on github.com"},
		{"another port", gitea, "http://127.0.0.1:3001/git/acme/svc.git", "", "is not on 127.0.0.1:3000"},
		{"outside the path", gitea, "http://127.0.0.1:3000/acme/svc.git", "", "is not on"},
		{"scp-like on another host", github, "git@gitlab.com:acme/svc.git", "", "is not on"},
		{"local path", github, "/srv/git/acme/svc.git", "", "is not on"},
		{"file URL", github, "file:///srv/git/acme/svc.git", "", "is not on"},
		{"credentials in the URL", github, "https://x:secret@github.com/acme/svc.git", "", "carries credentials"},
		{"not a repository", github, "https://github.com/acme/svc/pull/1", "", "does not name owner/repository"},
		{"owner only", github, "https://github.com/acme", "", "does not name owner/repository"},
		{"dot dot", github, "https://github.com/acme/../svc", "", ".."},
		{"query", github, "https://github.com/acme/svc?tab=1", "", "query"},
		{"odd name", github, "https://github.com/acme/s%20vc", "", "invalid repository name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRepository(tt.web, tt.raw)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("parseRepository(%q) = %v, %v; want error containing %q", tt.raw, got, err, tt.wantErr)
				}
				if err != nil && strings.Contains(err.Error(), "secret") {
					t.Errorf("error carries the password: %v", err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Errorf("parseRepository(%q) = %v, %v; want %s", tt.raw, got, err, tt.want)
			}
		})
	}
}

func TestWebRoot(t *testing.T) {
	for api, want := range map[string]string{
		"https://api.github.com/":           "https://github.com/",
		"https://ghe.example.com/api/v3/":   "https://ghe.example.com/",
		"https://gitea.example.com/api/v1/": "https://gitea.example.com/",
		"http://127.0.0.1:3000/sub/api/v1/": "http://127.0.0.1:3000/sub/",
	} {
		u, err := url.Parse(api)
		if err != nil {
			t.Fatal(err)
		}
		if got := webRoot(u).String(); got != want {
			t.Errorf("webRoot(%s) = %s, want %s", api, got, want)
		}
	}
}

// The forge's token goes from git only to the web origin of the GitHub the
// operator named.
func TestWebOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"":                                    "https://github.com",
		"https://api.github.com/":             "https://github.com",
		"https://ghe.example.com/api/v3/":     "https://ghe.example.com",
		"http://127.0.0.1:3000/api/v1/":       "http://127.0.0.1:3000",
		"https://GHE.example.com:8443/api/v3": "https://ghe.example.com:8443",
	} {
		if got, err := WebOrigin(in); err != nil || got != want {
			t.Errorf("WebOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
