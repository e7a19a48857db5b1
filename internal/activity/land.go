package activity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/status"
)

// ActInput asks ActOnPullRequests to merge or close PRs, each at the
// head last read of it.
type ActInput struct {
	Request status.ActRequest   `json:"request"`
	PRs     []status.FollowedPR `json:"prs"`
}

// ActOnPullRequests merges or closes each pull request of in, one after
// the other, with this worker's forges and credentials and within each
// forge's budget of writes. A merge names the head last read, so a pull
// request someone pushed to since is refused, not merged unseen. What
// one forge refuses is that pull request's outcome; the others go on.
// Sent again (a worker lost midway), what was merged or closed is found
// so and counts as done.
func (a *Activities) ActOnPullRequests(ctx context.Context, in ActInput) ([]status.ActOutcome, error) {
	stop := beatEvery(ctx, FollowHeartbeat/4)
	defer stop()
	out := make([]status.ActOutcome, 0, len(in.PRs))
	for _, p := range in.PRs {
		o := status.ActOutcome{Repo: p.Repo, URL: p.URL, Outcome: status.ActDone}
		if err := a.act(ctx, in.Request, p); err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			o.Outcome, o.Reason = status.ActFailed, git.Redact(err.Error())
		}
		out = append(out, o)
	}
	return out, nil
}

func (a *Activities) act(ctx context.Context, req status.ActRequest, p status.FollowedPR) error {
	f, err := a.follower(p)
	if err != nil {
		return err
	}
	l, ok := f.(forge.Lander)
	if !ok {
		return fmt.Errorf("forge %s cannot merge or close pull requests", f.Name())
	}
	ref := forge.PullRequestRef{Repository: p.Repository, Number: p.Number, Branch: p.Branch}
	switch req.Action {
	case status.ActMerge:
		err = l.MergePullRequest(ctx, ref, forge.MergeOptions{Method: req.Method, Head: p.Head, DeleteBranch: req.DeleteBranch})
		if errors.Is(err, forge.ErrHeadMoved) {
			return fmt.Errorf("someone pushed to it since it was read: not merged (%w)", err)
		}
		return err
	case status.ActClose:
		return l.ClosePullRequestAs(ctx, ref, req.Comment, req.DeleteBranch)
	}
	return fmt.Errorf("no action %q", req.Action)
}

// ActTimeout bounds one ActOnPullRequests: a bulk action waits for the
// forge's budget of writes (GitHub's 80 a minute: 2,000 pull requests in
// 25 minutes).
const ActTimeout = 2 * time.Hour
