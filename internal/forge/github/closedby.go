package github

import (
	"context"
	"net/http"
	"strconv"
)

// ClosedBy returns the login of who closed pull request number of
// repository, or "" while it is open or when the forge does not say (for
// a merged one, GitHub names who merged it).
func (f *Forge) ClosedBy(ctx context.Context, repository string, number int) (string, error) {
	r, err := f.repository(repository)
	if err != nil {
		return "", err
	}
	if f.dialect.ClosedBy != nil {
		login, err := f.dialect.ClosedBy(ctx, f.api, r.owner, r.name, number)
		if err != nil {
			return "", f.fail(err, "read who closed pull request %d of %s", number, r)
		}
		return login, nil
	}
	// A pull request is an issue too; only the issue says who closed it.
	var issue struct {
		State    string   `json:"state"`
		ClosedBy *account `json:"closed_by"`
	}
	if _, err := f.api.Do(ctx, http.MethodGet, r.path("issues", strconv.Itoa(number)), nil, &issue); err != nil {
		return "", f.fail(err, "read who closed pull request %d of %s", number, r)
	}
	if issue.State != "closed" || issue.ClosedBy == nil {
		return "", nil
	}
	return issue.ClosedBy.Login, nil
}
