package activity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"

	sdkactivity "go.temporal.io/sdk/activity"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/local"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Delivery is what the worker needs to propose a finished transform's
// changes (Activities.deliver): the manifest's pull request, forge,
// identity and repositories, and the trees a person approved. It comes
// from the workflow, never from the sandbox: nothing the work wrote
// chooses a repository, a branch or a forge.
type Delivery struct {
	TaskID      string               `json:"task"`
	Forge       string               `json:"forge,omitempty"`
	PullRequest protocol.PullRequest `json:"pull_request"`
	UserName    string               `json:"user_name,omitempty"`
	UserEmail   string               `json:"user_email,omitempty"`
	// Repositories are those the changes may be proposed in.
	Repositories []protocol.Repository `json:"repositories"`
	// RequireApproval is the manifest's: then only Approved trees are
	// proposed.
	RequireApproval bool `json:"require_approval,omitempty"`
	// Approved is the tree approved in each repository (the result the
	// decision named).
	Approved map[string]string `json:"approved,omitempty"`
	// Parallel is how many repositories are proposed at once.
	Parallel int `json:"parallel,omitempty"`
}

// DeliveryOf is the Delivery of m's changes, with the trees of approved
// (nil: none approved); nil when m proposes nothing (report mode, or no
// pull_request).
func DeliveryOf(m protocol.Manifest, approved *protocol.Result) *Delivery {
	if m.Mode != protocol.ModeTransform || m.PullRequest == nil {
		return nil
	}
	repos := m.Repositories
	if m.Transformation != nil {
		repos = m.Targets
	}
	d := &Delivery{
		TaskID: m.TaskID, Forge: m.Forge, PullRequest: *m.PullRequest,
		UserName: m.GitConfig.UserName, UserEmail: m.GitConfig.UserEmail,
		Repositories: repos, RequireApproval: m.RequireApproval, Parallel: m.Parallel,
	}
	if approved != nil {
		d.Approved = map[string]string{}
		for _, rr := range approved.Repositories {
			if rr.Tree != "" {
				d.Approved[rr.Name] = rr.Tree
			}
		}
	}
	return d
}

// maxBundleBytes bounds a change the worker reads from a sandbox.
const maxBundleBytes = 1 << 30

// baseSearchDepth is how far back on the target branch the worker looks
// for the commit a change builds on: the branch may have moved while the
// work ran.
const baseSearchDepth = 200

// deliver proposes the changes of the finished transform r from sandbox
// id as d says, and updates st and r with the pull requests (or why a
// repository's change was not proposed). For each repository the agent
// left a change in, it fetches the target branch from the repository
// itself and finds there the commit the change builds on, takes the
// change from the bundle the agent left (protocol.BundleFile) and checks
// its tree is the one approved (or, for a task that needs no approval,
// the one the result shows), commits that tree on that base as the
// manifest's author, and has the forge push it and open the pull
// request, with the worker's credentials. The sandbox holds none. beat,
// when set, is called as each repository starts: an activity without
// heartbeats of its own keeps its attempt alive with it.
//
// Its error is ErrSandboxGone when a repository's change was not
// proposed and the sandbox no longer exists: an attempt of the same
// activity the server had given up on (its heartbeat late) removed it
// as it ended. That is a lost sandbox, whose work runs again in a new
// one, not a change the agent failed to leave.
func (a *Activities) deliver(ctx context.Context, id string, d *Delivery, st *protocol.Status, r *protocol.Result, beat func()) error {
	if d == nil || st.Phase != protocol.PhaseComplete {
		return nil
	}
	var todo []*protocol.RepositoryResult
	for i := range r.Repositories {
		rr := &r.Repositories[i]
		if rr.Status == "success" && rr.Base != "" && rr.PullRequest == nil {
			todo = append(todo, rr)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(d.Parallel, 1))
	for _, rr := range todo {
		wg.Add(1)
		sem <- struct{}{}
		if beat != nil {
			beat()
		}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pr, err := a.propose(ctx, id, d, rr)
			if err != nil {
				rr.Status, rr.Error = "failed", git.Redact(err.Error())
				sdkactivity.GetLogger(ctx).Warn("change not proposed", "sandbox", id, "repository", rr.Name, "error", rr.Error)
				return
			}
			rr.PullRequest = pr
		}()
	}
	wg.Wait()
	if slices.ContainsFunc(todo, func(rr *protocol.RepositoryResult) bool { return rr.PullRequest == nil }) {
		if _, err := a.Sandbox.Status(ctx, id); errors.Is(err, sandbox.ErrNotFound) {
			return sandboxGone(id, err)
		}
	}
	phase, msg, firstErr := protocol.Outcome(r.Repositories)
	st.Phase, st.Message = phase, msg
	r.Status = phase
	if phase == protocol.PhaseFailed {
		r.Error = firstErr
	}
	return nil
}

