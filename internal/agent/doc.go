// Package agent is the pipeline fleetlift-agent runs inside a sandbox. It
// waits for <workspace>/.fleetlift/manifest.json, then clones the
// repositories, runs their setup commands, transforms them (a
// deterministic command, or an agent CLI such as Claude Code given the
// prompt), runs the verifiers, collects diffs or reports, waits for
// steering when approval is required, and opens pull requests through a
// forge. It reports through status.json and result.json, written
// atomically, and takes instructions from steering.json (package protocol,
// seed 000).
//
// # Layout
//
// Repositories are cloned into <workspace>/<name>. With a transformation
// (recipe) repository, seed 001's layout: the recipe's files are the
// workspace's own (its .claude/skills/, CLAUDE.md and bin/ at the root,
// where the agent CLI starts and finds them) and the targets go to
// <workspace>/targets/<name>. The recipe is cloned aside and moved into
// the root, which already holds the protocol directory; a recipe with a
// top-level .fleetlift or targets is refused, and the recipe's git
// ignores both. Names are checked again and no path component may be a
// symbolic link. Deterministic commands run in each repository (each
// target). The agent CLI runs in each repository, or once in the
// workspace for the transformation + targets layout; reports are
// REPORT.md in the directory it runs in (or its standard output with
// output.capture "stdout").
//
// # Agent CLI
//
// Options.AgentCLI, else the JSON array argv in FLEETLIFT_AGENT_CLI, else
// Options.Agents[name], else DefaultAgents ("claude-code": claude -p
// --output-format text --permission-mode acceptEdits). The prompt is on
// standard input and in the file named by FLEETLIFT_PROMPT_FILE; it ends
// with the verifier instructions, the REPORT.md instructions in report
// mode, reviewer feedback after a steer and verifier output after a failed
// attempt. FLEETLIFT_ITERATION is the steering iteration.
//
// # Outcomes
//
// A repository is success, failed, or skipped (a transform that changed
// nothing: no commit, no pull request). The run fails when every
// repository failed (for a report over targets: when the report failed),
// otherwise it completes with the failures recorded per repository. With
// require_approval the run waits in awaiting_input even when repositories
// failed, so a reviewer can steer. Agentic runs retry on failing
// verifiers within limits.max_iterations and limits.max_verifier_retries
// and stop after three attempts that change nothing. timeout_seconds
// bounds each stretch of work (the first run, each steer, pushing), never
// the wait for input. Report mode collects reports, not diffs, and never
// pushes; as seed 001's failure table says, a missing report fails (its
// error quotes the end of the agent's output), so does one whose
// frontmatter does not parse (with the raw text kept), or is missing when
// there is an output.schema, and an empty one is kept with a warning for
// a person to look at. Whether frontmatter matches output.schema is the
// worker's to check (activity.ReportCheck), not the sandbox's. A steer whose iteration was already applied is ignored, so a
// retried write of steering.json does not steer twice.
//
// # Safety
//
// Every command runs in its own process group, which is killed when the
// command ends, on timeout and on cancel: nothing it starts outlives it
// (short of leaving the group on purpose, which only the sandbox stops).
// Git runs through package git, so hooks and filters never run, and its
// ssh reads no configuration. The agent trusts nothing the work left in a
// repository: before it reads or pushes one after work ran there, it
// checks that it is the directory it cloned (no path component a
// symbolic link, the same inode, the same .git directory), that .git
// holds only files and directories and nothing that points git elsewhere
// (commondir, alternates, grafts), and that .git/config is the one it
// wrote; otherwise the run fails and nothing is pushed. The git
// token is removed from the environment of every command but git's remote
// operations, and the values of secret-looking variables (*TOKEN*,
// *SECRET*, *PASSWORD*, *API_KEY*, ...) and URL user-info are replaced by
// REDACTED in status, results and logs.
//
// agent imports protocol, forge (the interface only), git, a YAML parser
// and a JSON Schema validator (with its message printer). It must not import Temporal, the sandbox
// providers or forge adapters: the command wires forges through
// Options.Forges (see agentcmd).
package agent
