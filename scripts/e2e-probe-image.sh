#!/usr/bin/env bash
# The e2e CUDA probe image gpushare-e2e/cuda-probe:<tag> (docs/e2e.md): the CUDA driver double
# as libcuda.so.1, cuda-probe-dlopen and /probe.sh (e2e/images/cuda-probe/), built with buildah
# FROM the Debian bookworm-slim image of scripts/base-images.sh (made first when missing).
#
#   scripts/e2e-probe-image.sh          build (skipped when current) and write the archive
#                                       build/e2e/images/cuda-probe.tar (docker-archive: for
#                                       `ctr images import`, or e2e/images/push.py)
#   scripts/e2e-probe-image.sh --push   the same, then push to the local registry as
#                                       gpushare-e2e/cuda-probe:<tag> (fails when it does not answer)
#   scripts/e2e-probe-image.sh --name   print gpushare-e2e/cuda-probe:<tag> and nothing else
#
# The tag is the first 12 hex digits of the hash of everything in the image that is not the base
# (the two binaries, probe.sh, the double's config, the Containerfile): a changed double or
# script gets a new tag, so no node runs a stale image from its cache. The last line printed
# (without --name) is the image name as pushed. With the registry as the nodes' docker.io mirror
# (scripts/e2e-cluster.sh), a pod names it `gpushare-e2e/cuda-probe:<tag>`.
#
# Environment:
#   GPUSHARE_BUILD  the CMake build directory holding fakes/cuda/ (default <repo>/build; build
#                   the inputs with `ninja -C build fakecuda cuda-probe-dlopen`)
#   E2E_REGISTRY    the registry for --push (default 127.0.0.1:5000, plain HTTP)
#   E2E_PROBE_TAG   a tag instead of the content hash
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${GPUSHARE_BUILD:-$repo/build}
src=$repo/e2e/images/cuda-probe
out=$repo/build/e2e/images
registry=${E2E_REGISTRY:-127.0.0.1:5000}
repo_name=gpushare-e2e/cuda-probe
log() { echo "e2e-probe-image: $*" >&2; }
die() { log "error: $*"; exit 1; }

mode=build
case ${1:-} in
  '') ;;
  --push) mode=push ;;
  --name) mode=name ;;
  *) die "unknown argument '$1' (want --push or --name)" ;;
esac

lib=$build/fakes/cuda/libcuda.so.1
probe=$build/fakes/cuda/bin/cuda-probe-dlopen
for f in "$lib" "$probe"; do
  [ -f "$f" ] || die "$f missing (ninja -C ${build#"$repo"/} fakecuda cuda-probe-dlopen)"
done
inputs=("$lib" "$probe" "$src/probe.sh" "$src/nvidia-smi" "$src/fake-cuda.conf" "$src/Containerfile")
tag=${E2E_PROBE_TAG:-$(sha256sum "${inputs[@]}" | awk '{print $1}' | sha256sum | cut -c1-12)}
name=$repo_name:$tag
if [ $mode = name ]; then
  echo "$name"
  exit 0
fi

command -v buildah >/dev/null || die "buildah not found (scripts/install-deps.sh)"
archive=$out/cuda-probe.tar
# buildah stores a name without a registry host under localhost/.
local_name=localhost/$name
if buildah inspect --type image "$local_name" >/dev/null 2>&1 && [ -f "$archive" ] &&
   [ "$(cat "$archive.name" 2>/dev/null)" = "$name" ]; then
  log "$name is current ($archive)"
else
  "$repo/scripts/base-images.sh" >&2
  start=$(date +%s)
  mkdir -p "$out"
  ctx=$(mktemp -d "$out/.context.XXXXXX")
  trap 'rm -rf "$ctx"' EXIT
  # The context holds only what the image takes (not the repository: build/ is gigabytes).
  cp "$lib" "$probe" "$src/probe.sh" "$src/nvidia-smi" "$src/fake-cuda.conf" "$ctx/"
  commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
  # No RUN step: nothing runs in a container during the build (so buildah's open-file limit,
  # which `make images` has to pass with --ulimit, does not matter here).
  buildah bud --quiet --build-arg "SOURCE_COMMIT=$commit" -f "$src/Containerfile" -t "$local_name" "$ctx" >/dev/null ||
    die "buildah bud failed"
  rm -f "$archive" "$archive.name"
  buildah push --quiet "$local_name" "docker-archive:$archive:$name" >/dev/null
  echo "$name" >"$archive.name"
  log "built $name in $(( $(date +%s) - start )) s: $(buildah images --format '{{.Size}}' "$local_name" | head -1) in storage, $(du -h "$archive" | cut -f1) as $archive"
fi

if [ $mode = push ]; then
  curl -sf -o /dev/null --max-time 5 "http://$registry/v2/" ||
    die "the registry at $registry does not answer (scripts/e2e-cluster.sh up starts it)"
  buildah push --quiet --tls-verify=false "$local_name" "docker://$registry/$name" >/dev/null ||
    die "pushing $name to $registry failed"
  log "pushed $name to $registry"
fi
echo "$name"
