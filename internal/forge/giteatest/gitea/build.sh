#!/usr/bin/env bash
# Builds bin/gitea (relative to the repository root) from the Gitea version
# pinned in this directory's go.mod. It does nothing when bin/gitea.version already
# records the same version and build tags, so it is cheap to call from make.
# A cold build takes about 6.5 minutes on 2 cores; it needs CGO (gcc,
# libc6-dev) for SQLite, whose C source comes with the Go module.
#
# The binary is built without Gitea's bindata tag, so it reads its templates
# and options at run time from Gitea's module source (STATIC_ROOT_PATH);
# internal/forge/giteatest finds that in the module cache. This script keeps
# it downloaded.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
out="$root/bin/gitea"
stamp="$root/bin/gitea.version"
tags="sqlite sqlite_unlock_notify"

cd "$here"
version="$(go list -m -f '{{.Version}}' code.gitea.io/gitea)"
want="code.gitea.io/gitea@$version tags=$tags"

# Templates and options for STATIC_ROOT_PATH; a no-op when already cached.
go mod download code.gitea.io/gitea

if [[ -x "$out" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	exit 0
fi

echo "building $out from $want" >&2
mkdir -p "$root/bin"
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
CGO_ENABLED=1 go build \
	-tags "$tags" \
	-ldflags "-s -w -X 'main.Version=${version#v}' -X 'main.Tags=$tags'" \
	-o "$tmp" code.gitea.io/gitea
mv -f "$tmp" "$out"
printf '%s\n' "$want" >"$stamp"
