#!/usr/bin/env bash
# The Debian bookworm base images the Containerfiles build FROM, made here from Debian's
# packages (no registry pull): debootstrap's minbase into a root directory, imported into
# buildah's local storage (shared with podman) as docker.io/library/debian:bookworm, and a slim
# variant without documentation, man pages and locales (and a dpkg rule keeping them out of
# later installs) as docker.io/library/debian:bookworm-slim. Skipped when both images exist
# (BASE_FORCE=1 makes them again). As root.
#   DEBIAN_MIRROR  the archive (default: the host's, else http://deb.debian.org/debian)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${BASE_WORK:-$repo/build/images/base}
full=docker.io/library/debian:bookworm
slim=docker.io/library/debian:bookworm-slim
log() { echo "base-images: $*"; }
die() { echo "base-images: error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap)"
for t in debootstrap buildah; do command -v "$t" >/dev/null || die "$t not found; run scripts/install-deps.sh"; done
if [ "${BASE_FORCE:-0}" != 1 ] && buildah inspect --type image "$full" >/dev/null 2>&1 &&
   buildah inspect --type image "$slim" >/dev/null 2>&1; then
  log "$full and $slim exist (BASE_FORCE=1 to make them again)"
  exit 0
fi

mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  mirror=${mirror:-http://deb.debian.org/debian}
fi
security=${mirror%/debian}/debian-security

rm -rf "$work"
mkdir -p "$work"
root="$work/rootfs"
log "debootstrap --variant=minbase bookworm from $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed (log: $work/debootstrap.log)"; }

# What a container image needs that a debootstrap root lacks or should not keep.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
# No daemons start during package installs in an image build.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
# apt keeps no downloaded packages or lists in layers.
printf 'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };\nAPT::Install-Recommends "false";\n' \
  >"$root/etc/apt/apt.conf.d/docker-clean"
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"* "$root/var/log/"*.log \
  "$root/etc/machine-id" "$root/etc/hostname" "$root/etc/resolv.conf"
: >"$root/etc/machine-id"

import() { # dir image
  local ctr
  tar -C "$1" --numeric-owner -cf "$work/rootfs.tar" .
  ctr=$(buildah from scratch)
  buildah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
  buildah config --cmd '["bash"]' --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --label org.opencontainers.image.description="Debian bookworm (debootstrap minbase, made by gpushare's scripts/base-images.sh)" "$ctr"
  buildah commit --quiet --rm "$ctr" "$2" >/dev/null
  rm -f "$work/rootfs.tar"
  log "$2: $(buildah inspect --type image --format '{{.FromImageID}}' "$2" | cut -c1-12)"
}
import "$root" "$full"

# The slim variant: what docker's debian:*-slim leaves out, left out here too.
cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
SLIM
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root/usr/share/man/"* "$root/usr/share/groff/"* "$root/usr/share/info/"* \
  "$root/usr/share/locale/"* "$root/usr/share/lintian/"* "$root/usr/share/linda/"*
import "$root" "$slim"
rm -rf "$root"
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' | grep 'library/debian' || true
