package forge

import "context"

// Forge opens pull requests. CreatePullRequest must be idempotent: called
// again for the same repository and branch it returns the pull request it
// already made (the branch name is deterministic), so a retried activity
// never opens two.
type Forge interface {
	CreatePullRequest(ctx context.Context, req PullRequestRequest) (*PullRequest, error)
	Name() string
}

// PullRequestRequest asks for the branch Head, already pushed or pushed by
// the forge from Dir, to be proposed against Base in Repository.
type PullRequestRequest struct {
	// Repository is the clone URL of the target repository.
	Repository string
	// Dir is the local clone holding Head.
	Dir       string
	Base      string
	Head      string
	Title     string
	Body      string
	Labels    []string
	Reviewers []string
	Draft     bool
}

// PullRequest is an opened pull request, or for the local forge, a pushed
// branch and its record.
type PullRequest struct {
	URL    string
	Number int
	Branch string
	Commit string
	// State is open, merged or closed.
	State string
}
