#!/usr/bin/env bash
# Builds bin/node/{kubelet,kube-controller-manager,kube-scheduler,kube-proxy}
# (relative to the repository root) from the k8s.io/kubernetes version this
# directory's go.mod pins, the one kube-apiserver in bin/envtest is built
# from: the rest of the real node internal/kubetest/node starts beside the
# envtest control plane. It does nothing when bin/node/version already
# records the same version. They are built one after another with cgo
# off, so that the build takes one package graph's CPU at a time.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/bin/node"
stamp="$out/version"
cmds=(kubelet kube-controller-manager kube-scheduler kube-proxy)

cd "$here"
kube="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
want="k8s.io/kubernetes@$kube"

. "$root/tools/stamp.sh"
if up_to_date "$stamp" "$want" "$out" "${cmds[@]}"; then
	exit 0
fi

echo "building $out/{kubelet,kube-controller-manager,kube-scheduler,kube-proxy} from $want (a few minutes cold)" >&2
mkdir -p "$out"
rm -f "$stamp"

. "$here/kubeflags.sh"
kflags="$(kube_ldflags "$kube")"

tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
for c in "${cmds[@]}"; do
	start=$SECONDS
	CGO_ENABLED=0 go build -ldflags "$kflags" -o "$tmp/$c" "k8s.io/kubernetes/cmd/$c"
	echo "built $c in $((SECONDS - start)) s" >&2
done
for c in "${cmds[@]}"; do
	mv -f "$tmp/$c" "$out/"
done
printf '%s\n' "$want" >"$stamp"
