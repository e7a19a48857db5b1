package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/state"
)

const campaignsRepo = "https://github.com/acme/campaigns.git"

// reviewedConfig writes a fleetlift.yaml on the GitHub forge that
// requires reviewed merges, or not.
func reviewedConfig(require bool) string {
	return fmt.Sprintf("version: 1\nkind: Config\nwatch:\n  branch: main\n  path: campaigns\n  require_reviewed_merge: %t\nforge:\n  type: github\n", require)
}

// fakeMerges is the forge: the pull request each commit was merged from.
type fakeMerges struct {
	mu      sync.Mutex
	prs     map[string]*forge.PullRequest
	reviews map[string][]forge.Review
	err     error
	asked   []string
}

func (f *fakeMerges) MergedPullRequest(_ context.Context, repository, sha string) (*forge.PullRequest, []forge.Review, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if repository != campaignsRepo {
		return nil, nil, fmt.Errorf("asked about %s", repository)
	}
	f.asked = append(f.asked, sha)
	if f.err != nil {
		return nil, nil, f.err
	}
	return f.prs[sha], f.reviews[sha], nil
}

// merged records sha as pull request number by author, whose head was
// head, merged into base.
func (f *fakeMerges) merged(sha string, number int, author, head, base string, reviews ...forge.Review) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.prs == nil {
		f.prs, f.reviews = map[string]*forge.PullRequest{}, map[string][]forge.Review{}
	}
	f.prs[sha] = &forge.PullRequest{Number: number, State: forge.StateMerged, Author: author, HeadSHA: head, Base: base,
		URL: fmt.Sprintf("https://github.com/acme/campaigns/pull/%d", number)}
	f.reviews[sha] = reviews
}

func (f *fakeMerges) takeAsked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.asked
	f.asked = nil
	return a
}

// rv is a review; reviews are submitted a minute apart in id order.
func rv(id int64, user, state, commit string) forge.Review {
	return forge.Review{ID: id, User: user, State: state, CommitID: commit,
		SubmittedAt: time.Date(2026, 3, 1, 12, int(id), 0, 0, time.UTC)}
}

// gated is a harness whose reconciler has a ReviewedMergeGate on hub.
func gated(hub *fakeMerges) *harness {
	h := newHarness()
	h.r.Gate = &reconcile.ReviewedMergeGate{Hub: hub, Repository: campaignsRepo, Branch: "main"}
	return h
}

func TestReviewedMergeGate(t *testing.T) {
	const head = "feedc0de"
	slog := camp{id: "slog"}.yaml()
	cases := []struct {
		name    string
		require bool
		pr      func(f *fakeMerges) // nil: pushed directly
		wantErr string              // "" means launched
	}{
		{name: "off: pushed directly", require: false},
		{name: "off: forge not asked", require: false, pr: func(f *fakeMerges) { f.err = errors.New("must not be asked") }},
		{name: "pushed directly", require: true,
			wantErr: "commit c1 on main did not come from a reviewed pull request: it was pushed directly, not merged from a pull request; nothing is launched"},
		{name: "approved by another user", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "main", rv(1, "bob", forge.ReviewCommented, head), rv(2, "alice", forge.ReviewApproved, head))
		}},
		{name: "approval survives a later comment", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "main", rv(1, "alice", forge.ReviewApproved, head), rv(2, "alice", forge.ReviewCommented, head))
		}},
		{name: "approved again after a dismissal", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "main", rv(1, "alice", forge.ReviewDismissed, "0ld"), rv(2, "Alice", forge.ReviewApproved, head))
		}},
		{name: "self-approved", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "main", rv(1, "Bob", forge.ReviewApproved, head))
		}, wantErr: "commit c1 on main did not come from a reviewed pull request: pull request #7 was merged without an approving review from someone other than its author (Bob: the pull request's author)"},
		{name: "approval dismissed", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "main", rv(1, "alice", forge.ReviewDismissed, head))
		}, wantErr: "pull request #7 was merged without an approving review from someone other than its author (alice: review dismissed)"},
		{name: "only comments", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "main", rv(1, "alice", forge.ReviewCommented, head))
		}, wantErr: "pull request #7 was merged without an approving review from someone other than its author; nothing is launched"},
		{name: "approval of an earlier commit", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "main", rv(1, "alice", forge.ReviewApproved, "0ldc0mm17"))
		}, wantErr: "(alice: approved 0ldc0mm17, not the merged head feedc0de)"},
		{name: "approval withdrawn by a request for changes", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "main", rv(1, "alice", forge.ReviewApproved, head), rv(2, "alice", forge.ReviewChangesRequested, head))
		}, wantErr: "pull request #7 was merged with changes requested by alice"},
		{name: "merged over another reviewer's request for changes", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "main", rv(1, "carol", forge.ReviewChangesRequested, "0ld"), rv(2, "alice", forge.ReviewApproved, head))
		}, wantErr: "pull request #7 was merged with changes requested by carol"},
		{name: "merged into another branch", require: true, pr: func(f *fakeMerges) {
			f.merged("c1", 7, "bob", head, "dev", rv(1, "alice", forge.ReviewApproved, head))
		}, wantErr: "pull request #7 was merged into dev, not main"},
		{name: "forge fails", require: true, pr: func(f *fakeMerges) { f.err = errors.New("502 Bad Gateway") },
			wantErr: "commit c1 on main: find the pull request it was merged from: 502 Bad Gateway; nothing is launched"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hub := &fakeMerges{}
			if c.pr != nil {
				c.pr(hub)
			}
			h := gated(hub)
			h.src.push(revision(t, "c1", files{"fleetlift.yaml": reviewedConfig(c.require), "campaigns/slog.yaml": slog}))
			res, err := h.r.Once(context.Background())
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("Once: %v", err)
				}
				h.wantCalls(t, "pass", "start slog gen=1 rev=c1")
				if res.Revision != "c1" {
					t.Errorf("revision %s, want c1", res.Revision)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Once() error = %v\nwant one containing %q", err, c.wantErr)
			}
			if refused := !strings.Contains(c.name, "forge fails"); errors.Is(err, reconcile.ErrNotReviewed) != refused {
				t.Errorf("errors.Is(%v, ErrNotReviewed) = %t, want %t", err, !refused, refused)
			}
			h.wantCalls(t, "refused pass")
			if n := len(h.mirror.writes()); n != 0 {
				t.Errorf("mirror written %d times, want none", n)
			}
		})
	}
}

