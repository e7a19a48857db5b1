package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/reconcile"
)

// DefaultBranch is the status branch when Branch.Branch is empty.
const DefaultBranch = "fleetlift/status"

// ErrWatchedBranch is returned (wrapped) when the status branch is the
// watched branch, or the watched branch is not known: the status is never
// written onto the branch the reconciler launches from. It is permanent:
// only a change of configuration helps.
var ErrWatchedBranch = errors.New("refusing to write the status onto the watched branch")

// errMoved says the status branch moved between reading it and pushing.
var errMoved = errors.New("another writer moved the status branch while this status was written")

// tipRef is where a scratch repository keeps the fetched status branch.
const tipRef = "refs/fleetlift/mirror/tip"

// Branch writes the status as commits on a branch of the campaigns
// repository. Each commit's parent is the previous status, so the
// branch's log is the history of the status. It pushes that one branch,
// with a lease on the commit it read, and no other ref.
type Branch struct {
	// Git runs git; nil means a zero git.Git (git on PATH, the token from
	// the environment).
	Git *git.Git
	// Repository is the URL or absolute path of the campaigns repository.
	Repository string
	// Branch is the status branch; empty means DefaultBranch.
	Branch string
	// Watched is the branch the reconciler watches. Write refuses to run
	// when it is empty or names the status branch.
	Watched string
	// Author signs status commits; empty means fleetlift.
	Author git.Identity
}

var _ reconcile.Mirror = (*Branch)(nil)

func (b *Branch) git() *git.Git {
	if b.Git != nil {
		return b.Git
	}
	return &git.Git{}
}

// Ref is the full name of the status branch, after checking that it is
// a valid branch name other than the watched branch.
func (b *Branch) Ref() (string, error) {
	branch := strings.TrimPrefix(b.Branch, "refs/heads/")
	if branch == "" {
		branch = DefaultBranch
	}
	if err := git.CheckBranch(branch); err != nil {
		return "", fmt.Errorf("status branch: %w", err)
	}
	watched := strings.TrimPrefix(b.Watched, "refs/heads/")
	switch watched {
	case "":
		return "", fmt.Errorf("%w: the watched branch is not set, so the status branch %s cannot be told apart from it",
			ErrWatchedBranch, branch)
	case branch:
		return "", fmt.Errorf("%w: the status branch %s is the branch the reconciler watches; set another status branch",
			ErrWatchedBranch, branch)
	}
	return "refs/heads/" + branch, nil
}

// Write commits the files Render makes of s to the status branch, on top
// of its previous commit, and pushes it with a lease on that commit. It
// writes nothing when the files are those of the branch's tip, or differ
// from them only in the time. When somebody else moved the branch in the
// meantime it reads the branch again and tries once more.
func (b *Branch) Write(ctx context.Context, s reconcile.Status) error {
	if b.Branch == "" && s.StatusBranch != "" {
		// The repository config names the status branch.
		c := *b
		c.Branch = s.StatusBranch
		b = &c
	}
	ref, err := b.Ref()
	if err != nil {
		return err
	}
	branch := strings.TrimPrefix(ref, "refs/heads/")
	sc, err := b.git().NewScratch(ctx, "")
	if err != nil {
		return fmt.Errorf("write status to %s: %w", branch, err)
	}
	defer sc.Close()
	w := &writer{sc: sc, url: b.Repository, ref: ref, watched: strings.TrimPrefix(b.Watched, "refs/heads/"),
		author: b.Author, blobs: map[string]string{}}
	err = w.write(ctx, s)
	if errors.Is(err, errMoved) {
		err = w.write(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("write status to %s: %w", branch, err)
	}
	return nil
}

// writer is one Write: the scratch repository it builds commits in, and
// the blobs already stored there.
type writer struct {
	sc      *git.Scratch
	url     string
	ref     string
	watched string
	author  git.Identity
	// blobs maps content to the id of the blob stored for it.
	blobs map[string]string
}

// write reads the branch's tip, and commits and pushes s on top of it
// unless the tip already shows s. It returns an error wrapping errMoved
// when the push failed because the branch moved.
func (w *writer) write(ctx context.Context, s reconcile.Status) error {
	refs, err := w.sc.LsRemote(ctx, w.url, w.ref)
	if err != nil {
		return err
	}
	var tip, tipTree string
	if refs[w.ref] != "" {
		if err := w.sc.Fetch(ctx, w.url, "+"+w.ref+":"+tipRef); err != nil {
			return err
		}
		// The fetched commit, which may be newer than the listed one.
		if tip, err = w.rev(ctx, tipRef+"^{commit}"); err != nil {
			return err
		}
		if tipTree, err = w.rev(ctx, tip+"^{tree}"); err != nil {
			return err
		}
	}
	tree, err := w.tree(ctx, w.files(ctx, s, tip))
	if err != nil {
		return err
	}
	if tree == tipTree {
		return nil
	}
	if tip != "" {
		// A status that differs from the tip's only in its time is not
		// worth a commit: render it with the tip's time and compare.
		if data, err := w.sc.ReadFile(ctx, tip, StatusFile); err == nil {
			if prev := readTime(data); !prev.IsZero() && !prev.Equal(s.Time.UTC().Truncate(time.Second)) {
				same := s
				same.Time = prev
				t, err := w.tree(ctx, w.files(ctx, same, tip))
				if err != nil {
					return err
				}
				if t == tipTree {
					return nil
				}
			}
		}
	}
	var parents []string
	if tip != "" {
		parents = append(parents, tip)
	}
	commit, err := w.sc.CommitTree(ctx, tree, Message(s), w.author, parents...)
	if err != nil {
		return err
	}
	pushErr := w.sc.Push(ctx, w.url, git.RefUpdate{Src: commit, Dst: w.ref, Lease: true, Expect: tip})
	if pushErr == nil {
		return nil
	}
	// Tell a lost lease from other failures by looking again, rather
	// than by reading git's messages.
	now, err := w.sc.LsRemote(ctx, w.url, w.ref)
	switch {
	case err != nil:
		return pushErr
	case now[w.ref] == commit:
		// The push went through; only its answer was lost.
		return nil
	case now[w.ref] != tip:
		return fmt.Errorf("%w: %w", errMoved, pushErr)
	}
	return pushErr
}

// files are the status branch's files for s: Render's, and each
// campaign's burndown (Burndown), which goes on from the samples at tip
// (none when tip is "").
func (w *writer) files(ctx context.Context, s reconcile.Status, tip string) map[string][]byte {
	files := Render(s, w.watched)
	for _, c := range s.Campaigns {
		var prev []byte
		if tip != "" {
			// None yet (a campaign new to the branch) reads as none.
			prev, _ = w.sc.ReadFile(ctx, tip, BurndownPath(c.ID, "json"))
		}
		files[BurndownPath(c.ID, "json")], files[BurndownPath(c.ID, "svg")] = Burndown(prev, c, s.Time)
	}
	return files
}

func (w *writer) rev(ctx context.Context, rev string) (string, error) {
	out, err := w.sc.Run(ctx, "rev-parse", "--verify", "--quiet", rev)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", rev, err)
	}
	return strings.TrimSpace(out), nil
}

