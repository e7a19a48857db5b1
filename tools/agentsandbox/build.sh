#!/usr/bin/env bash
# Builds bin/node/agent-sandbox-controller (relative to the repository
# root), kubernetes-sigs/agent-sandbox's controller, from the version this
# directory's go.mod pins, which must be the one fleetlift's go.mod requires: the warm-pool
# benchmark (make bench-kube-node) runs it on the real node, serving the
# warm pools fleetlift-controller's agent-sandbox backend claims from. It
# does nothing when bin/node/agent-sandbox-version records the same
# version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/bin/node"
stamp="$out/agent-sandbox-version"
cmd=agent-sandbox-controller

cd "$here"
want="$(go list -m -f '{{.Path}}@{{.Version}}' sigs.k8s.io/agent-sandbox)"
main="$(cd "$root" && go list -m -f '{{.Path}}@{{.Version}}' sigs.k8s.io/agent-sandbox)"
if [[ $want != "$main" ]]; then
	echo "tools/agentsandbox pins $want, fleetlift's go.mod requires $main: pin the same in tools/agentsandbox/go.mod (go get $main && go mod tidy)" >&2
	exit 1
fi

. "$root/tools/stamp.sh"
if up_to_date "$stamp" "$want" "$out" "$cmd"; then
	exit 0
fi
echo "building $out/$cmd from $want (about 2 minutes cold)" >&2
mkdir -p "$out"
rm -f "$stamp"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
CGO_ENABLED=0 go build -o "$tmp/$cmd" "sigs.k8s.io/agent-sandbox/cmd/$cmd"
echo "built $cmd in $((SECONDS - start)) s" >&2
mv -f "$tmp/$cmd" "$out/"
printf '%s\n' "$want" >"$stamp"
