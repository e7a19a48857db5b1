#!/usr/bin/env bash
# Builds bin/node/{containerd,containerd-shim-runc-v2,ctr,runc} (relative to
# the repository root) from the versions this directory's go.mod pins: the
# container runtime of the real node internal/kubetest/node starts.
# containerd 2 and runc 1.2 or later run user-namespaced pods (hostUsers:
# false), which the agent's jail needs in a pod; Debian's containerd 1.6
# ignores hostUsers. runc links libseccomp (cgo: gcc and libseccomp-dev);
# containerd is built without cgo and without the btrfs snapshotter. It
# does nothing when bin/node/runtime-version records the same versions.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/bin/node"
stamp="$out/runtime-version"
cmds=(containerd containerd-shim-runc-v2 ctr runc)

cd "$here"
want="$(go list -m -f '{{.Path}}@{{.Version}}' github.com/containerd/containerd/v2 github.com/opencontainers/runc | tr '\n' ' ')"

. "$root/tools/stamp.sh"
if up_to_date "$stamp" "$want" "$out" "${cmds[@]}"; then
	exit 0
fi
if ! pkg-config --exists libseccomp 2>/dev/null || ! command -v gcc >/dev/null; then
	echo "runc links libseccomp: run \`apt-get install -y gcc libseccomp-dev pkg-config\`" >&2
	exit 1
fi

echo "building $out/{${cmds[*]}} from $want(about 3 minutes cold)" >&2
mkdir -p "$out"
rm -f "$stamp"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
CGO_ENABLED=1 go build -tags seccomp -o "$tmp/runc" github.com/opencontainers/runc
for c in containerd containerd-shim-runc-v2 ctr; do
	CGO_ENABLED=0 go build -tags no_btrfs -o "$tmp/$c" "github.com/containerd/containerd/v2/cmd/$c"
done
echo "built the runtime in $((SECONDS - start)) s" >&2
for c in "${cmds[@]}"; do
	mv -f "$tmp/$c" "$out/"
done
printf '%s\n' "$want" >"$stamp"
