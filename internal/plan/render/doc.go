// Package render shows one plan.Plan three ways: Human for a terminal,
// JSON for machines, Markdown for a pull-request comment. The views only
// present; every decision is in the Plan.
//
// # Human
//
// One block per campaign that changes (or is orphaned, pruned or unknown),
// marked "+" create, "~" update / suspend / resume, "-" prune / orphaned,
// "!" unknown and errors; per-field diffs as
// `~ template.execution.agentic.prompt: "old" → "new"` with long values
// shortened around what changed; the repositories added and removed; then
// the errors, the approvals ("✓" applies, "✗" ignored, with the reason),
// what the plan assumed when it could not read the recorded state
// ("Assumed: …"), and a last line such as
//
//	Plan: 2 to create, 1 to update, 0 to prune, 1 orphaned.
//
// or "No changes." Suspend and resume count as updates in that line.
// Colours (ANSI) only with Options.Color: the caller decides, from
// whether the output is a terminal.
//
// # JSON (format_version 1)
//
// A single object, indented, field names stable; fields never disappear
// within a format version, lists are [] rather than null, and fields
// marked optional are left out when empty.
//
//	{
//	  "format_version": 1,
//	  "has_changes": true,            // what --detailed-exitcode uses
//	  "summary": {
//	    "create": 1, "update": 1, "suspend": 0, "resume": 0,
//	    "unchanged": 3, "prune": 0, "orphaned": 1, "unknown": 0,
//	    "approvals_applied": 1, "approvals_ignored": 1, "approvals_done": 0,
//	    "errors": 0
//	  },
//	  "campaigns": [                  // every id, desired or recorded, sorted by id
//	    {
//	      "id": "slog-rollout",
//	      "kind": "Campaign",         // "Task" | "Campaign"
//	      "action": "update",         // create | update | suspend | resume |
//	                                  // unchanged | orphaned | prune | unknown
//	      "file": "campaigns/slog.yaml",
//	      "previous_file": "…",       // optional: the file before a rename
//	      "old_digest": "sha256:…",   // optional: recorded spec digest
//	      "new_digest": "sha256:…",   // optional: desired spec digest
//	      "strategy": "in_place",     // optional: in_place | restart, when the spec changed
//	      "suspend": false,           // the desired spec's suspend
//	      "phase": "running",         // optional: the recorded run's phase: pending | running |
//	                                  // awaiting_approval | paused | suspended | completed |
//	                                  // completed_with_failures | failed | aborted | cancelled
//	      "reason": "…",              // optional: why orphaned rather than pruned, or unknown
//	      "fields_known": true,       // false: the recorded spec is unknown, fields is empty
//	      "fields": [                 // per-field diff, sorted by path
//	        {"path": "template.execution.agentic.prompt",
//	         "old": "Migrate…",       // optional: any JSON value; absent = field absent
//	         "new": "Migrate…"}       // optional: likewise
//	      ],
//	      "repositories": {"added": ["billing"], "removed": ["search"]}
//	    }
//	  ],
//	  "approvals": [                  // every approval record, sorted by target and file
//	    {
//	      "file": "approvals/payments.yaml",
//	      "target": "slog-rollout/payments",
//	      "action": "approve",        // approve | reject | steer | continue | abort | retry
//	      "by": "alice",
//	      "result_digest": "sha256:…", // optional
//	      "generation": 2,            // optional: the run it decides about
//	      "prompt": "…",              // optional (steer)
//	      "status": "apply",          // apply | ignored | done (carried out already)
//	      "reason": "…",              // optional: why ignored, or done
//	      "current_digest": "sha256:…" // optional: the result awaiting approval now
//	    }
//	  ],
//	  "errors": [                     // invalid definition files, sorted by file and position
//	    {"file": "campaigns/broken.yaml", "line": 4, "column": 8,
//	     "field": "title", "message": "…"}   // line, column, field optional
//	  ],
//	  "recorded_state": {             // optional: the recorded state planned against
//	    "source": "none",             // temporal | file:PATH | none
//	    "assumed": "…"                // optional: what the plan assumed for want of it
//	  }
//	}
//
// # Markdown
//
// For a pull-request comment: a heading, the summary line, a table of the
// campaigns that change (with action and file), then a collapsible
// <details> per campaign with its field diff and its repositories (as
// diff blocks), the errors as file:line:col, and the approvals.
//
// Human shows text from the repository and the recorded state through
// package visible: control characters are shown, never obeyed.
//
// render imports plan, visible and the standard library only: no SDK, no
// terminal library (the caller says whether to colour), no state store.
package render
