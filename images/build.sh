#!/usr/bin/env bash
# images/build.sh VERSION IMAGE... builds fleetlift/IMAGE:VERSION and
# fleetlift/IMAGE:dev from images/IMAGE/Dockerfile (make images runs it),
# after images/base.sh has made the base images. Up to date, every step is
# cached and it takes a few seconds.
#
# With PLATFORM=linux/ARCH it builds for that platform instead, as
# fleetlift/IMAGE:VERSION-linux-ARCH only (build/images.sh, for a
# release's multi-platform images): from debian:bookworm-slim-ARCH, which
# images/base.sh makes, where ARCH is not this machine's; the Go stage
# cross-compiles, the rest runs under QEMU.
#
# The builds need BuildKit: a client with the buildx plugin, or Debian's
# docker.io client (20.10), which has it built in. DOCKER names the client;
# by default the first of those found.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 2 ] || { echo "usage: images/build.sh VERSION IMAGE..." >&2; exit 2; }
version=$1
shift

die() { echo "images: $*" >&2; exit 1; }

if [ -z "${DOCKER:-}" ]; then
	if docker buildx version >/dev/null 2>&1; then
		DOCKER=docker
	elif [ -x /usr/bin/docker ] && /usr/bin/docker --version 2>/dev/null | grep -q 'version 20\.10\.'; then
		DOCKER=/usr/bin/docker
	else
		DOCKER=docker
	fi
fi
export DOCKER DOCKER_BUILDKIT=1

command -v "$DOCKER" >/dev/null || die "no Docker client ($DOCKER): apt-get install -y docker.io, or run .ci/run, which installs and starts Docker"
$DOCKER info >/dev/null 2>&1 ||
	die "no Docker engine answers ('$DOCKER info' failed): start one as root with 'dockerd >/var/log/dockerd.log 2>&1 &' (apt-get install -y docker.io), or run .ci/run, which installs and starts it"

native=linux/$(dpkg --print-architecture)
platform=${PLATFORM:-$native}
tags=()
args=()
if [ -n "${PLATFORM:-}" ]; then
	[[ $platform == linux/* ]] || die "PLATFORM=$platform: want linux/ARCH"
	args+=(--platform "$platform")
	if [ "$platform" != "$native" ]; then
		args+=(--build-arg "DEBIAN=debian:bookworm-slim-${platform#linux/}")
	fi
	images/base.sh "$platform"
else
	images/base.sh
fi

# The builds take Go modules from this machine's module cache, served on
# loopback by images/modproxy (go list fetches what the cache lacks).
go list -deps ./cmd/fleetlift ./cmd/fleetlift-agent ./cmd/fleetlift-controller >/dev/null ||
	die "go list of the commands' packages failed: the builds need their modules in $(go env GOMODCACHE)"
go build -o bin/modproxy ./images/modproxy
secret=$(mktemp)
coproc MODPROXY { exec bin/modproxy -dir "$(go env GOMODCACHE)/cache/download"; }
trap 'kill "$MODPROXY_PID" 2>/dev/null || true; rm -f "$secret"' EXIT
read -r proxy <&"${MODPROXY[0]}" || die "modproxy did not start"
echo "$proxy" >"$secret"

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's time, not the clock's: a build of one commit is the same.
created=$(git log -1 --format=%cI 2>/dev/null || echo unknown)
for name in "$@"; do
	[ -f "images/$name/Dockerfile" ] || die "no images/$name/Dockerfile"
	if [ -n "${PLATFORM:-}" ]; then
		names=("fleetlift/$name:$version-${platform//\//-}")
	else
		names=("fleetlift/$name:$version" "fleetlift/$name:dev")
	fi
	tags=()
	for n in "${names[@]}"; do tags+=(-t "$n"); done
	start=$SECONDS
	log=$(mktemp)
	# Host networking: the builds reach the Debian archive as this machine
	# does, and modproxy on loopback.
	if ! $DOCKER build --network host --progress plain \
		--secret id=goproxy,src="$secret" \
		--build-arg VERSION="$version" \
		--build-arg COMMIT="$revision" \
		--build-arg DATE="$created" \
		--label org.opencontainers.image.title="fleetlift/$name" \
		--label org.opencontainers.image.version="$version" \
		--label org.opencontainers.image.revision="$revision" \
		"${args[@]}" "${tags[@]}" \
		-f "images/$name/Dockerfile" . >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		die "building fleetlift/$name:$version for $platform failed (log above)"
	fi
	rm -f "$log"
	size=$($DOCKER image inspect -f '{{.Size}}' "${names[0]}")
	printf 'images: %s, %s, %d MB, %d s\n' "${names[*]}" "$platform" $((size / 1000000)) $((SECONDS - start))
done
