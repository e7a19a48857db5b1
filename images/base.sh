#!/usr/bin/env bash
# images/base.sh makes, without a container registry, the base images that
# the FROM lines of images/*/Dockerfile name, so that `docker build` of
# those Dockerfiles, unchanged, works offline:
#
#   debian:bookworm-slim   debootstrap --variant=minbase from the Debian
#                          archive, slimmed as Debian's official slim image
#                          is, then docker import
#   debian:bookworm-slim-ARCH
#                          the same for another platform, linux/ARCH, named
#                          as an argument (images/build.sh with PLATFORM,
#                          for a release's images); its packages configure
#                          under QEMU (apt-get install qemu-user-static)
#   golang:X-bookworm      that image plus ca-certificates, git and this
#                          machine's Go toolchain (go env GOROOT), which
#                          must be Go X
#
# An image whose tag exists is left alone, whether this script made it or
# a registry gave it. The images it makes carry the label
# io.fleetlift.base=images/base.sh. Arguments: platforms, linux/ARCH, to
# make debian:bookworm-slim-ARCH for. Needs root, debootstrap, the Debian
# archive and a Docker engine. DOCKER names the client (default: docker);
# DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR the archive.
set -euo pipefail
cd "$(dirname "$0")/.."

DOCKER=${DOCKER:-docker}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
SUITE=bookworm
LABEL=io.fleetlift.base=images/base.sh

say() { echo "base.sh: $*" >&2; }
die() { say "$*"; exit 1; }

exists() { $DOCKER image inspect "$1" >/dev/null 2>&1; }

# rootfs is the directory debootstrap fills; cleanup unmounts whatever
# debootstrap left mounted in it before removing it.
rootfs=
cleanup() {
	[ -n "$rootfs" ] && [ -d "$rootfs" ] || return 0
	awk -v r="$rootfs/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
		umount -l "$m" || true
	done
	rm -rf --one-file-system "$rootfs"
}
trap cleanup EXIT

