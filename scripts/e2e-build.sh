#!/usr/bin/env bash
# Builds the upstream binaries the end-to-end tests run (docs/e2e.md) into build/e2e/bin/:
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl  (k8s.io/kubernetes)
#   etcd                                                                    (go.etcd.io/etcd/server/v3)
# at the versions pinned by e2e/go.mod and e2e/go.sum, and
#   helm                                                                    (helm.sh/helm/v4)
# at the version pinned by e2e/helm/go.mod and go.sum (a module of its own, so that helm's
# k8s.io/* requirements never meet e2e/go.mod's staging replaces). Sources come only from the Go
# module proxy. Each part is skipped when its binaries are current: a stamp per part
# (.stamp, .stamp-helm) records the hash of that part's go.mod, go.sum, this script and
# `go version`.
#   kwok                                                                    (sigs.k8s.io/kwok)
# at the version pinned by e2e/kwok/go.mod and go.sum (its own module too), for the scale
# harness only (scripts/e2e-scale.sh builds it with E2E_PARTS=kwok; stamp .stamp-kwok).
#   hami-scheduler                                                          (Project-HAMi/HAMi)
# HAMi's scheduler, the peer measured beside gpushare-scheduler (scripts/e2e-scale-hami.sh), from
# its public source at HAMI_COMMIT: HAMi's own module is not on the Go module proxy, so its
# source comes from HAMI_GIT (a git repository, local or remote, holding that commit); its
# dependencies come from the proxy, pinned by its own go.sum. cgo on: its go-nvml dependency
# does not compile without (nothing calls NVML in the scheduler). Stamp .stamp-hami.
#
# Environment:
#   E2E_BIN      output directory (default: <repo>/build/e2e/bin)
#   E2E_JOBS     parallel compile/link jobs (default: 2; the CI machine has 2 cores and each
#                link of kube-apiserver/kubelet takes about a GiB)
#   E2E_FORCE=1  rebuild even when current
#   E2E_PARTS    which parts to build (default: "kubernetes helm"; "kwok" for the scale harness;
#                "hami" for HAMi's scheduler)
#   HAMI_GIT     where HAMi's source is (default https://github.com/Project-HAMi/HAMi.git)
#   HAMI_COMMIT  the commit built (default 4707fb02c91c545bc7343ce26dba4c32919f9a3e)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mod="$repo/e2e"
helm_mod="$repo/e2e/helm"
kwok_mod="$repo/e2e/kwok"
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

# The hash of the given files, this script and `go version`: what a part's stamp records.
stamp_of() {
  {
    sha256sum "$@" "$repo/scripts/e2e-build.sh" | awk '{print $1}'
    go version
  } | sha256sum | awk '{print $1}'
}

# Whether stamp file $1 holds $2 and every binary named after them exists (and no E2E_FORCE).
is_current() {
  local stamp=$1 want=$2 n
  shift 2
  [ "${E2E_FORCE:-0}" = 1 ] && return 1
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
  for n in "$@"; do [ -x "$bin/$n" ] || return 1; done
}