// TestReviewedMergeGateHoldsApprovals: an approval record committed
// straight to the branch decides nothing while reviewed merges are
// required; the same record merged through a reviewed pull request does.
func TestReviewedMergeGateHoldsApprovals(t *testing.T) {
	const digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	hub := &fakeMerges{}
	h := gated(hub)
	fs := files{"fleetlift.yaml": reviewedConfig(true), "campaigns/slog.yaml": camp{id: "slog"}.yaml()}
	record := approval.Record{File: "approvals/payments.yaml", Target: "slog/payments", ResultDigest: digest, By: "alice", Action: approval.Approve}

	direct := revision(t, "c1", fs)
	rec := recorded(t, definition(t, direct, "slog"), "c0", 1, state.PhaseAwaitingApproval)
	rec.PendingApprovals = []state.PendingApproval{{Target: "slog/payments", ResultDigest: digest, WorkflowID: "fleetlift/slog/payments"}}
	h.put(t, rec)
	direct.Desired.Approvals = []approval.Record{record}
	h.src.push(direct)
	if _, err := h.r.Once(context.Background()); !errors.Is(err, reconcile.ErrNotReviewed) {
		t.Fatalf("approval pushed directly: Once() error = %v, want ErrNotReviewed", err)
	}
	h.wantCalls(t, "approval pushed directly")

	reviewed := revision(t, "c2", fs)
	reviewed.Desired.Approvals = []approval.Record{record}
	hub.merged("c2", 8, "alice", "a11ce", "main", rv(1, "bob", forge.ReviewApproved, "a11ce"))
	h.src.push(reviewed)
	h.once(t)
	h.wantCalls(t, "approval merged from a reviewed pull request", "decide approve slog/payments (approvals/payments.yaml)")
}

// TestReviewedMergeGateOverPasses follows the gate's memory: what it let
// through it does not ask about again, what it refused it asks about at
// every pass, and turning the requirement off must itself be reviewed.
func TestReviewedMergeGateOverPasses(t *testing.T) {
	hub := &fakeMerges{}
	h := gated(hub)
	h.recordStarts(t, state.PhaseRunning)
	push := func(sha, config string, prompt string) {
		fs := files{"campaigns/slog.yaml": camp{id: "slog", prompt: prompt}.yaml()}
		if config != "" {
			fs["fleetlift.yaml"] = config
		}
		h.src.push(revision(t, sha, fs))
	}
	pass := func(name string, wantRefused bool, wantAsked []string, wantCalls ...string) {
		t.Helper()
		_, err := h.r.Once(context.Background())
		if errors.Is(err, reconcile.ErrNotReviewed) != wantRefused || (err != nil && !wantRefused) {
			t.Errorf("%s: Once() error = %v; want refused: %t", name, err, wantRefused)
		}
		if got := hub.takeAsked(); !slices.Equal(got, wantAsked) {
			t.Errorf("%s: forge asked about %v, want %v", name, got, wantAsked)
		}
		h.wantCalls(t, name, wantCalls...)
	}
	approve := func(sha string, number int) {
		hub.merged(sha, number, "bob", "h"+sha, "main", rv(1, "alice", forge.ReviewApproved, "h"+sha))
	}

	push("c1", reviewedConfig(true), "")
	pass("merge not linked to its pull request yet", true, []string{"c1"})
	approve("c1", 1)
	pass("linked", false, []string{"c1"}, "start slog gen=1 rev=c1")
	pass("same head", false, nil)

	push("c2", reviewedConfig(false), "Use slog everywhere.")
	pass("requirement removed by a direct push", true, []string{"c2"})
	push("c3", "", "Use slog everywhere.")
	pass("config deleted by a direct push", true, []string{"c3"})
	push("c4", "version: 1\nwatch: {require_reviewed_merge: maybe}\n", "Use slog everywhere.")
	// A config that does not load launches nothing before the gate is
	// even asked.
	if _, err := h.r.Once(context.Background()); !errors.Is(err, reconcile.ErrInvalidConfig) {
		t.Errorf("config broken by a direct push: Once() error = %v, want ErrInvalidConfig", err)
	}
	h.wantCalls(t, "config broken by a direct push")

	push("c5", reviewedConfig(false), "Use slog everywhere.")
	approve("c5", 2)
	pass("requirement removed by a reviewed pull request", false, []string{"c5"}, "update slog gen=1 rev=c5")
	push("c6", reviewedConfig(false), "Use slog, please.")
	pass("off: pushed directly", false, nil, "update slog gen=1 rev=c6")
}

