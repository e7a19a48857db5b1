package mirror_test

import (
	"errors"
	"time"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

const (
	revision = "4d816c4e0b5a9f3c2d1e8f7a6b5c4d3e2f1a0b9c"
	digest   = "sha256:9f2c4e1a7b3d5f60182a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d"
	stale    = "sha256:0000000000005f60182a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d"
	apiPR    = "https://github.com/acme/api/pull/7"
)

var clock = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// everything is a status with a bit of everything: a campaign awaiting
// approval with repositories in every state, a finished task with a pull
// request on the local forge, a campaign that ended with a failed
// repository, an orphaned campaign, an approval record that does not
// apply, an invalid definition file and a failed action.
func everything() reconcile.Status {
	return reconcile.Status{
		Revision: revision,
		Time:     clock,
		Campaigns: []state.Campaign{
			{
				ID: "slog-rollout", Kind: state.KindCampaign, File: "campaigns/slog.yaml",
				SpecDigest:     "sha256:1111111111111111111111111111111111111111111111111111111111111111",
				Spec:           []byte(`{"repositories":[{"url":"https://github.com/acme/api"}]}`),
				SourceRevision: revision, Generation: 2,
				WorkflowID: "campaign/slog-rollout", RunID: "run-2", Phase: state.PhaseAwaitingApproval, Prune: true,
				Usage: &state.Usage{Requests: 14, Tokens: 182000, CostUSD: 1.26, Repositories: 3},
				Repos: []state.Repo{
					{Name: "api", Status: state.RepoCompleted, Branch: "fleetlift/slog", PullRequestURL: apiPR, PullRequestState: state.PullRequestOpen,
						PullRequest: &state.PullRequestStatus{Number: 12, Head: "6dcb09b5b57875f334f61aebed695e2e4193db5e", Base: "main",
							Mergeable: "conflicting", Review: "approved", Checks: "failure", FailedChecks: []string{"ci/build"},
							Foreign: true, CheckedAt: clock.Add(-time.Minute)}},
					{Name: "billing", Status: state.RepoFailed},
					{Name: "payments", Status: state.RepoAwaitingApproval, Branch: "fleetlift/slog"},
					{Name: "search", Status: state.RepoPending},
				},
				PendingApprovals: []state.PendingApproval{{
					Target: "slog-rollout/payments", ResultDigest: digest, Since: clock.Add(-time.Hour),
					WorkflowID: "task/slog-rollout/payments",
					Repos: []state.PendingRepo{{Name: "payments", Files: []state.PendingFile{
						{Path: "main.go", Additions: 10, Deletions: 4},
						{Path: "go.mod", Additions: 3, Deletions: 1},
					}}},
				}},
				AppliedApprovals: []string{"approvals/slog-rollout-api.yaml@" + digest},
			},
			{
				ID: "version-bump", Kind: state.KindTask, File: "campaigns/bump.yaml",
				SpecDigest: "sha256:2222222222222222222222222222222222222222222222222222222222222222",
				Generation: 1, WorkflowID: "task/version-bump", Phase: state.PhaseCompleted, Suspended: true,
				Repos: []state.Repo{{Name: "ledger", Status: state.RepoCompleted, Branch: "fleetlift/release",
					PullRequestURL: "/srv/git/ledger.git#fleetlift/release", PullRequestState: state.PullRequestMerged}},
			},
			{
				ID: "tls-upgrade", Kind: state.KindCampaign, File: "campaigns/tls.yaml",
				SpecDigest: "sha256:3333333333333333333333333333333333333333333333333333333333333333",
				Generation: 1, WorkflowID: "campaign/tls-upgrade", RunID: "run-1",
				Phase: state.PhaseCompletedWithFailures, Message: "1 of 3 repositories failed, 2 completed",
				Repos: []state.Repo{
					{Name: "api", Status: state.RepoCompleted, Branch: "fleetlift/tls", PullRequestURL: "https://github.com/acme/api/pull/9", PullRequestState: state.PullRequestOpen},
					{Name: "billing", Status: state.RepoFailed},
					{Name: "search", Status: state.RepoCompleted, Branch: "fleetlift/tls", PullRequestURL: "https://github.com/acme/search/pull/3", PullRequestState: state.PullRequestMerged},
				},
			},
		},
		Plan: plan.Plan{
			Changes: []plan.Change{
				{ID: "old-cleanup", Kind: spec.KindCampaign, Action: plan.Orphaned, File: "campaigns/old.yaml",
					Reason: "removed from Git; prune is off in fleetlift.yaml"},
				{ID: "slog-rollout", Kind: spec.KindCampaign, Action: plan.Unchanged},
				{ID: "version-bump", Kind: spec.KindTask, Action: plan.Unchanged},
			},
			Approvals: []plan.ApprovalChange{{
				Record: approval.Record{File: "approvals/slog-rollout-payments.yaml", Target: "slog-rollout/payments",
					ResultDigest: stale, By: "alice", Action: approval.Approve},
				Status: plan.ApprovalIgnored, Reason: "the result changed since it was approved", Current: digest,
			}},
			Errors: []*spec.Error{{File: "campaigns/broken.yaml", Line: 4, Column: 8, Field: "title", Msg: "must be a string"}},
		},
		Outcomes: []reconcile.Outcome{
			{ID: "search-cleanup", Action: "create", Err: errors.New("start workflow: deadline exceeded")},
			{ID: "slog-rollout", Action: "update"},
		},
	}
}

// one is a status with one running campaign and nothing else.
func one() reconcile.Status {
	return reconcile.Status{
		Revision: revision,
		Time:     clock,
		Campaigns: []state.Campaign{{
			ID: "slog-rollout", Kind: state.KindCampaign, Generation: 1, Phase: state.PhaseRunning,
			Repos: []state.Repo{{Name: "api", Status: state.RepoRunning}},
		}},
	}
}

// audit is a status with one report campaign that ended with a valid, an
// invalid and an empty report.
func audit() reconcile.Status {
	return reconcile.Status{
		Revision: revision,
		Time:     clock,
		Campaigns: []state.Campaign{{
			ID: "auth-audit", Kind: state.KindCampaign, File: "campaigns/auth-audit.yaml",
			SpecDigest: "sha256:4444444444444444444444444444444444444444444444444444444444444444",
			Spec: []byte(`{"kind":"Campaign","template":{"mode":"report","execution":{"agentic":{"output":{"schema":` +
				`{"required":["score"],"properties":{"auth_library":{"type":"string"},"score":{"type":"integer","maximum":10}}}}}}}}`),
			Generation: 1, WorkflowID: "campaign/auth-audit", RunID: "run-1",
			Phase: state.PhaseCompletedWithFailures, Message: "1 of 3 repositories failed, 2 completed",
			Repos: []state.Repo{
				{Name: "api", Status: state.RepoCompleted}, {Name: "billing", Status: state.RepoFailed}, {Name: "search", Status: state.RepoCompleted},
			},
			Reports: []state.Report{
				{Unit: "search", Repository: "search", Status: state.ReportEmpty, Warning: "the report is empty: a person should look at this repository"},
				{Unit: "api", Repository: "api", Status: state.ReportValid, Frontmatter: []byte(`{"auth_library":"oauth2-proxy","score":8}`),
					Body: "# Authentication audit: api\n\nSessions expire after **15 minutes**.\n"},
				{Unit: "billing", Repository: "billing", Status: state.ReportInvalid, Frontmatter: []byte(`{"auth_library":"custom","score":11}`),
					Raw: "---\nauth_library: custom\nscore: 11\n---\n\n# Audit of billing\n", Error: "frontmatter does not match output.schema: /score: maximum: got 11, want 10",
					ErrorKind: "schema_invalid", ValidationErrors: []string{"/score: maximum: got 11, want 10"}},
			},
		}},
	}
}
