package reconcile

import (
	"context"

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
	return desired.Read(ctx, s.Loader, root, sha, s.Path)
}
