#!/bin/sh
# A stand-in agent for activity tests: `agent.sh serve --workspace DIR`.
# It waits for the manifest, writes "executing", then the phase named in
# the manifest's title, and exits with the code in the manifest's task_id
# ("exit-N") or stays alive.
ws="$3"
while [ ! -f "$ws/.fleetlift/manifest.json" ]; do sleep 0.05; done
m=$(cat "$ws/.fleetlift/manifest.json")
phase=$(printf '%s' "$m" | sed -n 's/.*"title": *"\([a-z_]*\)".*/\1/p')
task=$(printf '%s' "$m" | sed -n 's/.*"task_id": *"\([a-z0-9-]*\)".*/\1/p')
printf '{"phase":"executing","iteration":0}' > "$ws/.fleetlift/status.tmp" && mv "$ws/.fleetlift/status.tmp" "$ws/.fleetlift/status.json"
sleep 0.3
# A task named slow-N stays executing N seconds more.
case "$task" in
  slow-*) sleep "${task#slow-}" ;;
esac
case "$task" in
  exit-*) exit "${task#exit-}" ;;
esac
# The first sandbox of a task named lose-first dies as a killed agent
# would; the one that replaces it (lose-first-1) finishes. Every sandbox
# named lose-all... dies.
# Before dying, the first saves what its model calls used, as the
# gateway saves it beside the protocol files; its replacement is told
# (limits.spent) and reports its own calls.
case "$ws" in
  */lose-first/*) printf '{"requests":2,"input_tokens":900,"cost_usd":0.5}' > "$ws/.fleetlift/usage.json"; exit 9 ;;
  */lose-all*) exit 9 ;;
esac
usage=
case "$ws" in
  */lose-first-1/*)
    case "$m" in
      *'"spent"'*'"requests": 2'*|*'"spent":{"requests":2'*) usage=',"model_usage":{"requests":1,"input_tokens":100,"cost_usd":0.25}' ;;
      *) phase=failed ;;
    esac ;;
esac
# A repository named failing fails the task.
case "$m" in
  *'"name":"failing"'*|*'"name": "failing"'*) phase=failed ;;
esac
# As the real agent does: the result first, then the phase that says it
# is there.
big=$(head -c 3000 /dev/zero | tr '\0' x)
printf '{"status":"%s","repositories":[{"name":"a","status":"success","diffs":[{"path":"one","diff":"%s"},{"path":"two","diff":"%s"}]}],"steering_history":[]%s}' "$phase" "$big" "$big" "$usage" > "$ws/.fleetlift/result.tmp" && mv "$ws/.fleetlift/result.tmp" "$ws/.fleetlift/result.json"
printf '{"phase":"%s","iteration":0}' "$phase" > "$ws/.fleetlift/status.tmp" && mv "$ws/.fleetlift/status.tmp" "$ws/.fleetlift/status.json"
exec sleep 1000
