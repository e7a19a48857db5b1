#!/usr/bin/env bash
# Builds bin/envtest/kube-apiserver and bin/envtest/etcd (relative to the
# repository root) from the versions pinned in this directory's go.mod: the
# control plane internal/envtest starts for the Kubernetes suites. It does
# nothing when bin/envtest/version already records the same versions, so it
# is cheap to call from make. A cold build takes about 10 minutes on 2 cores.
#
# Both binaries get the version ldflags their release builds carry:
# kube-apiserver refuses to serve with a compatibility version of v0.0.0, and
# etcd reports its version to the API server's health checks.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/bin/envtest"
stamp="$out/version"

cd "$here"
kube="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
want="k8s.io/kubernetes@$kube go.etcd.io/etcd/server/v3@$etcd"

. "$root/tools/stamp.sh"
if up_to_date "$stamp" "$want" "$out" kube-apiserver etcd; then
	exit 0
fi

echo "building $out/{kube-apiserver,etcd} from $want (about 10 minutes cold)" >&2
mkdir -p "$out"
rm -f "$stamp"

. "$here/kubeflags.sh"
kflags="$(kube_ldflags "$kube")"

tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -ldflags "$kflags" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
CGO_ENABLED=0 go build -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd}" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
mv -f "$tmp/kube-apiserver" "$tmp/etcd" "$out/"
printf '%s\n' "$want" >"$stamp"
