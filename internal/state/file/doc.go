// Package file is a state.Store kept in one JSON file: the recorded state
// that `fleetlift plan --state file:PATH` reads offline and in CI, and that
// tests and single-machine setups may write.
//
// # Format (version 1)
//
//	{
//	  "version": 1,
//	  "campaigns": [
//	    {
//	      "id": "slog-rollout",
//	      "kind": "Campaign",
//	      "file": "campaigns/slog-rollout.cue",
//	      "spec_digest": "sha256:9f2c…",
//	      "spec": {"version": 1, "kind": "Campaign", "id": "slog-rollout", …},
//	      "source_revision": "4c86450a7d1f0e2b9c3a5d6e7f8091a2b3c4d5e6",
//	      "generation": 3,
//	      "workflow_id": "campaign/slog-rollout",
//	      "run_id": "0196a0c4-7b1e-7c3a-9d2e-5f6a7b8c9d0e",
//	      "phase": "awaiting_approval",
//	      "message": "pull request budget: next start in 12m0s",
//	      "prune": true,
//	      "suspended": false,
//	      "repos": [
//	        {"name": "ledger-svc", "status": "pending"},
//	        {"name": "payments", "status": "awaiting_approval",
//	         "branch": "auto/slog-rollout-payments",
//	         "pull_request_url": "https://github.com/acme/payments/pull/7",
//	         "pull_request_state": "open"}
//	      ],
//	      "pending_approvals": [
//	        {"target": "slog-rollout/payments",
//	         "result_digest": "sha256:5b1e…",
//	         "since": "2026-05-04T10:30:00Z"}
//	      ]
//	    }
//	  ]
//	}
//
// Fields (see state.Campaign for their meaning):
//
//   - version: required, 1. A file of another version is refused, never
//     guessed at.
//   - campaigns: sorted by id; ids are unique.
//   - id, kind ("Task" or "Campaign"), spec_digest, generation, phase:
//     required in practice; id and kind are checked.
//   - phase: pending, running, awaiting_approval, paused, suspended,
//     completed, completed_with_failures, failed, aborted, cancelled.
//   - file, spec, source_revision, workflow_id, run_id, message, prune,
//     suspended, repos, pending_approvals, applied_approvals, reports:
//     optional. Without spec, the plan shows a changed definition as
//     "spec changed (digest a → b)" with no field diff.
//   - reports[].status: valid, empty, invalid, missing, failed, pending,
//     skipped; reports[].frontmatter: a JSON object.
//   - repos[].status: pending, running, awaiting_approval, completed,
//     failed, skipped, cancelled; repos[].pull_request_state: open, merged,
//     closed.
//   - pending_approvals[].since: RFC 3339.
//
// Unknown fields are an error: the file is often written by hand for CI,
// and a misspelt field silently ignored would make a plan lie.
//
// # Reading and writing
//
// A missing file is empty state. An empty, truncated or otherwise invalid
// file is an error that names the file and, for JSON syntax errors, the
// line and column. Every write replaces the whole file atomically: the new
// content goes to a temporary file in the same directory, which is synced
// and renamed over the old one, so a reader sees the old state or the new,
// never half of one. Writes from one Store are serialised; two processes
// writing the same file do not lock it, and the last rename wins.
//
// file imports package state and the standard library only.
package file
