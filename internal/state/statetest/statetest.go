package statetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/state"
)

// Example returns a campaign with every field set, so that a round trip
// through a store shows any field it loses.
func Example(id string) state.Campaign {
	since := time.Date(2026, 5, 4, 10, 30, 0, 0, time.UTC)
	return state.Campaign{
		ID:             id,
		Kind:           state.KindCampaign,
		File:           "campaigns/" + id + ".yaml",
		SpecDigest:     "sha256:" + fmt.Sprintf("%064x", len(id)),
		Spec:           json.RawMessage(`{"id":"` + id + `","kind":"Campaign","template":{"execution":{"agentic":{"prompt":"migrate"}}},"repositories":[{"name":"payments"},{"name":"ledger"}]}`),
		SourceRevision: "4c86450a7d1f0e2b9c3a5d6e7f8091a2b3c4d5e6",
		Generation:     3,
		WorkflowID:     "campaign/" + id,
		RunID:          "0196a0c4-7b1e-7c3a-9d2e-5f6a7b8c9d0e",
		Phase:          state.PhaseAwaitingApproval,
		Message:        "pull request budget: next start in 12m0s",
		Prune:          true,
		Suspended:      true,
		Repos: []state.Repo{
			{Name: "ledger", Status: state.RepoPending},
			{Name: "payments", Status: state.RepoAwaitingApproval, Branch: "auto/slog-payments",
				PullRequestURL: "https://github.com/acme/payments/pull/7", PullRequestState: state.PullRequestOpen},
		},
		PendingApprovals: []state.PendingApproval{
			{Target: id + "/payments", ResultDigest: "sha256:" + fmt.Sprintf("%064x", 7), Since: since},
		},
		Reports: []state.Report{
			{Unit: "ledger", Repository: "ledger", Target: "users-api", Status: state.ReportInvalid,
				Frontmatter: json.RawMessage(`{"score":11}`), Raw: "---\nscore: 11\n---\n", Error: "frontmatter does not match output.schema",
				ErrorKind: "schema_invalid", ValidationErrors: []string{"/score: maximum: got 11, want 10"}, Warning: "look"},
			{Unit: "payments", Repository: "payments", Status: state.ReportValid, Frontmatter: json.RawMessage(`{"score":8}`), Body: "# Audit"},
		},
	}
}

// Equal reports whether two recorded campaigns mean the same: Spec is
// compared as JSON, times as instants, and empty slices equal nil ones.
func Equal(a, b state.Campaign) bool {
	return reflect.DeepEqual(normal(a), normal(b))
}

func normal(c state.Campaign) state.Campaign {
	c = c.Clone()
	if len(c.Spec) > 0 {
		var buf bytes.Buffer
		if json.Compact(&buf, c.Spec) == nil {
			c.Spec = buf.Bytes()
		}
	} else {
		c.Spec = nil
	}
	if len(c.Repos) == 0 {
		c.Repos = nil
	}
	if len(c.PendingApprovals) == 0 {
		c.PendingApprovals = nil
	}
	if len(c.Reports) == 0 {
		c.Reports = nil
	}
	for i := range c.Reports {
		if fm := c.Reports[i].Frontmatter; len(fm) > 0 {
			var buf bytes.Buffer
			if json.Compact(&buf, fm) == nil {
				c.Reports[i].Frontmatter = buf.Bytes()
			}
		}
	}
	for i := range c.PendingApprovals {
		c.PendingApprovals[i].Since = c.PendingApprovals[i].Since.UTC().Round(0)
	}
	return c
}

