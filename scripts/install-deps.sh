#!/usr/bin/env bash
# Installs every Debian bookworm package gpushare needs to build, test and benchmark.
# Idempotent: packages already present are skipped, and apt is only updated when
# something is missing. Run as root (or with sudo available).
#   --build-only   just what building the product needs (the image builds use this:
#                  deploy/images/Containerfile)
set -euo pipefail

BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  protobuf-compiler libprotobuf-dev protobuf-compiler-grpc libgrpc++-dev libgrpc-dev
  libyaml-cpp-dev nlohmann-json3-dev libcurl4-openssl-dev libcpp-httplib-dev libssl-dev
  libcli11-dev libspdlog-dev libfmt-dev
  # prometheus-cpp: the metric types, registry and text exposition of both daemons' /metrics
  # (node/metrics.h, scheduler/metrics.h); both serve it with net/'s own HTTP server (Debian's
  # prometheus-cpp-dev still pulls in civetweb for its exposer, which gpushare does not link).
  prometheus-cpp-dev
)
PACKAGES=(
  "${BUILD_PACKAGES[@]}"
  libgtest-dev libgmock-dev libbenchmark-dev
  valgrind python3 python3-yaml procps
  # openssl: the command-line tool; tests/kube generates a throwaway CA and certificates with it
  # at test time to exercise the client's TLS paths (CA bundle, server name, client certs).
  openssl
  # nghttpd (nghttp2-server): an HTTP/2 server over TLS, as kube-apiserver is; tests/kube checks
  # that the client's requests in flight share one connection as streams.
  nghttp2-server
  # clang and its runtime (libFuzzer): the fuzz targets in fuzz/ (scripts/fuzz.sh, `make test`).
  clang libclang-rt-14-dev
  # clang-format-14: `make format` and the formatting check of `make lint` (scripts/lint.sh);
  # the same clang also builds the -Wthread-safety check of `make lint`.
  clang-format-14
  # The end-to-end cluster (scripts/e2e-cluster.sh, docs/e2e.md): kubelets need a real container
  # runtime (containerd with runc) and pod networking (CNI bridge + host-local, loopback);
  # busybox-static is the one binary in the locally built test images (nothing is pulled).
  # util-linux (unshare, nsenter) gives each kubelet its own mount namespace; iproute2 (ip) puts
  # the nodes' addresses on lo; curl probes the control plane and the pods.
  containerd runc containernetworking-plugins busybox-static util-linux iproute2 curl
  # The e2e cluster's local registry on 127.0.0.1:5000: the mirror, in every node's containerd,
  # of the seed manifests' registries, serving stand-in images under their exact names (a
  # `latest` tag is always pulled, so importing the image into containerd is not enough).
  docker-registry
  # The container images (`make images`, scripts/build-images.sh): buildah builds them from
  # deploy/images/Containerfile, FROM Debian base images that debootstrap makes here.
  buildah debootstrap
  # iptables: the e2e cluster has no kube-proxy; one DNAT rule lets pods reach the API server
  # at the `kubernetes` Service address (the Helm-installed gpushare runs in pods).
  iptables
)

case "${1:-}" in
  "") ;;
  --build-only) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  *) echo "install-deps: unknown argument '$1' (--build-only or nothing)" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
