#!/usr/bin/env bash
# Builds the upstream binaries the end-to-end tests run (docs/e2e.md) into build/e2e/bin/:
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl  (k8s.io/kubernetes)
#   etcd                                                                    (go.etcd.io/etcd/server/v3)
# at the versions pinned by e2e/go.mod and e2e/go.sum. Sources come only from the Go module
# proxy. The build is skipped when the binaries are current: a stamp records the hash of
# go.mod, go.sum, this script and `go version`.
#
# Environment:
#   E2E_BIN      output directory (default: <repo>/build/e2e/bin)
#   E2E_JOBS     parallel compile/link jobs (default: 2; the CI machine has 2 cores and each
#                link of kube-apiserver/kubelet takes about a GiB)
#   E2E_FORCE=1  rebuild even when current
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mod="$repo/e2e"
bin=${E2E_BIN:-$repo/build/e2e/bin}
jobs=${E2E_JOBS:-2}

if ! command -v go >/dev/null 2>&1; then
  echo "e2e-build: go is not on PATH (Go >= 1.26 is needed for the e2e harness only)" >&2
  exit 1
fi
# Never fetch another Go toolchain; only modules come from the proxy.
export GOTOOLCHAIN=local
export GOFLAGS="-mod=readonly -trimpath -p=${jobs}"
# Upstream's release binaries are static and cgo-free; so are these.
export CGO_ENABLED=0

names=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
pkgs=(
  go.etcd.io/etcd/server/v3
  k8s.io/kubernetes/cmd/kube-apiserver
  k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler
  k8s.io/kubernetes/cmd/kubelet
  k8s.io/kubernetes/cmd/kubectl
)

stamp_now() {
  {
    sha256sum "$mod/go.mod" "$mod/go.sum" "$repo/scripts/e2e-build.sh" | awk '{print $1}'
    go version
  } | sha256sum | awk '{print $1}'
}

want=$(stamp_now)
current=1
[ "${E2E_FORCE:-0}" = 1 ] && current=0
[ -f "$bin/.stamp" ] && [ "$(cat "$bin/.stamp")" = "$want" ] || current=0
for n in "${names[@]}"; do [ -x "$bin/$n" ] || current=0; done
if [ $current = 1 ]; then
  echo "e2e-build: binaries in $bin are current (stamp $want)"
  exit 0
fi

cd "$mod"
# The replaces must be the generated ones (e2e/hack/gen-replaces.sh), never hand-edited.
"$mod/hack/gen-replaces.sh" --check >/dev/null
k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
k8s_time=$(go list -m -f '{{.Time}}' k8s.io/kubernetes)
build_date=$(date -u -d "$k8s_time" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 1970-01-01T00:00:00Z)
minor=${k8s_version#v1.}; minor=${minor%%.*}
# What a release build stamps (hack/lib/version.sh upstream), so that nodes report
# kubeletVersion v1.37.2 instead of v0.0.0-master and kubectl sees no version skew.
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitVersion=$k8s_version"
  ldflags+=" -X $p.gitCommit=module-$k8s_version -X $p.gitTreeState=clean -X $p.buildDate=$build_date"
done

echo "e2e-build: building ${names[*]} (k8s.io/kubernetes $k8s_version, etcd $(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)) into $bin with -p=$jobs"
mkdir -p "$bin"
rm -f "$bin/.stamp"
tmp=$(mktemp -d "$bin/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
go build -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
# etcd's main package is its module root, go.etcd.io/etcd/server/v3: go names the binary after
# the last path element before the major-version suffix ("server").
mv "$tmp/server" "$tmp/etcd"
for n in "${names[@]}"; do mv -f "$tmp/$n" "$bin/$n"; done
echo "$want" >"$bin/.stamp"
echo "e2e-build: done in $(( $(date +%s) - start )) s"