// propose proposes rr's change (see deliver).
func (a *Activities) propose(ctx context.Context, id string, d *Delivery, rr *protocol.RepositoryResult) (*protocol.PullRequestInfo, error) {
	var repo *protocol.Repository
	for i := range d.Repositories {
		if d.Repositories[i].Name == rr.Name {
			repo = &d.Repositories[i]
		}
	}
	if repo == nil {
		return nil, fmt.Errorf("the sandbox left a change for %s, which the task does not work on: not proposed", rr.Name)
	}
	want := rr.Tree
	if d.RequireApproval {
		if want = d.Approved[rr.Name]; want == "" {
			return nil, fmt.Errorf("no approved change in %s: nothing proposed", rr.Name)
		}
		if rr.Tree != want {
			return nil, fmt.Errorf("the change left in %s has tree %s, not the approved tree %s: not proposed", rr.Name, rr.Tree, want)
		}
	}
	if !git.IsObjectID(want) || !git.IsObjectID(rr.Base) {
		return nil, fmt.Errorf("the change left in %s names no tree or base: not proposed", rr.Name)
	}
	if a.Forges == nil || a.Git == nil {
		return nil, fmt.Errorf("this worker proposes no changes: it has no forge")
	}
	f, err := a.forgeOf(d.Forge, repo.URL)
	if err != nil {
		return nil, err
	}
	s, branch, done, err := a.base(ctx, id, repo, rr)
	if err != nil {
		return nil, err
	}
	defer done()

	// The change: objects from the sandbox, checked as any fetched.
	bundle, err := a.openBundle(ctx, id, rr.Name)
	if err != nil {
		return nil, err
	}
	defer bundle.Close()
	in := &capped{r: bundle, left: maxBundleBytes}
	_, got, err := s.ReadBundle(ctx, in, protocol.BundleRef)
	if in.over {
		return nil, fmt.Errorf("the change left in %s is over %d bytes: not proposed", rr.Name, maxBundleBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("read the change left in %s: %w", rr.Name, err)
	}
	if got != want {
		return nil, fmt.Errorf("the change left in %s has tree %s, not %s: not proposed", rr.Name, got, want)
	}
	commit, err := s.CommitTree(ctx, want, d.PullRequest.CommitMessage(), git.Identity{Name: d.UserName, Email: d.UserEmail}, rr.Base)
	if err != nil {
		return nil, err
	}
	head := protocol.BranchName(d.PullRequest.BranchPrefix, d.TaskID)
	got2, err := f.CreatePullRequest(ctx, forge.PullRequestRequest{
		Repository: repo.URL,
		Dir:        s.Dir(),
		Base:       branch,
		Head:       head,
		Commit:     commit,
		Title:      d.PullRequest.Title,
		Body:       d.PullRequest.Body,
		Labels:     d.PullRequest.Labels,
		Reviewers:  d.PullRequest.Reviewers,
		Draft:      d.PullRequest.Draft,
		Committer:  d.UserEmail,
	})
	var foreign *forge.ForeignBranchError
	if errors.As(err, &foreign) {
		return adopt(ctx, f, d, repo.URL, foreign)
	}
	if err != nil {
		return nil, fmt.Errorf("open pull request for %s: %w", head, err)
	}
	tree := want
	if got2.Commit != "" && got2.Commit != commit {
		// The forge proposes a commit other than the one made here: say
		// its tree (none when unknown), which the workflow compares with
		// the approved one.
		tree = ""
		if out, err := s.Run(ctx, "rev-parse", "--verify", "--quiet", got2.Commit+"^{tree}"); err == nil {
			tree = strings.TrimSpace(out)
		}
		commit = got2.Commit
	}
	return &protocol.PullRequestInfo{URL: got2.URL, Number: got2.Number, Branch: got2.Branch, Commit: commit, Tree: tree,
		Repository: repo.URL, Forge: d.Forge}, nil
}

// adopt is the pull request open from the branch fb names in
// repository, which has a commit someone else made and which fleetlift
// therefore leaves as it is: the run takes it over as its own (it is
// followed, merged and closed as the run's), without a second one, and
// it says it was not overwritten (PullRequestInfo.NotOverwritten). With
// no pull request open from it, the change cannot be proposed.
func adopt(ctx context.Context, f forge.Forge, d *Delivery, repository string, fb *forge.ForeignBranchError) (*protocol.PullRequestInfo, error) {
	info := &protocol.PullRequestInfo{Branch: fb.Branch, Commit: fb.Head, Repository: repository, Forge: d.Forge, NotOverwritten: fb.Error()}
	switch f := f.(type) {
	case forge.Hub:
		pr, err := f.FindPullRequest(ctx, repository, fb.Branch)
		if err != nil {
			return nil, fmt.Errorf("%w; and finding its pull request failed: %w", fb, err)
		}
		if pr != nil && pr.State == forge.StateOpen {
			info.URL, info.Number = pr.URL, pr.Number
			return info, nil
		}
	case *local.Forge:
		if _, err := f.Record(ctx, repository, fb.Branch); err == nil {
			info.URL = local.URL(repository, fb.Branch)
			return info, nil
		}
	}
	return nil, fmt.Errorf("%w, and no pull request is open from it: delete the branch for fleetlift to propose its change", fb)
}

// base is a repository holding the base rr's change builds on, and the
// branch it is on; done is called when it is no longer needed. It is the
// worker's copy the sandbox cloned, when the gateway has one (the gateway
// removes it with the sandbox), else a scratch repository that reads the
// target branch from the repository itself and finds the base among its
// last commits.
func (a *Activities) base(ctx context.Context, id string, repo *protocol.Repository, rr *protocol.RepositoryResult) (s *git.Scratch, branch string, done func(), err error) {
	branch = repo.Branch
	if a.Copies != nil {
		if s, ok := a.Copies.Copy(id, rr.Name); ok {
			if branch == "" {
				if branch, err = s.Head(ctx); err != nil {
					return nil, "", nil, err
				}
			}
			if err := git.CheckBranch(branch); err != nil {
				return nil, "", nil, err
			}
			if ok, err := s.IsAncestor(ctx, rr.Base, "refs/heads/"+branch); !ok || err != nil {
				return nil, "", nil, fmt.Errorf("the change in %s builds on %s, which is not on %s as the sandbox cloned it: not proposed", rr.Name, rr.Base, branch)
			}
			return s, branch, func() {}, nil
		}
	}
	if s, err = a.Git.NewScratch(ctx, ""); err != nil {
		return nil, "", nil, err
	}
	scratch := s
	defer func() {
		if err != nil {
			scratch.Close()
		}
	}()
	if branch == "" {
		if branch, err = s.DefaultBranch(ctx, repo.URL); err != nil {
			return nil, "", nil, err
		}
	}
	if err := git.CheckBranch(branch); err != nil {
		return nil, "", nil, err
	}
	tip := "refs/fleetlift/target"
	for _, depth := range []int{1, baseSearchDepth} {
		if err := s.FetchShallow(ctx, repo.URL, depth, "+refs/heads/"+branch+":"+tip); err != nil {
			return nil, "", nil, err
		}
		if ok, err := s.IsAncestor(ctx, rr.Base, tip); ok && err == nil {
			return s, branch, func() { scratch.Close() }, nil
		}
	}
	return nil, "", nil, fmt.Errorf("the change in %s builds on %s, which is not among the last %d commits of %s: not proposed (run the task again)", rr.Name, rr.Base, baseSearchDepth, branch)
}

// openBundle opens the change the agent left for repository name in
// sandbox id.
func (a *Activities) openBundle(ctx context.Context, id, name string) (io.ReadCloser, error) {
	rc, err := a.Sandbox.CopyFrom(ctx, id, path.Join(protocol.Dir, protocol.BundleFile(name)))
	if errors.Is(err, sandbox.ErrNotFound) {
		err = fmt.Errorf("the agent left no change for %s", name)
	}
	if err != nil {
		return nil, fmt.Errorf("read the change left in %s: %w", name, err)
	}
	return rc, nil
}

// capped reads r until more than left bytes came, and then fails, saying
// so (over).
type capped struct {
	r    io.Reader
	left int64
	over bool
}

var errOverCap = errors.New("over the size allowed")

func (c *capped) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if c.left -= int64(n); c.left < 0 {
		c.over = true
		return n, errOverCap
	}
	return n, err
}

// LocalForges are the forges of a worker that has only the local forge
// (pushing with g): what Activities.Forges is for a worker without a
// forge of its own. Closing the closer, once the worker stopped, removes
// the scratch repository the forge keeps for its next pull request.
func LocalForges(g *git.Git) (func(name string) (forge.Forge, error), io.Closer) {
	lf := local.New(g)
	return func(name string) (forge.Forge, error) {
		if name == "" || name == "local" {
			return lf, nil
		}
		return nil, fmt.Errorf("forge %q: this worker proposes changes on the local forge only", name)
	}, lf
}
