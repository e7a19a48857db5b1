package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
)

var (
	_ forge.Follower = (*Forge)(nil)
	_ forge.Stamper  = (*Forge)(nil)
)

// PullRequestStamp is the stamp of the "pull request" of branch into
// base in repository (number is ignored): the commits its record, its
// branch and its base are at, which are all PullRequestStatus reads. One
// ls-remote, where a read fetches both branches and merges them.
func (f *Forge) PullRequestStamp(ctx context.Context, repository string, number int, branch, base string) (string, error) {
	if err := git.CheckURL(repository); err != nil {
		return "", err
	}
	if err := git.CheckBranch(branch); err != nil {
		return "", err
	}
	if err := git.CheckBranch(base); err != nil {
		return "", fmt.Errorf("base: %w", err)
	}
	record, head, baseRef := RecordRefPrefix+branch, "refs/heads/"+branch, "refs/heads/"+base
	got, err := f.Git.LsRemote(ctx, repository, record, head, baseRef)
	if err != nil {
		return "", err
	}
	return stampOf(got[record], got[head], got[baseRef]), nil
}

// stampOf is the stamp of a pull request whose record, branch and base
// are at those commits ("": gone).
func stampOf(record, head, base string) string {
	return cmp.Or(record, "-") + " " + cmp.Or(head, "-") + " " + cmp.Or(base, "-")
}

// PullRequestStatus reads what became of the "pull request" of branch
// in repository (number is ignored: the branch names it). It is merged
// once its commit is reachable from the base branch its record names,
// closed when the branch is gone without that, and open otherwise; an
// open one is conflicting when its branch and the base do not merge
// cleanly, and behind when the base moved past where it started.
func (f *Forge) PullRequestStatus(ctx context.Context, repository string, number int, branch string) (*forge.PullRequestStatus, error) {
	r, err := f.read(ctx, repository, branch)
	if err != nil {
		return nil, err
	}
	defer r.s.Close()
	st := &forge.PullRequestStatus{State: forge.StateOpen, Draft: r.rec.Draft, Base: r.rec.Base, BaseSHA: r.base,
		Labels: r.rec.Labels, Head: r.head, Stamp: stampOf(r.record, r.head, r.base)}
	head := r.head
	if head == "" {
		// Gone: merged if what was proposed is on the base.
		if !git.IsObjectID(r.rec.Commit) {
			return nil, fmt.Errorf("record of %s: commit %q is no object id", branch, r.rec.Commit)
		}
		head = r.rec.Commit
	}
	merged, err := r.s.IsAncestor(ctx, head, "refs/base")
	if err != nil {
		return nil, err
	}
	switch {
	case merged:
		st.State, st.Head = forge.StateMerged, head
		return st, nil
	case r.head == "":
		st.State = forge.StateClosed
		return st, nil
	}
	if _, err := r.s.Run(ctx, "merge-tree", "--write-tree", "--no-messages", "refs/base", "refs/head"); err != nil {
		if exitStatus(err) != 1 {
			return nil, fmt.Errorf("merge %s into %s: %w", branch, r.rec.Base, err)
		}
		st.Mergeable = forge.MergeableConflict
		return st, nil
	}
	st.Mergeable = forge.MergeableYes
	if current, err := r.s.IsAncestor(ctx, "refs/base", "refs/head"); err != nil {
		return nil, err
	} else if !current {
		st.Mergeable = forge.MergeableBehind
	}
	return st, nil
}

// proposal is a pull request of the local forge as read: its record,
// the commits of its base and branch ("" when the branch is gone), both
// fetched into s as refs/base and refs/head. The caller closes s.
type proposal struct {
	s          *git.Scratch
	rec        *Record
	base, head string
	// record is the commit of its record.
	record string
}

// read reads the pull request of branch in repository.
func (f *Forge) read(ctx context.Context, repository, branch string) (*proposal, error) {
	if err := git.CheckURL(repository); err != nil {
		return nil, err
	}
	if err := git.CheckBranch(branch); err != nil {
		return nil, err
	}
	s, err := f.Git.NewScratch(ctx, "")
	if err != nil {
		return nil, err
	}
	r, err := readProposal(ctx, s, repository, branch)
	if err != nil {
		s.Close()
		return nil, err
	}
	return r, nil
}

func readProposal(ctx context.Context, s *git.Scratch, repository, branch string) (*proposal, error) {
	recordRef, branchRef := RecordRefPrefix+branch, "refs/heads/"+branch
	refs, err := s.LsRemote(ctx, repository, recordRef, branchRef)
	if err != nil {
		return nil, err
	}
	if refs[recordRef] == "" {
		return nil, fmt.Errorf("read pull request %s of %s: %w", branch, git.Redact(repository), ErrNoRecord)
	}
	rec, err := readRecord(ctx, s, repository, recordRef)
	if err != nil {
		return nil, err
	}
	if err := git.CheckBranch(rec.Base); err != nil {
		return nil, fmt.Errorf("record of %s: base: %w", branch, err)
	}
	r := &proposal{s: s, rec: rec, head: refs[branchRef], record: refs[recordRef]}
	specs := []string{"+refs/heads/" + rec.Base + ":refs/base"}
	if r.head != "" {
		specs = append(specs, "+"+branchRef+":refs/head")
	}
	if err := s.Fetch(ctx, repository, specs...); err != nil {
		return nil, err
	}
	base, err := s.Run(ctx, "rev-parse", "--verify", "--quiet", "refs/base^{commit}")
	if err != nil {
		return nil, fmt.Errorf("read pull request %s of %s: its base %s is gone", branch, git.Redact(repository), rec.Base)
	}
	r.base = strings.TrimSpace(base)
	return r, nil
}

func exitStatus(err error) int {
	var ge *git.Error
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}
