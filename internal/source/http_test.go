package source_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/source"
)

// TestHTTP reads through git http-backend on 127.0.0.1 and checks, in the
// server's request log, that a fetch (POST git-upload-pack) happens only
// when ls-remote (GET info/refs) shows a new SHA for the ref.
func TestHTTP(t *testing.T) {
	root := t.TempDir()
	bare := gittest.NewRemote(t, root, "campaigns", map[string]string{"campaigns/a.yaml": "a: 1\n"})
	push(t, bare, "feature", "main", map[string]string{"campaigns/f.yaml": "f: 1\n"})
	srv := serveGit(t, root, "")
	r := open(t, srv.URL+"/campaigns.git")
	first := resolve(t, r, "main")
	srv.requests()

	var next, rewritten string
	steps := []struct {
		name    string
		change  func()
		ref     string
		want    func() string
		file    string
		content string
		fetches int
	}{
		{"no change", nil, "main", func() string { return first }, "campaigns/a.yaml", "a: 1\n", 0},
		{"other branch, already mirrored", nil, "feature", nil, "campaigns/f.yaml", "f: 1\n", 0},
		{"new commit", func() { next = push(t, bare, "main", "main", map[string]string{"campaigns/a.yaml": "a: 2\n"}) },
			"main", func() string { return next }, "campaigns/a.yaml", "a: 2\n", 1},
		{"no change after the fetch", nil, "main", func() string { return next }, "campaigns/a.yaml", "a: 2\n", 0},
		{"force-pushed", func() { rewritten = rewrite(t, bare, "main", map[string]string{"campaigns/a.yaml": "a: 3\n"}) },
			"main", func() string { return rewritten }, "campaigns/a.yaml", "a: 3\n", 1},
		{"HEAD unchanged", nil, "HEAD", func() string { return rewritten }, "campaigns/a.yaml", "a: 3\n", 0},
		{"HEAD moved to another branch", func() { gittest.Run(t, bare, "symbolic-ref", "HEAD", "refs/heads/feature") },
			"HEAD", nil, "campaigns/f.yaml", "f: 1\n", 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.change != nil {
				s.change()
			}
			before := r.Stats()
			got := resolve(t, r, s.ref)
			if s.want != nil && got != s.want() {
				t.Errorf("Resolve(%s) = %s, want %s", s.ref, got, s.want())
			}
			reqs := srv.requests()
			t.Logf("requests: %v", reqs)
			if n := count(reqs, "/info/refs"); n < 1 {
				t.Errorf("no ls-remote: %v", reqs)
			}
			if n := count(reqs, "POST /campaigns.git/git-upload-pack"); n != s.fetches {
				t.Errorf("%d fetches, want %d: %v", n, s.fetches, reqs)
			}
			if d := r.Stats().Fetches - before.Fetches; d != int64(s.fetches) {
				t.Errorf("Stats counted %d fetches, want %d", d, s.fetches)
			}
			if c := read(t, r, got, "", s.file); c != s.content {
				t.Errorf("%s = %q, want %q", s.file, c, s.content)
			}
			if reqs := srv.requests(); len(reqs) != 0 {
				t.Errorf("FS talked to the remote: %v", reqs)
			}
		})
	}
	// The cache follows the remote's HEAD.
	if got := read(t, r, "HEAD", "", "campaigns/f.yaml"); got != "f: 1\n" {
		t.Errorf("FS(HEAD): campaigns/f.yaml = %q; the cache's HEAD does not follow the remote's", got)
	}
}

// TestHTTPToken: the token comes from the variable TokenEnv names, is
// sent as basic auth, and never appears in errors.
func TestHTTPToken(t *testing.T) {
	const env = "FLEETLIFT_SOURCE_TEST_TOKEN"
	const token = "tok_source_0123456789"
	const wrong = "tok_wrong_0123456789"
	root := t.TempDir()
	gittest.NewRemote(t, root, "campaigns", map[string]string{"a.yaml": "a: 1\n"})
	srv := serveGit(t, root, token)

	tests := []struct {
		name    string
		value   string
		wantErr string
	}{
		{"right token", token, ""},
		{"no token", "", "check the token in $" + env},
		{"wrong token", wrong, "check the token in $" + env},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(env, tt.value)
			r, err := source.Open(context.Background(), source.Options{URL: srv.URL + "/campaigns.git", CacheDir: t.TempDir(), TokenEnv: env})
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Resolve(context.Background(), "main")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, source.ErrUnreachable) {
				t.Fatalf("Resolve: %v, want an ErrUnreachable containing %q", err, tt.wantErr)
			}
			for _, secret := range []string{token, wrong} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error leaks a token: %v", err)
				}
			}
		})
	}
}
