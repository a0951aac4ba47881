#!/bin/bash
# run-gpu-checks.sh: checks libgpushare-cuda.so on a real NVIDIA GPU (docs/gpu-checks.md).
#
#   tests/gpu/run-gpu-checks.sh [output dir]        (BUILD=<build dir>, default build)
#
# Builds tests/gpu/gpu_checks.cu with nvcc and, when $BUILD/lib/libgpushare-cuda.so is absent,
# the library itself with the same flags as interpose/CMakeLists.txt (no CMake needed; `cc`
# links it without the C++ runtime). Then, in
# priority order, each with its own timeout (the whole run stays under ~8 minutes):
#   0 the machine: nvidia-smi, driver, MIG mode, SM count
#   1 symbol routing on the real driver: cuGetProcAddress answers vs dlsym of the versioned
#     names the interposer's table selects (pointer identity), the recorded runtime sequence
#   2 allocation past a 4 GiB limit through every API (malloc, async, pool, pitch, array3d,
#     managed, VMM 2 MiB pieces); real usage from nvidia-smi next to our count
#   3 what cudaMemGetInfo, NVML v1/v2 and nvidia-smi report under the limit, and a 256 MiB limit
#   4 two processes racing 3 GiB each against 4 GiB, 50 rounds: exactly one wins per round
#   5 crash: a process holding 2 GiB is SIGKILLed; another gets the whole 4 GiB at once
#   6 overhead against native: cudaMalloc/Free, MallocAsync/FreeAsync, empty-kernel launches
#   7 SM limit accuracy: spin kernels at 30% and 50% (and under a graph) against unlimited
# Everything printed is also written to <output dir>/log.txt and the JSON lines to results.jsonl.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT=${1:-${OUT:-/tmp/gpushare-gpu-checks}}
mkdir -p "$OUT/bin"
exec > >(tee "$OUT/log.txt") 2>&1
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"
say() { printf '\n== %s\n' "$*"; }
json() { tee -a "$RESULTS"; }
# CHECKS=2,5 runs only those sections (the machine and the build always run).
want() { [[ ",${CHECKS:-1,2,3,4,5,6,7}," == *",$1,"* ]]; }
# SIGKILL the checker holding memory (its pid, not the timeout wrapping it).
kill_holder() { pkill -KILL -f "$B hold $1" 2>/dev/null; wait "$2" 2>/dev/null; }

say "0. machine"
if ! command -v nvidia-smi >/dev/null; then echo "no nvidia-smi: not a GPU machine"; exit 3; fi
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,mig.mode.current,compute_cap --format=csv
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$NVCC" --version | tail -2
CC_ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
ARCH=${ARCH:-sm_${CC_ARCH:-90}}

say "build"
LIB="$BUILD/lib/libgpushare-cuda.so"
if [ ! -f "$LIB" ]; then
  LIB="$OUT/bin/libgpushare-cuda.so"
  I="$ROOT/interpose"
  cc -std=c++20 -O2 -fPIC -shared -fno-exceptions -fno-rtti -fno-threadsafe-statics -fvisibility=hidden \
    -I"$ROOT" -include "$I/glibc_compat.h" "$I"/alloc_table.cc "$I"/config.cc "$I"/entry_points.cc \
    "$I"/log.cc "$I"/region.cc "$I"/sm_limiter.cc "$I"/hooks_*.cc \
    "$I"/runtime.cc -static-libgcc -Wl,-z,defs -Wl,-Bsymbolic \
    -Wl,--version-script="$I/exports.map" -Wl,--no-as-needed -ldl -lpthread -o "$LIB" || exit 4
fi
"$NVCC" -O2 -arch="$ARCH" -o "$OUT/bin/gpu_checks" "$ROOT/tests/gpu/gpu_checks.cu" -lcuda -ldl -lpthread || exit 4
B="$OUT/bin/gpu_checks"
SEQ=${GPUSHARE_SHARED_DIR:-$ROOT/../shared}/data/cuda/cudart-13.0-getprocaddress.txt
run_limited() {  # run_limited <limit> <region name> <timeout> <command...>
  local limit=$1 region=$2 t=$3
  shift 3
  env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT="$limit" CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/$region.region" \
    GPUSHARE_LOG_LEVEL=2 timeout "$t" "$@"
}

if want 1; then
say "1. symbol routing"
[ -f "$SEQ" ] || SEQ=/dev/null
timeout 60 "$B" routing "$SEQ" | json
run_limited 4g routing 60 "$B" limits malloc 4096 | json

fi
if want 2; then
say "2. allocation past a 4 GiB limit"
for api in malloc async pool pitch array3d managed vmm; do
  chunk=1024
  [ "$api" = vmm ] && chunk=2
  run_limited 4g "limits-$api" 60 "$B" limits "$api" "$chunk" | json
done
# Real usage next to ours: hold 3 GiB and ask nvidia-smi (outside the limit) what it sees.
run_limited 4g usage 30 "$B" hold 3072 > "$OUT/hold.txt" &
HOLD=$!
sleep 5
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/real usage: /'
kill_holder 3072 $HOLD

fi
if want 3; then
say "3. queries under the limit"
run_limited 4g queries 30 "$B" meminfo | json
env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT=4g CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/queries.region" \
  timeout 30 nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv
run_limited 256m tiny 30 "$B" meminfo | json

fi
if want 4; then
say "4. two processes, one 4 GiB limit, 3 GiB each, 50 rounds"
"$B" mkbarrier "$OUT/barrier" 2
run_limited 4g race 120 "$B" race 50 3072 "$OUT/barrier" > "$OUT/race-a.json" &
A=$!
run_limited 4g race 120 "$B" race 50 3072 "$OUT/barrier" > "$OUT/race-b.json"
wait $A
cat "$OUT/race-a.json" "$OUT/race-b.json" | json

fi
if want 5; then
say "5. crash reclaim"
run_limited 4g crash 60 "$B" hold 2048 > "$OUT/crash-hold.txt" &
H=$!
sleep 5
kill_holder 2048 $H
start=$(date +%s.%N)
run_limited 4g crash 30 "$B" limits malloc 4096 | json
echo "reclaim+allocate took $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.3f", b-a}') s"

fi
if want 6; then
say "6. overhead against native"
echo "native:"; timeout 120 "$B" overhead | sed 's/"check":"overhead"/"check":"overhead","mode":"native"/' | json
echo "interposed, memory limit:"
run_limited 64g overhead 120 "$B" overhead | sed 's/"check":"overhead"/"check":"overhead","mode":"limit"/' | json
echo "interposed, CUDA_DEVICE_SM_LIMIT=100 (no throttling):"
env LD_PRELOAD="$LIB" CUDA_DEVICE_SM_LIMIT=100 timeout 120 "$B" overhead |
  sed 's/"check":"overhead"/"check":"overhead","mode":"sm100"/' | json

fi
if want 7; then
say "7. SM limit accuracy"
timeout 60 "$B" spin 15 0 | sed 's/"check":"spin"/"check":"spin","limit":100/' | json
for l in 30 50; do
  env LD_PRELOAD="$LIB" CUDA_DEVICE_SM_LIMIT=$l CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/sm$l.region" timeout 60 "$B" spin 15 0 |
    sed "s/\"check\":\"spin\"/\"check\":\"spin\",\"limit\":$l/" | json
done
env LD_PRELOAD="$LIB" CUDA_DEVICE_SM_LIMIT=30 CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/smg.region" timeout 60 "$B" spin 15 1 |
  sed 's/"check":"spin"/"check":"spin","limit":30/' | json
fi
say "done: $RESULTS"
