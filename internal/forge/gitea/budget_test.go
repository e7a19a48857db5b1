package gitea_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/gitea"
	"github.com/fleetlift/fleetlift/internal/forge/github"
)

// A Gitea account's budget does not space writes as GitHub's must (a
// second apart): a worker opening fifty pull requests on Gitea waits for
// none of them, where GitHub's budget holds each write back.
func TestGiteaWritesAreNotSpaced(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   github.BudgetOptions
		spaced bool
	}{{"gitea", gitea.BudgetOptions(), false}, {"github", github.BudgetOptions{}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var waits atomic.Int64
			o := tc.opts
			o.Sleep = func(ctx context.Context, d time.Duration) error {
				waits.Add(1)
				return nil
			}
			tr := github.NewBudget(o).Transport(roundTrip(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
			}))
			for range 20 {
				req, _ := http.NewRequest(http.MethodPost, "http://gitea.invalid/api/v1/repos/o/r/pulls", strings.NewReader("{}"))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			if got := waits.Load() > 0; got != tc.spaced {
				t.Errorf("writes waited %d times; want spaced %v", waits.Load(), tc.spaced)
			}
		})
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