# In a part's subshell: removes the part's stamp ($1), makes $tmp (removed on exit), starts the clock.
begin_part() {
  mkdir -p "$bin"
  rm -f "$bin/$1"
  tmp=$(mktemp -d "$bin/.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$(date +%s)
}

# finish_part <stamp> <hash> <what>: records the part as current and prints its time.
finish_part() {
  echo "$2" >"$bin/$1"
  echo "e2e-build: $3 done in $(( $(date +%s) - start )) s"
}

build_kubernetes() {
  local want
  want=$(stamp_of "$mod/go.mod" "$mod/go.sum")
  if is_current "$bin/.stamp" "$want" "${names[@]}"; then
    echo "e2e-build: ${names[*]} in $bin are current (stamp $want)"
    return 0
  fi
  (
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
  begin_part .stamp
  go build -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
  # etcd's main package is its module root, go.etcd.io/etcd/server/v3: go names the binary after
  # the last path element before the major-version suffix ("server").
  mv "$tmp/server" "$tmp/etcd"
  for n in "${names[@]}"; do mv -f "$tmp/$n" "$bin/$n"; done
  finish_part .stamp "$want" "${names[*]}"
  )
}

# build_tool stamp module binary package ldflags version-module: one binary of a module of its
# own (helm, kwok), skipped when its stamp is current.
build_tool() {
  local stamp=$1 module=$2 binary=$3 package=$4 ldflags=$5 versioned=$6 want
  want=$(stamp_of "$module/go.mod" "$module/go.sum")
  if is_current "$bin/$stamp" "$want" "$binary"; then
    echo "e2e-build: $binary in $bin is current (stamp $want)"
    return 0
  fi
  (
  cd "$module"
  local version
  version=$(go list -m -f '{{.Version}}' "$versioned")
  echo "e2e-build: building $binary ($versioned $version) into $bin with -p=$jobs"
  begin_part "$stamp"
  go build -ldflags "${ldflags//@VERSION@/$version}" -o "$tmp/$binary" "$package"
  mv -f "$tmp/$binary" "$bin/$binary"
  finish_part "$stamp" "$want" "$binary"
  )
}

# helm from its own module (e2e/helm), stamped as helm's Makefile stamps a release build
# (internal/version: version, metadata empty for a tagged release, gitTreeState). The module
# zip carries no git commit, and helm's `version --short` prints the first 7 characters of
# gitCommit as "+g<sha>", so gitCommit stays empty rather than holding something that is not a
# commit: `helm version --short` prints v4.3.2.
build_helm() {
  local v=helm.sh/helm/v4/internal/version
  build_tool .stamp-helm "$helm_mod" helm helm.sh/helm/v4/cmd/helm \
    "-s -w -X $v.version=@VERSION@ -X $v.metadata= -X $v.gitTreeState=clean" helm.sh/helm/v4
}

# kwok from its own module (e2e/kwok): the module's own consts.Version is its release number
# (0.8.0), so no stamping is needed for `kwok --version`.
build_kwok() {
  build_tool .stamp-kwok "$kwok_mod" kwok sigs.k8s.io/kwok/cmd/kwok "-s -w" sigs.k8s.io/kwok
}

# HAMi's scheduler at HAMI_COMMIT: the tree of that commit from HAMI_GIT (git archive of a local
# repository, else a shallow fetch of that commit), built with its own go.mod and go.sum.
build_hami() {
  local git=${HAMI_GIT:-https://github.com/Project-HAMi/HAMi.git}
  local commit=${HAMI_COMMIT:-4707fb02c91c545bc7343ce26dba4c32919f9a3e} want
  [[ $commit =~ ^[0-9a-f]{40}$ ]] || { echo "e2e-build: HAMI_COMMIT must be a full commit hash, not '$commit'" >&2; exit 1; }
  want=$( { echo "$commit"; stamp_of /dev/null; } | sha256sum | awk '{print $1}')
  if is_current "$bin/.stamp-hami" "$want" hami-scheduler hami-chart; then
    echo "e2e-build: hami-scheduler in $bin is current (HAMi $commit)"
    return 0
  fi
  (
  begin_part .stamp-hami
  echo "e2e-build: building hami-scheduler (Project-HAMi/HAMi $commit from $git) into $bin with -p=$jobs"
  mkdir -p "$tmp/src"
  if git --git-dir="$git" cat-file -e "$commit^{commit}" 2>/dev/null; then
    git --git-dir="$git" archive "$commit" | tar -x -C "$tmp/src"
  elif [ -d "$git/.git" ] && git -C "$git" cat-file -e "$commit^{commit}" 2>/dev/null; then
    git -C "$git" archive "$commit" | tar -x -C "$tmp/src"
  else
    git -C "$tmp/src" init -q && git -C "$tmp/src" fetch -q --depth 1 "$git" "$commit" &&
      git -C "$tmp/src" checkout -q FETCH_HEAD || {
      echo "e2e-build: HAMi's source at $commit is not in HAMI_GIT=$git (a git repository holding that commit, local or remote)" >&2
      exit 1
    }
  fi
  (cd "$tmp/src" && CGO_ENABLED=1 go build -o "$tmp/hami-scheduler" ./cmd/scheduler)
  mv -f "$tmp/hami-scheduler" "$bin/hami-scheduler"
  # Its chart too: the harness renders HAMi's device config and scheduler configuration from it.
  rm -rf "$bin/hami-chart"
  mv "$tmp/src/charts/hami" "$bin/hami-chart"
  echo "$commit" >"$bin/hami-scheduler.commit"
  finish_part .stamp-hami "$want" hami-scheduler
  )
}

for part in ${E2E_PARTS:-kubernetes helm}; do
  case $part in
    kubernetes) build_kubernetes ;;
    helm) build_helm ;;
    kwok) build_kwok ;;
    hami) build_hami ;;
    *) echo "e2e-build: unknown part '$part' in E2E_PARTS (want kubernetes, helm, kwok, hami)" >&2; exit 1 ;;
  esac
done