// tree stores files (slash-separated paths) as blobs and trees in the
// scratch repository and returns the root tree's id. git.Scratch.WriteTree
// takes only flat names; the status has a campaigns/ directory.
func (w *writer) tree(ctx context.Context, files map[string][]byte) (string, error) {
	root := &dir{}
	for p, data := range files {
		if err := root.add(p, p, data); err != nil {
			return "", err
		}
	}
	return w.writeDir(ctx, root)
}

// dir is a directory of the tree being written.
type dir struct {
	files map[string][]byte
	dirs  map[string]*dir
}

func (d *dir) add(full, p string, data []byte) error {
	name, rest, nested := strings.Cut(p, "/")
	if name == "" || name == "." || name == ".." || name == ".git" || strings.ContainsAny(name, "\t\n\x00") {
		return fmt.Errorf("write tree: invalid path %q", full)
	}
	if !nested {
		if d.files == nil {
			d.files = map[string][]byte{}
		}
		if _, ok := d.dirs[name]; ok {
			return fmt.Errorf("write tree: %q is both a file and a directory", full)
		}
		d.files[name] = data
		return nil
	}
	if _, ok := d.files[name]; ok {
		return fmt.Errorf("write tree: %q is both a file and a directory", full)
	}
	if d.dirs == nil {
		d.dirs = map[string]*dir{}
	}
	sub := d.dirs[name]
	if sub == nil {
		sub = &dir{}
		d.dirs[name] = sub
	}
	return sub.add(full, rest, data)
}

func (w *writer) writeDir(ctx context.Context, d *dir) (string, error) {
	var entries []string
	for name, data := range d.files {
		id, err := w.blob(ctx, data)
		if err != nil {
			return "", fmt.Errorf("write %s: %w", name, err)
		}
		entries = append(entries, "100644 blob "+id+"\t"+name+"\n")
	}
	for name, sub := range d.dirs {
		id, err := w.writeDir(ctx, sub)
		if err != nil {
			return "", err
		}
		entries = append(entries, "040000 tree "+id+"\t"+name+"\n")
	}
	slices.Sort(entries)
	out, err := w.sc.RunInput(ctx, strings.NewReader(strings.Join(entries, "")), "mktree")
	if err != nil {
		return "", fmt.Errorf("write tree: %w", err)
	}
	return strings.TrimSpace(out), nil
}

func (w *writer) blob(ctx context.Context, data []byte) (string, error) {
	if id, ok := w.blobs[string(data)]; ok {
		return id, nil
	}
	out, err := w.sc.RunInput(ctx, bytes.NewReader(data), "hash-object", "-w", "--no-filters", "--stdin")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(out)
	w.blobs[string(data)] = id
	return id, nil
}
