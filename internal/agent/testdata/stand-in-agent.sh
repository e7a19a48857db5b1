#!/bin/sh
# A stand-in for an agent CLI such as Claude Code, for tests. Like the real
# one it reads the prompt on standard input and edits files in its working
# directory. Words in the prompt choose what it does:
#
#   do-nothing       change nothing at all
#   fix-on-feedback  create fixed.txt, but only once the prompt carries
#                    verifier feedback
#   write-report     write REPORT.md (frontmatter names the for_each target)
#   print-report     print the report on standard output instead
#   report-from-repo write REPORT.md with what the repository's report.src
#                    holds (so each repository of a campaign reports its own)
#   dump-env         write its environment to AGENT_ENV.txt
#   call-model       call the Messages API at $ANTHROPIC_BASE_URL with
#                    $ANTHROPIC_API_KEY and write the answer to MODEL.txt
#   edit-targets     append "edited by the agent" to targets/*/README.md
#   check-recipe     fail (status 5) unless its working directory holds the
#                    recipe as seed 001 lays it out (.claude/skills/,
#                    CLAUDE.md, bin/, targets/) and status.json in the
#                    protocol directory is hidden from it
#   fail-agent       exit with status 4
#
# Unless told to do nothing it appends the iteration, the attempt and the
# whole prompt to AGENT_LOG.md, so tests can see what reached it.
set -eu
prompt=$(cat)
if [ "$prompt" != "$(cat "$FLEETLIFT_PROMPT_FILE")" ]; then
	echo "stdin and FLEETLIFT_PROMPT_FILE differ" >&2
	exit 3
fi
case "$prompt" in
*check-recipe*)
	for want in .claude/skills CLAUDE.md bin targets; do
		[ -e "$want" ] || { echo "no $want in $(pwd)" >&2; exit 5; }
	done
	if [ -s .fleetlift/status.json ]; then
		echo "status.json is readable in $(pwd)/.fleetlift" >&2
		exit 5
	fi ;;
esac
case "$prompt" in *fail-agent*) echo "giving up" >&2; exit 4 ;; esac
case "$prompt" in *do-nothing*) echo "nothing to do"; exit 0 ;; esac

printf '## iteration=%s attempt=%s\n%s\n' "${FLEETLIFT_ITERATION:-}" "${FLEETLIFT_ATTEMPT:-}" "$prompt" >> AGENT_LOG.md

case "$prompt" in
*fix-on-feedback*)
	case "$prompt" in *"verifiers failed"*) echo fixed > fixed.txt ;; esac ;;
esac
case "$prompt" in *dump-env*) env > AGENT_ENV.txt ;; esac
case "$prompt" in
*call-model*)
	curl -sS -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' \
		-d '{"model":"m","max_tokens":1,"messages":[]}' "$ANTHROPIC_BASE_URL/v1/messages" > MODEL.txt ;;
esac
case "$prompt" in
*edit-targets*)
	for t in targets/*/; do echo "edited by the agent" >> "$t/README.md"; done ;;
esac

report() {
	first_line=$(printf '%s\n' "$prompt" | head -n 1)
	cat <<REPORT
---
target: ${FLEETLIFT_FOR_EACH_NAME:-none}
score: 7
---

# Report on ${FLEETLIFT_FOR_EACH_NAME:-the repository}

Asked: $first_line
REPORT
}
case "$prompt" in *write-report*) report > REPORT.md ;; esac
case "$prompt" in *print-report*) report ;; esac
case "$prompt" in *report-from-repo*) cat report.src > REPORT.md ;; esac
echo "stand-in agent done"
