package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/markdown"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/plan/render"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/visible"
)

// planMarker starts fleetlift's plan comment on a pull request: a new
// plan edits the comment that starts with it instead of adding another.
const planMarker = "<!-- fleetlift:plan -->"

// pullRequestRef is a pull request: its repository, as the forge knows
// it, and its number.
type pullRequestRef struct {
	Repository string
	Number     int
}

func (r pullRequestRef) String() string {
	return fmt.Sprintf("pull request %d of %s", r.Number, r.Repository)
}

// pullRequestURL is a pull request's web URL: .../OWNER/NAME/pull/N
// (GitHub) or .../pulls/N (Gitea).
var pullRequestURL = regexp.MustCompile(`^(https?://[^?#]+?)/pulls?/([0-9]+)/?$`)

// parseCommentOn reads --comment-on: a pull request number of repo, or a
// pull request's URL.
func parseCommentOn(repo, arg string) (pullRequestRef, error) {
	if n, err := strconv.Atoi(arg); err == nil {
		if n <= 0 {
			return pullRequestRef{}, usageErrorf("--comment-on %s: a pull request number is positive", arg)
		}
		return pullRequestRef{Repository: repo, Number: n}, nil
	}
	m := pullRequestURL.FindStringSubmatch(arg)
	if m == nil {
		return pullRequestRef{}, usageErrorf("--comment-on %q: want a pull request number, or its URL such as https://github.com/OWNER/NAME/pull/12", arg)
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || n <= 0 {
		return pullRequestRef{}, usageErrorf("--comment-on %q: the pull request number is out of range", arg)
	}
	return pullRequestRef{Repository: m[1], Number: n}, nil
}

// planComment is fleetlift's comment on a pull request, and its
// fleetlift/plan commit status on the head the pull request had when
// planning began.
type planComment struct {
	hub    forge.Hub
	target pullRequestRef
	head   string
}

// planStatus is the commit status the plan sets beside its comment, as
// Atlantis sets atlantis/plan: pending while it plans, success with the
// summary, failure when definitions are invalid or no plan could be made.
// Branch protection can require it.
const planStatus = "fleetlift/plan"

// newPlanComment finds the forge to comment on: the one the config at
// base selects (the branch people trust, not the proposed change), or at
// ref without a base.
func newPlanComment(ctx context.Context, src *source.Repo, forges *forgeFlags, base, ref string, target pullRequestRef) (*planComment, error) {
	at := base
	if at == "" {
		at = ref
	}
	fs, problems, err := readForge(ctx, src, at, forges)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("--comment-on needs the forge from the config at %s, which is invalid: %w", at, problems)
	}
	if fs.Hub == nil {
		return nil, fmt.Errorf("--comment-on needs a forge with pull requests: the config at %s selects forge %s", at, fs.Type)
	}
	c := &planComment{hub: fs.Hub, target: target}
	pr, err := fs.Hub.GetPullRequest(ctx, target.Repository, target.Number)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", target, err)
	}
	c.head = pr.HeadSHA
	return c, c.status(ctx, forge.StatusPending, "planning")
}

// status sets the fleetlift/plan status of the pull request's head.
func (c *planComment) status(ctx context.Context, state, description string) error {
	if c.head == "" {
		return nil
	}
	s := forge.CommitStatus{SHA: c.head, Context: planStatus, State: state, Description: description}
	if err := c.hub.SetCommitStatus(ctx, c.target.Repository, s); err != nil {
		return fmt.Errorf("set status %s on %s: %w", s.Context, c.target, err)
	}
	return nil
}

// plan puts the plan in the comment.
func (c *planComment) plan(ctx context.Context, p plan.Plan) error {
	var b bytes.Buffer
	b.WriteString(planMarker + "\n")
	if err := render.Markdown(&b, p); err != nil {
		return err
	}
	if err := c.post(ctx, b.String()); err != nil {
		return err
	}
	if n := len(p.Errors); n > 0 {
		return c.status(ctx, forge.StatusFailure, fmt.Sprintf("invalid definitions (%d errors): see the plan comment", n))
	}
	return c.status(ctx, forge.StatusSuccess, render.SummaryLine(p))
}

// failed puts in the comment why no plan could be made, so that an
// earlier revision's plan does not stand for this one.
func (c *planComment) failed(ctx context.Context, cause error) error {
	body := planMarker + "\n### fleetlift plan\n\n**No plan: it could not be made.**\n\n" + markdown.Fence(visible.String(cause.Error())+"\n", "")
	if err := c.post(ctx, body); err != nil {
		return err
	}
	return c.status(ctx, forge.StatusError, "no plan: it could not be made (see the plan comment)")
}

func (c *planComment) post(ctx context.Context, body string) error {
	if err := c.hub.UpsertComment(ctx, c.target.Repository, c.target.Number, planMarker, body); err != nil {
		return fmt.Errorf("comment on %s: %w", c.target, err)
	}
	return nil
}