// RunReader runs the read half of the suite. newReader returns a fresh
// reader holding exactly seed.
func RunReader(t *testing.T, newReader func(t *testing.T, seed []state.Campaign) state.Reader) {
	ctx := context.Background()

	t.Run("empty state lists nothing", func(t *testing.T) {
		r := newReader(t, nil)
		got, err := r.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(got) != 0 {
			t.Errorf("List = %d campaigns, want none", len(got))
		}
	})

	t.Run("get unknown id is ErrNotFound", func(t *testing.T) {
		r := newReader(t, []state.Campaign{Example("slog")})
		_, err := r.Get(ctx, "nope")
		if !errors.Is(err, state.ErrNotFound) {
			t.Errorf("Get(nope) error = %v, want ErrNotFound", err)
		}
	})

	t.Run("get returns every field", func(t *testing.T) {
		want := Example("slog")
		r := newReader(t, []state.Campaign{want, Example("other")})
		got, err := r.Get(ctx, "slog")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if !Equal(got, want) {
			t.Errorf("Get(slog) =\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("list is sorted by id", func(t *testing.T) {
		seed := []state.Campaign{Example("c"), Example("a"), Example("b")}
		r := newReader(t, seed)
		got, err := r.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if ids := ids(got); !slices.Equal(ids, []string{"a", "b", "c"}) {
			t.Fatalf("List ids = %v, want [a b c]", ids)
		}
		for _, c := range got {
			if !Equal(c, Example(c.ID)) {
				t.Errorf("List: %s =\n%+v\nwant\n%+v", c.ID, c, Example(c.ID))
			}
		}
	})

	t.Run("cancelled context is an error", func(t *testing.T) {
		r := newReader(t, []state.Campaign{Example("slog")})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := r.List(cctx); err == nil {
			t.Error("List with a cancelled context: want an error")
		}
		if _, err := r.Get(cctx, "slog"); err == nil {
			t.Error("Get with a cancelled context: want an error")
		}
	})
}

// Run runs the whole suite against stores that read and write. newStore
// returns a fresh, empty store.
func Run(t *testing.T, newStore func(t *testing.T) state.Store) {
	ctx := context.Background()

	t.Run("reader", func(t *testing.T) {
		RunReader(t, func(t *testing.T, seed []state.Campaign) state.Reader {
			s := newStore(t)
			for _, c := range seed {
				if err := s.Put(ctx, c); err != nil {
					t.Fatalf("Put(%s): %v", c.ID, err)
				}
			}
			return s
		})
	})

	t.Run("put replaces", func(t *testing.T) {
		s := newStore(t)
		first := Example("slog")
		mustPut(t, s, first)
		second := Example("slog")
		second.Generation = 4
		second.SpecDigest = "sha256:" + fmt.Sprintf("%064x", 99)
		second.Phase = state.PhaseRunning
		second.PendingApprovals = nil
		mustPut(t, s, second)
		got := mustGet(t, s, "slog")
		if !Equal(got, second) {
			t.Errorf("after the second Put, Get =\n%+v\nwant\n%+v", got, second)
		}
		list, err := s.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(list) != 1 {
			t.Errorf("List = %d campaigns, want 1", len(list))
		}
	})

	t.Run("put is idempotent", func(t *testing.T) {
		s := newStore(t)
		c := Example("slog")
		mustPut(t, s, c)
		mustPut(t, s, c)
		if got := mustGet(t, s, "slog"); !Equal(got, c) {
			t.Errorf("Get =\n%+v\nwant\n%+v", got, c)
		}
	})

	t.Run("delete removes", func(t *testing.T) {
		s := newStore(t)
		mustPut(t, s, Example("a"))
		mustPut(t, s, Example("b"))
		if err := s.Delete(ctx, "a"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := s.Get(ctx, "a"); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("Get after Delete: error = %v, want ErrNotFound", err)
		}
		list, err := s.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if !slices.Equal(ids(list), []string{"b"}) {
			t.Errorf("List ids = %v, want [b]", ids(list))
		}
	})

	t.Run("delete of an unknown id is not an error", func(t *testing.T) {
		s := newStore(t)
		if err := s.Delete(ctx, "nope"); err != nil {
			t.Errorf("Delete(nope) = %v, want nil", err)
		}
	})

	t.Run("put refuses an invalid campaign", func(t *testing.T) {
		s := newStore(t)
		mustPut(t, s, Example("ok"))
		bad := map[string]state.Campaign{
			"no id":        {Kind: state.KindCampaign},
			"unknown kind": {ID: "x", Kind: "Config"},
			"spec not json": func() state.Campaign {
				c := Example("x")
				c.Spec = json.RawMessage(`{"id":`)
				return c
			}(),
		}
		for name, c := range bad {
			if err := s.Put(ctx, c); err == nil {
				t.Errorf("Put(%s): want an error", name)
			}
		}
		list, err := s.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if !slices.Equal(ids(list), []string{"ok"}) {
			t.Errorf("after refused puts, List ids = %v, want [ok]", ids(list))
		}
	})

	t.Run("values are copies", func(t *testing.T) {
		s := newStore(t)
		c := Example("slog")
		mustPut(t, s, c)
		// Changing what was put, or what was read, changes nothing stored.
		c.Repos[0].Status = state.RepoFailed
		c.Spec[0] = '['
		c.PendingApprovals[0].ResultDigest = "changed"
		got := mustGet(t, s, "slog")
		got.Repos[0].Status = state.RepoFailed
		got.Spec[0] = '['
		got.PendingApprovals[0].ResultDigest = "changed"
		list, err := s.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		list[0].Repos[1].Branch = "changed"
		if again := mustGet(t, s, "slog"); !Equal(again, Example("slog")) {
			t.Errorf("stored state changed through a caller's copy:\n%+v", again)
		}
	})

	t.Run("concurrent puts all land", func(t *testing.T) {
		s := newStore(t)
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 10 {
					errs <- s.Put(ctx, Example(fmt.Sprintf("c-%d-%d", w, i)))
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
		}
		list, err := s.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(list) != 40 {
			t.Errorf("List = %d campaigns, want 40", len(list))
		}
	})

	t.Run("cancelled context writes nothing", func(t *testing.T) {
		s := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Put(cctx, Example("slog")); err == nil {
			t.Error("Put with a cancelled context: want an error")
		}
		if _, err := s.Get(ctx, "slog"); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("after a cancelled Put, Get error = %v, want ErrNotFound", err)
		}
		mustPut(t, s, Example("slog"))
		if err := s.Delete(cctx, "slog"); err == nil {
			t.Error("Delete with a cancelled context: want an error")
		}
		mustGet(t, s, "slog")
	})
}

func mustPut(t *testing.T, s state.Writer, c state.Campaign) {
	t.Helper()
	if err := s.Put(context.Background(), c); err != nil {
		t.Fatalf("Put(%s): %v", c.ID, err)
	}
}

func mustGet(t *testing.T, s state.Reader, id string) state.Campaign {
	t.Helper()
	c, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return c
}

func ids(cs []state.Campaign) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}
