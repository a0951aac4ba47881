#!/usr/bin/env bash
# The plain manifests in deploy/manifests/ are the Helm chart (deploy/helm/gpushare) rendered
# with its default values, release `gpushare` in namespace `gpushare`, for Kubernetes
# $KUBE_VERSION (which only sets the default kube-scheduler image tag): one file per
# scheduler mode. Never edit them by hand; change the chart and run this.
#   scripts/render-manifests.sh           rewrite deploy/manifests/*.yaml
#   scripts/render-manifests.sh --check   exit 1 when they differ from what the chart renders
# Needs helm (build/e2e/bin/helm, made by scripts/e2e-build.sh, or HELM).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
helm=${HELM:-$repo/build/e2e/bin/helm}
kube_version=${KUBE_VERSION:-v1.37.2}
out=$repo/deploy/manifests
[ -x "$helm" ] || { echo "render-manifests: $helm missing (scripts/e2e-build.sh)" >&2; exit 1; }
check=0
[ "${1:-}" = --check ] && check=1
rc=0
mkdir -p "$out"
for mode in second-scheduler extender; do
  f=$out/gpushare-$mode.yaml
  tmp=$(mktemp)
  {
    echo "# Rendered from deploy/helm/gpushare by scripts/render-manifests.sh (scheduler.mode=$mode,"
    echo "# Kubernetes $kube_version). Do not edit: change the chart and render again."
    echo "# kubectl create namespace gpushare && kubectl apply -f $(basename "$f")"
    "$helm" template gpushare "$repo/deploy/helm/gpushare" -n gpushare --kube-version "$kube_version" \
      --set "scheduler.mode=$mode"
  } >"$tmp"
  if [ $check = 1 ]; then
    if ! diff -q "$tmp" "$f" >/dev/null 2>&1; then
      echo "render-manifests: $f differs from the chart's output (run scripts/render-manifests.sh)" >&2
      diff -u "$f" "$tmp" | head -40 >&2 || true
      rc=1
    fi
    rm -f "$tmp"
  else
    mv "$tmp" "$f"
    chmod 644 "$f"
    echo "render-manifests: $f"
  fi
done
exit $rc
