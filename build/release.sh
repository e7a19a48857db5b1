#!/usr/bin/env bash
# build/release.sh VERSION (make dist VERSION=v0.1.0): the release archives
# of fleetlift VERSION in dist/,
#
#   fleetlift_VERSION_linux_amd64.tar.gz, fleetlift_VERSION_linux_arm64.tar.gz
#     fleetlift_VERSION_linux_ARCH/{fleetlift,fleetlift-agent,fleetlift-jail,README.md,docs/,schemas/}
#   checksums.txt (SHA-256, as sha256sum writes them)
#
# and the same checksums in .github/actions/setup-fleetlift/checksums.txt:
# commit that file, tag the commit VERSION and attach dist/* to the GitHub
# release VERSION; the setup-fleetlift action at that tag installs exactly
# these archives. The build is reproducible (no cgo, -trimpath, no VCS
# stamp, archives with fixed times and owners), so archives built before
# the commit that records their checksums are the ones it describes.
#
# GNU tar and sha256sum are needed (Linux). GO names the go command.
set -euo pipefail

version=${1:-}
if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "release.sh: want a release version such as v0.1.0, got '$version'" >&2
	exit 2
fi
cd "${FLEETLIFT_ROOT:-$(dirname "$0")/..}"
go=${GO:-go}

# The commit and its date, for `fleetlift version`: the commit's date,
# not the clock's, keeps the build reproducible.
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
date=$(git log -1 --format=%cI 2>/dev/null || echo unknown)

rm -rf dist
mkdir -p dist
for arch in amd64 arm64; do
	name=fleetlift_${version}_linux_${arch}
	stage=dist/$name
	mkdir -p "$stage/schemas"
	for cmd in fleetlift fleetlift-agent fleetlift-jail; do
		CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$go" build -trimpath -buildvcs=false \
			-ldflags "-s -w -X main.version=$version -X main.commit=$commit -X main.date=$date" -o "$stage/$cmd" "./cmd/$cmd"
	done
	cp schemas/fleetlift.cue schemas/*.schema.json "$stage/schemas/"
	cp README.md "$stage/"
	cp -R docs "$stage/"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C dist -cf - "$name" | gzip -n -9 >"dist/$name.tar.gz"
	rm -rf "$stage"
done
(cd dist && sha256sum fleetlift_*.tar.gz >checksums.txt)
{
	echo "# The fleetlift release this action installs, written by make dist VERSION=$version."
	cat dist/checksums.txt
} >.github/actions/setup-fleetlift/checksums.txt
echo "dist/: $(cd dist && echo *)"
