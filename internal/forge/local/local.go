package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
)

// RecordRefPrefix is where records live: RecordRefPrefix + branch.
const RecordRefPrefix = "refs/fleetlift/pr/"

// RecordFile is the record's file name in the record commit.
const RecordFile = "pr.json"

// Record is what was proposed for a branch.
type Record struct {
	Title     string    `json:"title"`
	Body      string    `json:"body,omitempty"`
	Labels    []string  `json:"labels,omitempty"`
	Reviewers []string  `json:"reviewers,omitempty"`
	Draft     bool      `json:"draft,omitempty"`
	Base      string    `json:"base"`
	Head      string    `json:"head"`
	Commit    string    `json:"commit"`
	URL       string    `json:"url"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ErrNoRecord is returned by Forge.Record for a branch without a record.
var ErrNoRecord = errors.New("no pull request record")

// Forge pushes branches and records to repositories reachable by git.
type Forge struct {
	Git *git.Git
	// Author signs record commits; empty means fleetlift.
	Author git.Identity
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu sync.Mutex
	// idle is a scratch repository kept from one pull request to the
	// next (an agent opens one per repository); Close removes it.
	idle   *git.Scratch
	closed bool
}

var _ forge.Forge = (*Forge)(nil)

// New returns a local forge that runs git through g.
func New(g *git.Git) *Forge { return &Forge{Git: g} }

// Name is "local".
func (f *Forge) Name() string { return "local" }

func (f *Forge) now() time.Time {
	if f.Now != nil {
		return f.Now().UTC()
	}
	return time.Now().UTC()
}

// URL is the "pull request" URL of branch in repository.
func URL(repository, branch string) string { return repository + "#" + branch }

// CreatePullRequest pushes req.Head from the clone req.Dir to the branch of
// the same name in req.Repository and records the request beside it.
// Called again with the same commit it changes nothing and returns the
// same pull request; with a new commit it moves the branch (even if that
// rewrites it, but only if nobody else moved it meanwhile) and updates the
// record.
func (f *Forge) CreatePullRequest(ctx context.Context, req forge.PullRequestRequest) (*forge.PullRequest, error) {
	if err := git.CheckURL(req.Repository); err != nil {
		return nil, err
	}
	if err := git.CheckBranch(req.Head); err != nil {
		return nil, fmt.Errorf("open pull request: %w", err)
	}
	head, err := f.Git.Proposed(ctx, req.Dir, req.Commit, req.Head)
	if err != nil {
		return nil, fmt.Errorf("open pull request for %s: %w", req.Head, err)
	}
	s, err := f.scratch(ctx, req.Dir)
	if err != nil {
		return nil, err
	}
	defer f.release(s)
	pr := &forge.PullRequest{URL: URL(req.Repository, req.Head), Branch: req.Head, Commit: head, State: "open"}

	// Most branches are new: one push proposes them, and it succeeds only
	// if neither the branch nor a record exists yet. Whatever stops it
	// (the branch is there from an earlier attempt, or moved since) is
	// looked at below.
	if err := f.propose(ctx, s, req, head, nil, nil); err == nil {
		return pr, nil
	}

	branchRef, recordRef := "refs/heads/"+req.Head, RecordRefPrefix+req.Head
	refs, err := s.LsRemote(ctx, req.Repository, branchRef, recordRef)
	if err != nil {
		return nil, err
	}
	var old *Record
	if refs[recordRef] != "" {
		if old, err = readRecord(ctx, s, req.Repository, recordRef); err != nil {
			return nil, err
		}
	}
	if refs[branchRef] == head && old != nil && old.Commit == head {
		return pr, nil
	}
	if tip := refs[branchRef]; tip != "" && tip != head {
		if err := forge.OwnBranch(req, tip, func() (string, error) {
			who, err := f.Git.Committer(ctx, req.Repository, branchRef)
			return who.Email, err
		}); err != nil {
			return nil, err
		}
	}
	if err := f.propose(ctx, s, req, head, refs, old); err != nil {
		return nil, err
	}
	return pr, nil
}

// scratch is the idle scratch repository, or a new one, borrowing the
// objects of the clone at dir.
func (f *Forge) scratch(ctx context.Context, dir string) (*git.Scratch, error) {
	f.mu.Lock()
	s := f.idle
	f.idle = nil
	f.mu.Unlock()
	if s == nil {
		return f.Git.NewScratch(ctx, dir)
	}
	if err := s.Borrow(ctx, dir); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// release keeps s for the next pull request, or removes it when one is
// kept already or the forge is closed.
func (f *Forge) release(s *git.Scratch) {
	f.mu.Lock()
	keep := f.idle == nil && !f.closed
	if keep {
		f.idle = s
	}
	f.mu.Unlock()
	if !keep {
		s.Close()
	}
}

// Close removes the scratch repository kept between pull requests. The
// forge stays usable; it just keeps nothing any more.
func (f *Forge) Close() error {
	f.mu.Lock()
	s := f.idle
	f.idle, f.closed = nil, true
	f.mu.Unlock()
	if s != nil {
		return s.Close()
	}
	return nil
}

// propose pushes head to req.Head in req.Repository with a new record,
// atomically, provided the remote's refs are still refs (full name ->
// id; nil: neither exists) and old is the record there.
func (f *Forge) propose(ctx context.Context, s *git.Scratch, req forge.PullRequestRequest, head string, refs map[string]string, old *Record) error {
	branchRef, recordRef := "refs/heads/"+req.Head, RecordRefPrefix+req.Head
	now := f.now()
	rec := Record{
		Title: req.Title, Body: req.Body, Labels: req.Labels, Reviewers: req.Reviewers, Draft: req.Draft,
		Base: req.Base, Head: req.Head, Commit: head, URL: URL(req.Repository, req.Head), CreatedAt: now, UpdatedAt: now,
	}
	if old != nil {
		rec.CreatedAt = old.CreatedAt
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	tree, err := s.WriteTree(ctx, map[string][]byte{RecordFile: append(data, '\n')})
	if err != nil {
		return err
	}
	var parents []string
	if refs[recordRef] != "" {
		parents = append(parents, refs[recordRef])
	}
	msg := fmt.Sprintf("fleetlift: pull request %s at %s\n", req.Head, head)
	commit, err := s.CommitTree(ctx, tree, msg, f.Author, parents...)
	if err != nil {
		return err
	}

	var updates []git.RefUpdate
	if refs[branchRef] != head {
		updates = append(updates, git.RefUpdate{Src: head, Dst: branchRef, Lease: true, Expect: refs[branchRef]})
	}
	updates = append(updates, git.RefUpdate{Src: commit, Dst: recordRef, Lease: true, Expect: refs[recordRef]})
	if err := s.Push(ctx, req.Repository, updates...); err != nil {
		return fmt.Errorf("push branch %s: %w", req.Head, err)
	}
	return nil
}

// Record reads the record of branch in repository, or ErrNoRecord.
func (f *Forge) Record(ctx context.Context, repository, branch string) (*Record, error) {
	if err := git.CheckBranch(branch); err != nil {
		return nil, err
	}
	s, err := f.Git.NewScratch(ctx, "")
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ref := RecordRefPrefix + branch
	refs, err := s.LsRemote(ctx, repository, ref)
	if err != nil {
		return nil, err
	}
	if refs[ref] == "" {
		return nil, fmt.Errorf("read record of %s: %w", branch, ErrNoRecord)
	}
	return readRecord(ctx, s, repository, ref)
}

func readRecord(ctx context.Context, s *git.Scratch, repository, ref string) (*Record, error) {
	if err := s.Fetch(ctx, repository, "+"+ref+":"+ref); err != nil {
		return nil, err
	}
	data, err := s.ReadFile(ctx, ref, RecordFile)
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("decode record %s: %w", ref, err)
	}
	return &rec, nil
}
