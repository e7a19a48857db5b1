#!/usr/bin/env bash
# build/images.sh VERSION (make dist runs it after build/release.sh): the
# release's images, one index per image over every platform, and the
# deploy manifests pinned to them, in dist/:
#
#   images/IMAGE/        an OCI image layout holding the index of
#                        fleetlift/IMAGE for linux/amd64 and linux/arm64
#                        (IMAGE: fleetlift, agent, sandbox)
#   images.txt           REGISTRY/IMAGE:VERSION@sha256:DIGEST,
#                        one line per image: the index's digest
#   fleetlift_VERSION_deploy.tar.gz
#                        deploy/'s manifests (base, components, CRDs,
#                        overlays, GitOps objects, monitoring) with
#                        components/images naming each image by that
#                        digest, and the controller allowing exactly that
#                        sandbox image
#   images.sha256        the SHA-256 of the deploy archive and images.txt,
#                        as sha256sum writes them
#
# The digests are the content's: the release workflow pushes each layout
# to REGISTRY unchanged (crane push --index; the layout's index.json is
# the image's index), so the references the archive pins are the ones the
# registry serves. The images are built by
# images/build.sh, once per platform (PLATFORM), the Go stages
# cross-compiling and the rest running under QEMU where the platform is
# not this machine's; a loopback registry (crane registry serve) joins
# them into an index. Images are not reproducible (Debian packages move
# on): unlike the archives, their digests are recorded by the release,
# not by the commit it is built from.
#
# REGISTRY (default ghcr.io/fleetlift), PLATFORMS and IMAGES narrow or move
# it, DIST (default dist) is where it goes; CRANE names crane (make dist installs the pinned one), DOCKER the
# Docker client. Needs a Docker engine, and QEMU for a platform other than
# this machine's (images/base.sh says how).
set -euo pipefail

version=${1:-}
if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "images.sh: want a release version such as v0.1.0, got '$version'" >&2
	exit 2
fi
cd "${FLEETLIFT_ROOT:-$(dirname "$0")/..}"
registry=${REGISTRY:-ghcr.io/fleetlift}
read -r -a platforms <<<"${PLATFORMS:-linux/amd64 linux/arm64}"
read -r -a images <<<"${IMAGES:-fleetlift agent sandbox}"
crane=${CRANE:-bin/crane}
dist=${DIST:-dist}
docker=${DOCKER:-docker}
if [ -x /usr/bin/docker ] && [ -z "${DOCKER:-}" ] && /usr/bin/docker --version 2>/dev/null | grep -q 'version 20\.10\.'; then
	docker=/usr/bin/docker # images/build.sh's choice: BuildKit built in
fi

die() { echo "images.sh: $*" >&2; exit 1; }
[ -x "$crane" ] || die "no crane at $crane (make dist installs it)"

for platform in "${platforms[@]}"; do
	PLATFORM=$platform images/build.sh "$version" "${images[@]}"
done

# The loopback registry the indexes are made in, its blobs on disk.
work=$(mktemp -d)
cleanup() {
	[ -n "${REGISTRY_PID:-}" ] && kill "$REGISTRY_PID" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/blobs"
"$crane" registry serve --address 127.0.0.1:0 --disk "$work/blobs" 2>"$work/registry.log" &
REGISTRY_PID=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
	[ -n "$port" ] && break
	kill -0 "$REGISTRY_PID" 2>/dev/null || break
	sleep 0.1
done
[ -n "$port" ] || die "crane registry serve did not start: $(cat "$work/registry.log")"
local=127.0.0.1:$port

rm -rf "$dist/images" "$dist/images.txt" "$dist/images.sha256" "$dist"/fleetlift_*_deploy.tar.gz
mkdir -p "$dist/images"
declare -A digest
for name in "${images[@]}"; do
	manifests=()
	for platform in "${platforms[@]}"; do
		tag=$version-${platform//\//-}
		"$docker" save "fleetlift/$name:$tag" >"$work/image.tar"
		"$crane" push "$work/image.tar" "$local/fleetlift/$name:$tag" >/dev/null
		manifests+=(--manifest "$local/fleetlift/$name:$tag")
	done
	rm -f "$work/image.tar"
	"$crane" index append "${manifests[@]}" --tag "$local/fleetlift/$name:$version" >/dev/null
	digest[$name]=$("$crane" digest "$local/fleetlift/$name:$version")
	"$crane" pull --format oci "$local/fleetlift/$name@${digest[$name]}" "$dist/images/$name"
	# The layout's index.json is the image's index itself, so that crane
	# push --index pushes it as it is, under the same digest (a layout's
	# index.json would otherwise wrap it in an index of its own).
	"$crane" manifest "$local/fleetlift/$name@${digest[$name]}" >"$dist/images/$name/index.json"
	echo "$registry/$name:$version@${digest[$name]}" >>"$dist/images.txt"
done

# deploy/'s manifests, without its Go tests, pinned to the digests.
name=fleetlift_${version}_deploy
stage=$work/$name
mkdir -p "$stage"
tar -C deploy --exclude='*.go' --exclude=go.mod --exclude=go.sum --exclude=testdata -cf - . | tar -C "$stage" -xf -
{
	echo "# The images of fleetlift $version, by digest (build/images.sh wrote"
	echo "# this for the release). The image references in fleetlift-config are"
	echo "# rewritten as containers' are (images-config.yaml)."
	echo "apiVersion: kustomize.config.k8s.io/v1alpha1"
	echo "kind: Component"
	echo "images:"
	for image in fleetlift agent sandbox; do
		[ -n "${digest[$image]:-}" ] || die "no $image image among IMAGES: the deploy manifests name all three"
		echo "  - name: fleetlift/$image"
		echo "    newName: $registry/$image"
		echo "    digest: ${digest[$image]}"
	done
	echo "configurations:"
	echo "  - images-config.yaml"
} >"$stage/components/images/kustomization.yaml"
grep -q '^      - FLEETLIFT_ALLOWED_IMAGES=fleetlift/sandbox:\*$' "$stage/base/kustomization.yaml" ||
	die "deploy/base/kustomization.yaml no longer sets FLEETLIFT_ALLOWED_IMAGES=fleetlift/sandbox:*: update build/images.sh with it"
sed -i "s|^      - FLEETLIFT_ALLOWED_IMAGES=fleetlift/sandbox:\*\$|      - FLEETLIFT_ALLOWED_IMAGES=$registry/sandbox@${digest[sandbox]}|" "$stage/base/kustomization.yaml"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work" -cf - "$name" | gzip -n -9 >"$dist/$name.tar.gz"
(cd "$dist" && sha256sum "$name.tar.gz" images.txt >images.sha256)
echo "$dist/images: ${images[*]} for ${platforms[*]}"
cat "$dist/images.txt"
