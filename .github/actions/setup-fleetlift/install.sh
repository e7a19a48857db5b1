#!/usr/bin/env bash
# install.sh resolve|install: the steps of the setup-fleetlift action.
#
# checksums.txt beside this script names the fleetlift release the action
# installs (make dist writes it when a release is made, and the release's
# tag pins it): one archive per architecture with its SHA-256. resolve
# picks this runner's archive and says where it is cached; install
# downloads it unless the cache restored it, checks its SHA-256 against
# checksums.txt (always, cached or not), unpacks it and puts fleetlift on
# PATH.
#
# FLEETLIFT_RELEASES is where releases are downloaded from
# (https://github.com/fleetlift/fleetlift/releases/download, then
# VERSION/ARCHIVE).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
releases=${FLEETLIFT_RELEASES:-https://github.com/fleetlift/fleetlift/releases/download}

fail() {
	echo "::error title=setup-fleetlift::$*" >&2
	exit 1
}

os=$(uname -s | tr '[:upper:]' '[:lower:]')
case $(uname -m) in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) arch=$(uname -m) ;;
esac

line=$(grep -E "^[0-9a-f]{64}  fleetlift_v[^ ]+_${os}_${arch}\.tar\.gz$" "$here/checksums.txt" || true)
if [[ -z $line ]]; then
	if ! grep -qE '^[0-9a-f]{64}  ' "$here/checksums.txt"; then
		fail "this action's checksums.txt records no release: use it at a release tag (fleetlift/fleetlift/.github/actions/setup-fleetlift@vX.Y.Z)"
	fi
	fail "the fleetlift release recorded in checksums.txt has no archive for $os/$arch (releases are built for linux and darwin, on amd64 and arm64)"
fi
sum=${line%% *}
file=${line##* }
version=${file#fleetlift_}
version=${version%_"${os}"_"${arch}".tar.gz}
cache=${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}}/fleetlift/$version
archive=$cache/$file

case ${1:-} in
resolve)
	{
		echo "version=$version"
		echo "sha256=$sum"
		echo "archive=$archive"
	} >>"${GITHUB_OUTPUT:-/dev/null}"
	;;
install)
	mkdir -p "$cache"
	if [[ ! -f $archive ]]; then
		echo "downloading $releases/$version/$file"
		curl -fsSL --retry 3 -o "$archive.part" "$releases/$version/$file" || fail "download $releases/$version/$file failed"
		mv "$archive.part" "$archive"
	fi
	if ! echo "$sum  $archive" | sha256sum --check --status; then
		rm -f "$archive"
		fail "$file does not have the SHA-256 checksums.txt records ($sum): not installed"
	fi
	dir=$cache/${file%.tar.gz}
	rm -rf "$dir"
	tar -xzf "$archive" -C "$cache"
	[[ -x $dir/fleetlift ]] || fail "$file holds no fleetlift"
	echo "$dir" >>"${GITHUB_PATH:-/dev/null}"
	echo "version=$version" >>"${GITHUB_OUTPUT:-/dev/null}"
	"$dir/fleetlift" version
	;;
*)
	fail "usage: install.sh resolve|install"
	;;
esac