# debian_slim makes debian:bookworm-slim, or with an architecture other
# than this machine's (dpkg's name: arm64) that architecture's as TAG.
debian_slim() {
	local tag=$1 arch=${2:-$(dpkg --print-architecture)}
	[ "$(id -u)" = 0 ] || die "debootstrap needs root to make $tag: run as root (or, where a registry is reachable, docker pull --platform linux/$arch debian:$SUITE-slim)"
	command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install -y debootstrap"
	local took="about 30 s"
	if [ "$arch" != "$(dpkg --print-architecture)" ]; then
		# Its packages' scripts run under QEMU, which binfmt_misc starts
		# for the architecture's executables.
		local qemu=$arch
		case $arch in arm64) qemu=aarch64 ;; amd64) qemu=x86_64 ;; esac
		grep -qx enabled "/proc/sys/fs/binfmt_misc/qemu-$qemu" 2>/dev/null ||
			die "$tag needs QEMU for $arch programs: apt-get install -y qemu-user-static binfmt-support (where /proc/sys/fs/binfmt_misc is not mounted: mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc, then update-binfmts --enable qemu-$qemu)"
		took="a few minutes: its packages configure under QEMU"
	fi
	rootfs=$(mktemp -d /var/tmp/fleetlift-rootfs.XXXXXX)
	say "debootstrap --variant=minbase --arch=$arch $SUITE from $MIRROR ($took)"
	debootstrap --variant=minbase --arch="$arch" "$SUITE" "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 ||
		{ cat "$rootfs.log" >&2; rm -f "$rootfs.log"; die "debootstrap $SUITE failed (log above)"; }
	rm -f "$rootfs.log"

	# What Debian's official slim image does: keep documentation, manual
	# pages and translations out, now and for every package installed later,
	# and keep apt's caches out of image layers.
	cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<-'EOF'
	# The "slim" variant: files containers need not have are left out.
	path-exclude /usr/share/doc/*
	path-include /usr/share/doc/*/copyright
	path-exclude /usr/share/groff/*
	path-exclude /usr/share/info/*
	path-exclude /usr/share/linda/*
	path-exclude /usr/share/lintian/overrides/*
	path-exclude /usr/share/locale/*
	path-exclude /usr/share/man/*
	EOF
	cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<-'EOF'
	DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
	APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
	Dir::Cache::pkgcache "";
	Dir::Cache::srcpkgcache "";
	EOF
	echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
	echo 'Acquire::GzipIndexes "true";' >"$rootfs/etc/apt/apt.conf.d/docker-gzip-indexes"
	echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
	printf '#!/bin/sh\n# No service starts while an image is built.\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
	chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
	rm -f "$rootfs/etc/apt/sources.list"
	cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<-EOF
	Types: deb
	URIs: $MIRROR
	Suites: $SUITE $SUITE-updates
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

	Types: deb
	URIs: $SECURITY_MIRROR
	Suites: $SUITE-security
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	# The engine provides these per container; debootstrap copied the
	# host's.
	rm -f "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
	: >"$rootfs/etc/machine-id"
	find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
	find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
	rm -rf "$rootfs"/usr/share/{man,info,groff,linda,locale}/* "$rootfs"/usr/share/lintian/overrides/* \
		"$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
		"$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/root/.cache

	# docker load of an image whose config names its platform: docker
	# import would label any rootfs with this machine's architecture, and
	# BuildKit would then look for another's in a registry.
	say "docker load as $tag"
	local image=$rootfs.image
	mkdir -p "$image"
	tar --numeric-owner -C "$rootfs" -cf "$image/layer.tar" .
	local diff config
	diff=$(sha256sum "$image/layer.tar" | cut -d' ' -f1)
	cat >"$image/config.json" <<-EOF
	{"architecture": "$arch", "os": "linux",
	 "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["bash"], "Labels": {"${LABEL%%=*}": "${LABEL#*=}"}},
	 "rootfs": {"type": "layers", "diff_ids": ["sha256:$diff"]}}
	EOF
	config=$(sha256sum "$image/config.json" | cut -d' ' -f1)
	mv "$image/config.json" "$image/$config.json"
	echo "[{\"Config\": \"$config.json\", \"RepoTags\": [\"$tag\"], \"Layers\": [\"layer.tar\"]}]" >"$image/manifest.json"
	tar -C "$image" -cf - . | $DOCKER load >/dev/null
	rm -rf "$image"
	cleanup
	rootfs=
}

# golang makes golang:X-bookworm from debian:bookworm-slim and GOROOT.
golang() {
	local tag=$1 want goroot have
	want=${tag#golang:}
	want=${want%-bookworm}
	command -v go >/dev/null || die "go is missing: $tag is made from this machine's Go toolchain"
	goroot=$(go env GOROOT)
	have=$(go env GOVERSION)
	have=${have#go}
	case "$have" in
	"$want" | "$want".*) ;;
	*) die "$tag wants Go $want, this machine has Go $have: change the Dockerfiles' FROM to golang:${have%.*}-bookworm" ;;
	esac
	say "building $tag from debian:$SUITE-slim and $goroot (Go $have)"
	local log
	log=$(mktemp)
	if ! $DOCKER build --network host --label "$LABEL" -t "$tag" -f - "$goroot" >"$log" 2>&1 <<-EOF; then
	FROM debian:$SUITE-slim
	RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates git && rm -rf /var/lib/apt/lists/*
	ENV GOLANG_VERSION=$have GOTOOLCHAIN=local GOPATH=/go
	ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	COPY . /usr/local/go
	WORKDIR /go
	EOF
		cat "$log" >&2
		rm -f "$log"
		die "building $tag failed (log above)"
	fi
	rm -f "$log"
}

# The image of each FROM line, past flags such as --platform.
# A FROM of a build argument (${DEBIAN}) names debian:bookworm-slim by
# default, made first.
froms=$(awk '$1 == "FROM" { for (i = 2; i <= NF; i++) if ($i !~ /^--/) { if ($i !~ /^\$/) print $i; break } }' images/*/Dockerfile | sort -u)
[ -n "$froms" ] || die "no FROM line in images/*/Dockerfile"
# Debian first: the Go image is made from it.
for tag in "debian:$SUITE-slim" $froms; do
	exists "$tag" && continue
	case "$tag" in
	scratch) ;;
	"debian:$SUITE-slim") debian_slim "$tag" ;;
	golang:*-"$SUITE") golang "$tag" ;;
	*) die "no recipe for FROM $tag: add one to images/base.sh" ;;
	esac
done

# The tool images examples/local names, so that they run in Docker
# sandboxes here too: golang:X is golang:X-bookworm.
for tag in $(awk '$1 == "image:" { print $2 }' examples/local/*.yaml | sort -u); do
	exists "$tag" && continue
	case "$tag" in
	golang:*-*) ;;
	golang:*)
		exists "$tag-$SUITE" || golang "$tag-$SUITE"
		$DOCKER tag "$tag-$SUITE" "$tag"
		say "tagged $tag-$SUITE as $tag"
		;;
	"debian:$SUITE-slim") ;;
	*) die "examples/local names image $tag, which this machine cannot make (no registry is reachable): add a recipe to images/base.sh" ;;
	esac
done

# Another platform's Debian, for images/build.sh with PLATFORM.
for platform in "$@"; do
	case "$platform" in
	linux/*) ;;
	*) die "no recipe for platform $platform: want linux/ARCH" ;;
	esac
	arch=${platform#linux/}
	[ "$arch" = "$(dpkg --print-architecture)" ] && continue
	exists "debian:$SUITE-slim-$arch" || debian_slim "debian:$SUITE-slim-$arch" "$arch"
done
