#!/usr/bin/env bash
# `make images`: builds the gpushare-node and gpushare-scheduler images with buildah from
# the stages of deploy/images/Containerfile (the repository root as context), FROM the Debian base images of
# scripts/base-images.sh (made first when missing), tagged <registry>/<name>:<version> and
# :latest, and saves each as an OCI archive in build/images/<name>.tar. As root.
#   IMAGE_REGISTRY  the images' repository prefix (default docker.io/gpushare, the names
#                   the manifests use)
#   IMAGE_TAG       default: the project version (CMakeLists.txt)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/build/images
registry=${IMAGE_REGISTRY:-docker.io/gpushare}
version=$(sed -n 's/^project(gpushare VERSION \([0-9.]*\) .*/\1/p' "$repo/CMakeLists.txt")
[ -n "$version" ] || { echo "build-images: no version in CMakeLists.txt's project()" >&2; exit 1; }
tag=${IMAGE_TAG:-$version}
commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  commit="$commit-dirty"
fi

[ "$(id -u)" -eq 0 ] || { echo "build-images: must run as root (buildah)" >&2; exit 1; }
"$repo/scripts/base-images.sh"
mkdir -p "$out"
# RUN steps get the open-file limit this shell has (buildah's default asks for more than the
# hard limit of some machines, and runc then fails with "error setting rlimits").
nofile="$(ulimit -Sn):$(ulimit -Hn)"
for name in gpushare-node gpushare-scheduler; do
  start=$(date +%s)
  echo "build-images: $registry/$name:$tag (commit $commit)"
  buildah bud --layers --ulimit "nofile=$nofile" \
    --build-arg "VERSION=$version" --build-arg "GIT_COMMIT=$commit" \
    --target "$name" -f "$repo/deploy/images/Containerfile" -t "$registry/$name:$tag" -t "$registry/$name:latest" \
    "$repo" >"$out/$name.build.log" 2>&1 ||
    { tail -30 "$out/$name.build.log" >&2; echo "build-images: $name failed (log: $out/$name.build.log)" >&2; exit 1; }
  rm -f "$out/$name.tar"
  buildah push --quiet "$registry/$name:$tag" "oci-archive:$out/$name.tar:$registry/$name:$tag" >/dev/null
  echo "build-images: $registry/$name:$tag in $(( $(date +%s) - start )) s;" \
    "$(buildah images --format '{{.Size}}' "$registry/$name:$tag" | head -1) in storage, $(du -h "$out/$name.tar" | cut -f1) as $out/$name.tar"
done
