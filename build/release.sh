#!/usr/bin/env bash
# build/release.sh VERSION (make dist VERSION=v0.1.0): the release of
# fleetlift VERSION in dist/,
#
#   fleetlift_VERSION_OS_ARCH.tar.gz for linux and darwin, amd64 and arm64:
#     fleetlift_VERSION_OS_ARCH/{fleetlift,fleetlift-agent,README.md,docs/,schemas/},
#     and fleetlift-jail on linux (the jail needs Linux namespaces: on
#     macOS, local sandboxes run with --sandbox-isolation none, or use
#     Docker)
#   fleetlift_VERSION_OS_ARCH.BINARY.cdx.json: each binary's SBOM
#     (CycloneDX, from the modules the binary links, by cyclonedx-gomod)
#   checksums.txt: the SHA-256 of all of the above, as sha256sum writes them
#   provenance.intoto.json: an in-toto statement of SLSA provenance v1 for
#     every file checksums.txt names: the source commit, the Go toolchain
#     and how they were built (unsigned: the release workflow signs the
#     same subjects with GitHub's attestations)
#
# and the same checksums in .github/actions/setup-fleetlift/checksums.txt:
# commit that file, tag the commit VERSION and push the tag; the release
# workflow (.github/workflows/release.yml) builds the release again,
# checks it is the one committed, and publishes it. The setup-fleetlift
# action at that tag installs exactly these archives. The build is
# reproducible (no cgo, -trimpath, no VCS stamp, archives with fixed times
# and owners, SBOMs without serial number or timestamp), so a release
# built before the commit that records its checksums is the one it
# describes.
#
# GNU tar and sha256sum are needed (Linux). GO names the go command,
# CYCLONEDX_GOMOD the SBOM tool (make dist installs the pinned one).
set -euo pipefail

version=${1:-}
if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "release.sh: want a release version such as v0.1.0, got '$version'" >&2
	exit 2
fi
cd "${FLEETLIFT_ROOT:-$(dirname "$0")/..}"
go=${GO:-go}
sbom=${CYCLONEDX_GOMOD:-bin/cyclonedx-gomod}
if [[ ! -x $sbom ]]; then
	echo "release.sh: no SBOM tool at $sbom (make dist installs it)" >&2
	exit 2
fi

# The commit and its date, for `fleetlift version`: the commit's date,
# not the clock's, keeps the build reproducible.
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
date=$(git log -1 --format=%cI 2>/dev/null || echo unknown)
platforms=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

rm -rf dist
mkdir -p dist
for platform in "${platforms[@]}"; do
	os=${platform%/*} arch=${platform#*/}
	name=fleetlift_${version}_${os}_${arch}
	stage=dist/$name
	mkdir -p "$stage/schemas"
	cmds=(fleetlift fleetlift-agent)
	if [[ $os == linux ]]; then
		cmds+=(fleetlift-jail)
	fi
	for cmd in "${cmds[@]}"; do
		CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$go" build -trimpath -buildvcs=false \
			-ldflags "-s -w -X main.version=$version -X main.commit=$commit -X main.date=$date" -o "$stage/$cmd" "./cmd/$cmd"
		GOOS=$os GOARCH=$arch "$sbom" bin -json -noserial -notimestamp -version "$version" \
			-output "dist/$name.$cmd.cdx.json" "$stage/$cmd"
	done
	cp schemas/fleetlift.cue schemas/*.schema.json "$stage/schemas/"
	cp README.md "$stage/"
	cp -R docs "$stage/"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C dist -cf - "$name" | gzip -n -9 >"dist/$name.tar.gz"
	rm -rf "$stage"
done
(cd dist && sha256sum fleetlift_*.tar.gz fleetlift_*.cdx.json >checksums.txt)

# The provenance: what was built (every file checksums.txt names), from
# what (the commit, the Go toolchain) and how (this script, the version).
subjects=$(awk '{printf "%s\n    {\"name\": \"%s\", \"digest\": {\"sha256\": \"%s\"}}", (NR > 1 ? "," : ""), $2, $1}' dist/checksums.txt)
toolchain=$("$go" env GOVERSION 2>/dev/null || echo unknown)
source="git+https://github.com/fleetlift/fleetlift@refs/tags/$version"
cat >dist/provenance.intoto.json <<EOF
{
  "_type": "https://in-toto.io/Statement/v1",
  "subject": [$subjects
  ],
  "predicateType": "https://slsa.dev/provenance/v1",
  "predicate": {
    "buildDefinition": {
      "buildType": "https://github.com/fleetlift/fleetlift/blob/$commit/build/release.sh",
      "externalParameters": {"version": "$version", "source": "$source"},
      "internalParameters": {"cgo": false, "trimpath": true, "platforms": [$(printf '"%s", ' "${platforms[@]}" | sed 's/, $//')]},
      "resolvedDependencies": [
        {"uri": "$source", "digest": {"gitCommit": "$commit"}},
        {"uri": "pkg:golang/toolchain@$toolchain"}
      ]
    },
    "runDetails": {
      "builder": {"id": "${FLEETLIFT_BUILDER:-make dist}"},
      "metadata": {"startedOn": "$started", "finishedOn": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"}
    }
  }
}
EOF
{
	echo "# The fleetlift release this action installs, written by make dist VERSION=$version."
	cat dist/checksums.txt
} >.github/actions/setup-fleetlift/checksums.txt
echo "dist/: $(cd dist && echo *)"
