#!/usr/bin/env bash
# Regenerates the `replace` block of e2e/go.mod from k8s.io/kubernetes' own go.mod.
#
# Why: k8s.io/kubernetes requires each of its staging modules (k8s.io/api, k8s.io/client-go, ...)
# at v0.0.0 and replaces them with ./staging/src/... in its own tree. Those replaces do not apply
# to a module that depends on k8s.io/kubernetes, so we must map every staging module to its
# published version (v0.<minor>.<patch>). The list changes between releases, so it is read from
# the pinned release's go.mod rather than typed by hand.
#
# Usage: e2e/hack/gen-replaces.sh [--check] [k8s-version]
#   (default version: the one e2e/go.mod requires; --check changes nothing and exits 1 when
#   e2e/go.mod's replaces differ from what the script would write)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
target=go.mod
if [ $check = 1 ]; then
  tmpdir=$(mktemp -d)
  trap 'rm -rf "$tmpdir"' EXIT
  cp go.mod "$tmpdir/go.mod"
  target="$tmpdir/go.mod"
fi

k8s_version=${1:-$(go list -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null || true)}
if [ -z "$k8s_version" ]; then
  k8s_version=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' go.mod)
fi
case "$k8s_version" in
  v1.*.*) ;;
  *) echo "gen-replaces: cannot tell the k8s.io/kubernetes version (got '$k8s_version')" >&2; exit 1 ;;
esac
staging_version="v0.${k8s_version#v1.}"

gomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${k8s_version}" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
if [ ! -f "$gomod" ]; then
  echo "gen-replaces: go mod download gave no go.mod for k8s.io/kubernetes@${k8s_version}" >&2
  exit 1
fi

# Every `k8s.io/<name> => ./staging/src/k8s.io/<name>` line of the upstream go.mod.
mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._/-]*\)[[:space:]]*=>[[:space:]]*\./staging/src/.*#\1#p' "$gomod" | sort -u)
if [ ${#staging[@]} -eq 0 ]; then
  echo "gen-replaces: no staging replaces found in $gomod" >&2
  exit 1
fi

# Drop the replaces we made before, then add the current set.
for m in $(sed -n 's#^[[:space:]]*\(replace[[:space:]]\{1,\}\)\{0,1\}\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>.*#\2#p' "$target"); do
  go mod edit -dropreplace="$m" "$target"
done
args=()
for m in "${staging[@]}"; do
  args+=("-replace=${m}=${m}@${staging_version}")
done
go mod edit "${args[@]}" "$target"
if [ $check = 1 ]; then
  if ! diff -u go.mod "$target"; then
    echo "gen-replaces: e2e/go.mod's replaces are not what e2e/hack/gen-replaces.sh writes; run it" >&2
    exit 1
  fi
  echo "gen-replaces: e2e/go.mod has the ${#staging[@]} generated replaces for k8s.io/kubernetes ${k8s_version}"
  exit 0
fi
echo "gen-replaces: ${#staging[@]} staging modules of k8s.io/kubernetes ${k8s_version} -> ${staging_version}"
