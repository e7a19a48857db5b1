package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// prRecordRef is where the local forge keeps a branch's pull request
// record (forge/local.RecordRefPrefix).
const prRecordRef = "refs/fleetlift/pr/"

// inspect reads what a target repository holds: its branches besides the
// base, and whether the expected branch is correct.
func inspect(ctx context.Context, fx *fixture, name string) (Refs, error) {
	bare := filepath.Join(fx.targets, name+".git")
	r := Refs{Name: name}
	out, err := gitAs(ctx, bare, author, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads/")
	if err != nil {
		return r, err
	}
	found := false
	for _, b := range strings.Fields(out) {
		if b == baseBranch {
			continue
		}
		r.Branches = append(r.Branches, b)
		found = found || b == expectedBranch
	}
	if !found {
		r.Why = "no branch " + expectedBranch
		return r, nil
	}
	r.Why, r.Recorded = checkBranch(ctx, bare, name)
	r.Correct = r.Why == ""
	return r, nil
}

// checkBranch says what is wrong with the expected branch of the bare
// repository: "" when it is one commit on the current base that changes
// go.mod alone, to exactly the expected content (which the campaign's
// verifier accepts), and its pull request record names that commit. It
// also returns when the record was made, when there is one.
func checkBranch(ctx context.Context, bare, name string) (string, time.Time) {
	rev := func(ref string) string {
		out, err := gitAs(ctx, bare, author, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
		if err != nil {
			return ""
		}
		return strings.TrimSpace(out)
	}
	tip, base := rev("refs/heads/"+expectedBranch), rev("refs/heads/"+baseBranch)
	if tip == "" || base == "" {
		return "branch or base unreadable", time.Time{}
	}
	if parent := rev(tip + "^"); parent != base {
		return fmt.Sprintf("branch %s is not one commit on %s", expectedBranch, baseBranch), time.Time{}
	}
	changed, err := gitAs(ctx, bare, author, "diff", "--name-only", base, tip)
	if err != nil {
		return err.Error(), time.Time{}
	}
	if files := strings.Fields(changed); len(files) != 1 || files[0] != "go.mod" {
		return fmt.Sprintf("branch changes %v, not go.mod alone", files), time.Time{}
	}
	mod, err := gitAs(ctx, bare, author, "show", tip+":go.mod")
	if err != nil {
		return err.Error(), time.Time{}
	}
	if mod != goMod(name, "1.26") {
		return fmt.Sprintf("go.mod on the branch is %q", mod), time.Time{}
	}
	rec, err := gitAs(ctx, bare, author, "show", prRecordRef+expectedBranch+":pr.json")
	if err != nil {
		return "no pull request record", time.Time{}
	}
	var pr struct {
		Commit    string    `json:"commit"`
		CreatedAt time.Time `json:"created_at"`
	}
	if err := json.Unmarshal([]byte(rec), &pr); err != nil {
		return "pull request record unreadable: " + err.Error(), time.Time{}
	}
	if pr.Commit != tip {
		return fmt.Sprintf("pull request record names commit %.12s, the branch is at %.12s", pr.Commit, tip), pr.CreatedAt
	}
	return "", pr.CreatedAt
}
