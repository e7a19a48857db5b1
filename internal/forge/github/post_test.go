package github_test

import (
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge"
)

// loseFirstAnswer makes the fake serve the first request with method and
// path and then answer it with status, as a proxy that gave up waiting
// does: the forge acted, the forge client never hears of it.
func loseFirstAnswer(fx *fixture, method, path string, status int) {
	var lost atomic.Bool
	fx.fake.LoseAnswer = func(r *http.Request) int {
		if r.Method == method && r.URL.Path == path && lost.CompareAndSwap(false, true) {
			return status
		}
		return 0
	}
}

// failFirst makes the fake refuse the first request with method and path
// with status, without acting on it.
func failFirst(fx *fixture, method, path string, status int) {
	var failed atomic.Bool
	fx.fake.Before = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == method && r.URL.Path == path && failed.CompareAndSwap(false, true) {
			http.Error(w, http.StatusText(status), status)
			return true
		}
		return false
	}
}

// TestForgePostNotRetriedBlindly: a write that makes something new (a
// pull request, a comment) is sent again after a server error only when
// looking shows that the forge did not make it: a retried activity or
// plan never leaves two comments or two pull requests. Writes that change
// nothing when repeated are still retried.
func TestForgePostNotRetriedBlindly(t *testing.T) {
	const marker = "<!-- fleetlift:plan -->"
	const comments = "/repos/acme/svc/issues/1/comments"
	body := marker + "\nplan: 1 to start"
	commentBodies := func(fx *fixture) []string {
		fx.fake.Mu.Lock()
		defer fx.fake.Mu.Unlock()
		var out []string
		for _, c := range fx.fake.Comments[1] {
			out = append(out, c.Body)
		}
		return out
	}
	tests := []struct {
		name string
		run  func(t *testing.T, fx *fixture)
	}{
		{"a comment made before the forge answered 502 is made once", func(t *testing.T, fx *fixture) {
			fx.fake.AddPull(&fakePull{Head: branch, Base: "main"})
			loseFirstAnswer(fx, "POST", comments, http.StatusBadGateway)
			if err := fx.f.UpsertComment(fx.ctx, fx.url, 1, marker, body); err != nil {
				t.Fatal(err)
			}
			if got := commentBodies(fx); !slices.Equal(got, []string{body}) {
				t.Errorf("comments = %q, want one", got)
			}
			if n := fx.fake.Count("POST", comments); n != 1 {
				t.Errorf("%d comments posted, want 1", n)
			}
		}},
		{"a comment the forge did not make is posted again after looking", func(t *testing.T, fx *fixture) {
			fx.fake.AddPull(&fakePull{Head: branch, Base: "main"})
			failFirst(fx, "POST", comments, http.StatusInternalServerError)
			if err := fx.f.UpsertComment(fx.ctx, fx.url, 1, marker, body); err != nil {
				t.Fatal(err)
			}
			if got := commentBodies(fx); !slices.Equal(got, []string{body}) {
				t.Errorf("comments = %q, want one", got)
			}
			if n := fx.fake.Count("POST", comments); n != 2 {
				t.Errorf("%d comments posted, want 2", n)
			}
		}},
		{"a pull request opened before the forge answered 504 is opened once", func(t *testing.T, fx *fixture) {
			fx.change(t, "package main // slog\n")
			loseFirstAnswer(fx, "POST", pulls, http.StatusGatewayTimeout)
			pr := fx.open(t, fx.request())
			if pr.Number != 1 || pr.State != forge.StateOpen {
				t.Errorf("pull request = %+v", pr)
			}
			if n := fx.fake.Count("POST", pulls); n != 1 {
				t.Errorf("%d pull requests posted, want 1", n)
			}
			if n := len(fx.fake.Pulls); n != 1 {
				t.Errorf("%d pull requests, want 1", n)
			}
			// What follows the opening still happens.
			if got := fx.fake.Pulls[0].Labels; !slices.Equal(got, []string{"automated", "deps"}) {
				t.Errorf("labels = %q", got)
			}
		}},
		{"an edit whose answer was lost is sent again", func(t *testing.T, fx *fixture) {
			fx.fake.AddPull(&fakePull{Head: branch, Base: "main"})
			old := fx.fake.AddComment(1, marker+"\nplan: old")
			edit := "/repos/acme/svc/issues/comments/" + strconv.FormatInt(old.ID, 10)
			loseFirstAnswer(fx, "PATCH", edit, http.StatusBadGateway)
			if err := fx.f.UpsertComment(fx.ctx, fx.url, 1, marker, body); err != nil {
				t.Fatal(err)
			}
			if got := commentBodies(fx); !slices.Equal(got, []string{body}) {
				t.Errorf("comments = %q", got)
			}
			if n := fx.fake.Count("PATCH", edit); n != 2 {
				t.Errorf("%d edits, want 2", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newFixture(t)) })
	}
}
