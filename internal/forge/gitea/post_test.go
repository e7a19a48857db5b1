package gitea_test

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// TestForgePostNotRetriedBlindly: Gitea lets a repository have two labels
// of one name, so a label the forge made before its answer was lost (a
// proxy's 502) is found and used, not made again; a pull request opened
// so is found too.
func TestForgePostNotRetriedBlindly(t *testing.T) {
	tests := []struct {
		name string
		path string
	}{
		{"a label made before the forge answered 502 is made once", "/repos/acme/svc/labels"},
		{"a pull request opened before the forge answered 502 is opened once", pulls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.fake.labels = []fakeLabel{{ID: 3, Name: "automated", Color: "#00aabb"}, {ID: 4, Name: "deps", Color: "#ee0701"}}
			var lost atomic.Bool
			fx.fake.LoseAnswer = func(r *http.Request) int {
				if r.Method == "POST" && r.URL.Path == tt.path && lost.CompareAndSwap(false, true) {
					return http.StatusBadGateway
				}
				return 0
			}
			fx.change(t, "package main // slog\n")
			pr, err := fx.f.CreatePullRequest(fx.ctx, fx.request())
			if err != nil {
				t.Fatal(err)
			}
			if n := fx.fake.Count("POST", tt.path); n != 1 {
				t.Errorf("%d POST %s, want 1", n, tt.path)
			}
			fx.fake.Mu.Lock()
			defer fx.fake.Mu.Unlock()
			var made []fakeLabel
			for _, l := range fx.fake.labels {
				if l.Name == "slog" {
					made = append(made, l)
				}
			}
			if len(made) != 1 || len(fx.fake.Pulls) != 1 {
				t.Fatalf("labels named slog: %v; pull requests: %d; want one of each", made, len(fx.fake.Pulls))
			}
			if p := fx.fake.Pulls[0]; p.Number != pr.Number || len(p.LabelIDs) != 3 || p.LabelIDs[2] != made[0].ID {
				t.Errorf("pull request #%d has labels %v, want 3, 4 and %d", p.Number, p.LabelIDs, made[0].ID)
			}
		})
	}
}