func TestReviewedMergeGateWithoutForge(t *testing.T) {
	h := newHarness()
	h.r.Gate = &reconcile.ReviewedMergeGate{Repository: campaignsRepo, Branch: "main"}
	h.src.push(revision(t, "c1", files{"fleetlift.yaml": reviewedConfig(true), "campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
	_, err := h.r.Once(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no forge with pull requests") {
		t.Fatalf("Once() error = %v, want no forge to ask", err)
	}
	h.wantCalls(t, "pass")

	h = newHarness()
	h.r.Gate = &reconcile.ReviewedMergeGate{Repository: campaignsRepo, Branch: "main"}
	h.src.push(revision(t, "c1", files{"fleetlift.yaml": reviewedConfig(false), "campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
	h.once(t)
	h.wantCalls(t, "not required", "start slog gen=1 rev=c1")
}

// memLatch is a Latch in memory, shared by the gates of a test as
// Temporal is shared by reconcilers; err fails every call while set.
type memLatch struct {
	mu  sync.Mutex
	on  bool
	err error
}

func (l *memLatch) Latched(context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.on, l.err
}

func (l *memLatch) Set(context.Context, string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.on = true
	return nil
}

func (l *memLatch) Clear(context.Context, string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.on = false
	return nil
}

// TestReviewedMergeGateKeepsItsLatch: the requirement lives in the
// gate's Latch, not in its memory. A reconciler restarted at a head that
// dropped the setting by a direct push launches nothing; a latch that
// cannot be read or written launches nothing either; a reviewed merge
// that turns the setting off clears the latch for the next reconciler.
func TestReviewedMergeGateKeepsItsLatch(t *testing.T) {
	hub := &fakeMerges{}
	latch := &memLatch{}
	fs := func(require bool) files {
		return files{"fleetlift.yaml": reviewedConfig(require), "campaigns/slog.yaml": camp{id: "slog"}.yaml()}
	}
	// restart is a new reconciler on the same Temporal (the latch) and
	// recorded state.
	store := newHarness().store
	restart := func() *harness {
		h := newHarness()
		h.store = store
		h.r.State = store
		h.r.Gate = &reconcile.ReviewedMergeGate{Hub: hub, Repository: campaignsRepo, Branch: "main", Latch: latch}
		h.recordStarts(t, state.PhaseRunning)
		return h
	}
	pass := func(h *harness, sha string, files files, wantErr error, wantCalls ...string) {
		t.Helper()
		h.src.push(revision(t, sha, files))
		_, err := h.r.Once(context.Background())
		if (wantErr == nil) != (err == nil) || (wantErr != nil && !errors.Is(err, wantErr) && !strings.Contains(err.Error(), wantErr.Error())) {
			t.Errorf("%s: Once() error = %v, want %v", sha, err, wantErr)
		}
		h.wantCalls(t, sha, wantCalls...)
	}

	h := restart()
	hub.merged("c1", 1, "bob", "h1", "main", rv(1, "alice", forge.ReviewApproved, "h1"))
	pass(h, "c1", fs(true), nil, "start slog gen=1 rev=c1")
	if !latch.on {
		t.Fatal("a revision requiring reviewed merges did not set the latch")
	}

	h = restart()
	pass(h, "c2", fs(false), reconcile.ErrNotReviewed)

	latch.err = errors.New("temporal: unavailable")
	h = restart()
	pass(h, "c2", fs(false), errors.New("read whether reviewed merges are required: temporal: unavailable"))
	pass(h, "c3", fs(true), errors.New("record that reviewed merges are required: temporal: unavailable"))
	latch.err = nil

	hub.merged("c4", 2, "bob", "h4", "main", rv(1, "alice", forge.ReviewApproved, "h4"))
	h = restart()
	pass(h, "c4", fs(false), nil)
	if latch.on {
		t.Fatal("a reviewed merge turning the requirement off left the latch set")
	}
	h = restart()
	pass(h, "c5", fs(false), nil)
}
