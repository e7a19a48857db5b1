package reconcile

import (
	"context"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// GitSource is a Source over a campaigns repository read with package
// source: Head asks the remote (ls-remote, fetching only when the branch
// moved), Read reads the commit's tree without a work tree.
type GitSource struct {
	Repo *source.Repo
	// Ref is the watched branch.
	Ref string
	// Path overrides the config's watch.path when set.
	Path   string
	Loader *spec.Loader
	// IsMember answers whether a user is in a team, for approver rules
	// that name teams; nil when there is no forge to ask.
	IsMember approval.IsMember
}

var _ Source = (*GitSource)(nil)

// Head resolves the watched branch.
func (s *GitSource) Head(ctx context.Context) (string, error) { return s.Repo.Resolve(ctx, s.Ref) }

// Read reads the desired state at sha.
func (s *GitSource) Read(ctx context.Context, sha string) (*desired.Revision, error) {
	root, err := s.Repo.FS(ctx, sha, "")
	if err != nil {
		return nil, err
	}
	rev, err := desired.Read(ctx, s.Loader, root, sha, s.Path)
	if err != nil {
		return nil, err
	}
	if err := GateApprovals(ctx, s.Repo, RepoApprovers{Repo: s.Repo, Loader: s.Loader}, rev, s.IsMember); err != nil {
		return nil, err
	}
	return rev, nil
}
