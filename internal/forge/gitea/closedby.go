package gitea

import (
	"context"
	"strconv"

	"github.com/fleetlift/fleetlift/internal/forge/github"
)

// timelineEvent is an entry of Gitea's issue timeline: Type "close" and
// "reopen" say who closed or reopened the issue or pull request.
type timelineEvent struct {
	Type string `json:"type"`
	User *struct {
		Login string `json:"login"`
	} `json:"user"`
}

// closedBy reads who closed issue or pull request number from its
// timeline (Gitea's issues have no closed_by): the user of the last
// "close", unless a "reopen" came after it.
func closedBy(ctx context.Context, api *github.API, owner, repo string, number int) (string, error) {
	login := ""
	err := github.List(ctx, api, github.PathEscape("repos", owner, repo, "issues", strconv.Itoa(number), "timeline"), nil, func(e timelineEvent) bool {
		switch e.Type {
		case "close":
			login = ""
			if e.User != nil {
				login = e.User.Login
			}
		case "reopen":
			login = ""
		}
		return true
	})
	return login, err
}
