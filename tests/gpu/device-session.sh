#!/bin/bash
# device-session.sh: one prepared run on a lent GPU machine (docs/gpu-checks.md).
#
#   tests/gpu/device-session.sh <output dir>
#
# 1. The machine: OS, driver, GPUs, toolkit.
# 2. The deployed-limit scenario of a gpu-mem: "3" container (issue 12), on the real driver:
#    the probe (tests/fakes/native/cuda/cuda_probe.cc, cuda-probe-dlopen: dlopen("libcuda.so.1"),
#    no toolkit needed) with libgpushare-cuda.so preloaded and CUDA_DEVICE_MEMORY_LIMIT_0=3072m,
#    exactly the environment gpushare-node's Allocate answer gives: cuMemGetInfo must report
#    3 GiB total, 256 MiB allocations must succeed up to the limit (less the context) and the next
#    must fail with CUDA_ERROR_OUT_OF_MEMORY (2). Then the same without the library (native).
#    The probe and the library are carried from the CPU machine (build/), or built here with g++
#    when the carried ones cannot run.
# 3. tests/gpu/run-gpu-checks.sh when nvcc is present (its own per-check timeouts).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-/tmp/gpushare-device}
mkdir -p "$OUT/bin"
exec > >(tee "$OUT/session.txt") 2>&1
say() { printf '\n== %s\n' "$*"; }

say "1. machine $(date -u +%FT%TZ)"
grep PRETTY_NAME /etc/os-release; uname -r; nproc; ldd --version | head -1
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,mig.mode.current,compute_cap --format=csv || exit 3
command -v nvcc && nvcc --version | tail -2; ls -d /usr/local/cuda* 2>/dev/null
command -v g++ cc cmake 2>/dev/null

say "2. probe on the real driver"
LIB=$ROOT/build/lib/libgpushare-cuda.so
PROBE=$ROOT/build/fakes/cuda/bin/cuda-probe-dlopen
if ! "$PROBE" init >/dev/null 2>&1; then
  echo "carried probe does not run here ($("$PROBE" init 2>&1 | head -1)); building it"
  PROBE=$OUT/bin/cuda-probe-dlopen
  g++ -std=c++20 -O2 -I"$ROOT" -o "$PROBE" "$ROOT/tests/fakes/native/cuda/cuda_probe.cc" -ldl -lpthread || exit 4
fi
if ! LD_PRELOAD=$LIB /bin/true 2>/dev/null || LD_PRELOAD=$LIB /bin/true 2>&1 | grep -q .; then
  echo "carried library does not load here; building it"
  LIB=$OUT/bin/libgpushare-cuda.so
  "$ROOT/tests/gpu/build-interposer.sh" "$LIB" || exit 4
fi
md5sum "$LIB" "$PROBE"
steps=()
for i in $(seq 1 14); do steps+=("alloc 268435456"); done
for mode in limited native; do
  echo "-- $mode"
  if [ $mode = limited ]; then
    env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT_0=3072m CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/probe.region" \
      GPUSHARE_LOG_LEVEL=2 PROBE_MODE=runtime timeout 60 "$PROBE" init "ctx 0" meminfo "${steps[@]}" meminfo "totalmem 0"
  else
    PROBE_MODE=runtime timeout 60 "$PROBE" init "ctx 0" meminfo "${steps[@]}" meminfo "totalmem 0"
  fi
  echo "rc=$?"
done
echo "-- limited, dlsym mode (a program that dlsyms cuMemAlloc_v2 itself)"
env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT_0=3072m CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/probe2.region" \
  PROBE_MODE=dlsym timeout 60 "$PROBE" init "ctx 0" meminfo "${steps[@]}" meminfo
echo "rc=$?"

if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  say "3. run-gpu-checks.sh"
  BUILD=$ROOT/build timeout 330 "$ROOT/tests/gpu/run-gpu-checks.sh" "$OUT/checks"
  echo "run-gpu-checks rc=$?"
else
  say "3. skipped: no nvcc on this machine"
fi
say "done $(date -u +%FT%TZ)"
# Keep what comes back small: the logs and results, not binaries or region files.
rm -rf "$OUT/bin" "$OUT/checks/bin" "$OUT"/*.region "$OUT/checks"/*.region "$OUT/checks/barrier"
