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
#   8 real usage under a 4 GiB limit, every allocation API: fill to the refusal, run kernels,
#     then nvidia-smi's figure for the process ("check":"real_usage": 0 MiB over is the goal),
#     with the figure the interposer charged for its context and where it came from
#   9 three processes of one container (one region), each its own context, one 6 GiB limit:
#     the sum of their real usage
#  10 cuBLAS SGEMM loop, native against a memory limit and CUDA_DEVICE_SM_LIMIT=100 (when the
#     toolkit has cuBLAS)
#  11 a compute share on a kernel mix (short and long kernels, a copy kernel, memcpy) at 30% and
#     50% against unlimited
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
want() { [[ ",${CHECKS:-1,2,3,4,5,6,7,8,9,10,11}," == *",$1,"* ]]; }
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
  "$ROOT/tests/gpu/build-interposer.sh" "$LIB" || exit 4
fi
"$NVCC" -O2 -arch="$ARCH" -o "$OUT/bin/gpu_checks" "$ROOT/tests/gpu/gpu_checks.cu" -lcuda -ldl -lpthread || exit 4
B="$OUT/bin/gpu_checks"
# The same with cuBLAS, when the toolkit has it (check 10).
GEMM=""
if "$NVCC" -O2 -arch="$ARCH" -DGPUSHARE_CUBLAS -o "$OUT/bin/gpu_checks_cublas" \
  "$ROOT/tests/gpu/gpu_checks.cu" -lcublas -lcuda -ldl -lpthread 2>"$OUT/cublas-build.txt"; then
  GEMM="$OUT/bin/gpu_checks_cublas"
else
  echo "no cuBLAS in this toolkit: check 10 skipped ($(head -1 "$OUT/cublas-build.txt"))"
fi
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
# The budget: each operation within 3% of native.
awk -F'[:,}]' '/"check":"overhead"/ {
    for (i = 1; i < NF; i++) { gsub(/"/, "", $i); v[$i] = $(i + 1) }
    gsub(/"/, "", v["mode"]); m = v["mode"]
    malloc[m] = v["malloc_free_ns"]; async[m] = v["async_pair_ns"]; launch[m] = v["empty_launch_ns"] }
  END { if (!("native" in async) || !("limit" in async)) exit
    pa = 100 * (async["limit"] - async["native"]) / async["native"]
    pm = 100 * (malloc["limit"] - malloc["native"]) / malloc["native"]
    pl = 100 * (launch["sm100"] - launch["native"]) / launch["native"]
    printf "{\"check\":\"overhead_budget\",\"async_pair_added_pct\":%.1f,\"malloc_free_added_pct\":%.1f,\"launch_sm100_added_pct\":%.1f,\"async_within_3pct\":%s}\n",
      pa, pm, pl, (pa <= 3 ? "true" : "false") }' "$RESULTS" | json

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
# start_fill <api> <chunk MiB> <limit MiB> <region> <tag> [max MiB]: one `fill` process in the
# background; once it has filled the limit (or max) and run kernels, prints its pid (the caller
# reads its real usage with real_mib and kills it).
start_fill() {
  local api=$1 chunk=$2 limit=$3 region=$4 tag=$5 max=${6:-0}
  rm -f "$OUT/ready-$tag"
  env LD_PRELOAD="$LIB" CUDA_DEVICE_MEMORY_LIMIT="${limit}m" CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/$region.region" \
    GPUSHARE_LOG_LEVEL=3 timeout 120 "$B" fill "$api" "$chunk" "$OUT/ready-$tag" "$max" \
    >"$OUT/fill-$tag.json" 2>"$OUT/fill-$tag.log" &
  for _ in $(seq 1 600); do [ -s "$OUT/ready-$tag" ] && break; sleep 0.1; done
  cat "$OUT/ready-$tag" 2>/dev/null
}
real_mib() {  # real_mib <pid>: the process's used GPU memory per nvidia-smi (MiB), 0 if absent
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
    awk -F', *' -v p="$1" '$1 == p { s += $2 } END { print s + 0 }'
}
charged() {  # charged <tag>: the interposer's context figure and its source, from its log
  grep -o 'context charged.*' "$OUT/fill-$1.log" | tail -1 |
    sed -E 's/.*bytes=([0-9]+) source=([a-z]+).*/\1 \2/'
}

if want 8; then
say "8. real usage under a 4 GiB limit, every allocation API"
for api in malloc async pool pitch array3d managed vmm; do
  chunk=256
  [ "$api" = vmm ] && chunk=2
  pid=$(start_fill "$api" "$chunk" 4096 "usage-$api" "$api")
  if [ -z "$pid" ]; then
    echo "{\"check\":\"real_usage\",\"api\":\"$api\",\"error\":\"the fill did not finish\"}" | json
    pkill -KILL -f "$B fill $api " 2>/dev/null
    continue
  fi
  sleep 1
  real=$(real_mib "$pid")
  read -r cbytes csource <<<"$(charged "$api")"
  allocated=$(grep -o '"allocated_mib":[0-9]*' "$OUT/fill-$api.json" | cut -d: -f2)
  kill -KILL "$pid" 2>/dev/null
  wait 2>/dev/null
  over=$((real > 4096 ? real - 4096 : 0))
  echo "{\"check\":\"real_usage\",\"api\":\"$api\",\"limit_mib\":4096,\"real_mib\":$real,\"over_mib\":$over,\"allocated_mib\":${allocated:-0},\"context_charge_mib\":$(((${cbytes:-0}) >> 20)),\"context_source\":\"${csource:-none}\"}" | json
done

fi
if want 9; then
say "9. three processes, one container, one 6 GiB limit"
# Each its own context and up to 2 GiB: the third finds less room than it asks for.
pids=()
for i in 1 2 3; do
  pids+=("$(start_fill malloc 256 6144 usage-multi "multi$i" 2048)")
done
sleep 1
sum=0
for p in "${pids[@]}"; do [ -n "$p" ] && sum=$((sum + $(real_mib "$p"))); done
for p in "${pids[@]}"; do [ -n "$p" ] && kill -KILL "$p" 2>/dev/null; done
wait 2>/dev/null
over=$((sum > 6144 ? sum - 6144 : 0))
echo "{\"check\":\"real_usage\",\"api\":\"malloc, 3 processes\",\"processes\":${#pids[@]},\"limit_mib\":6144,\"real_mib\":$sum,\"over_mib\":$over}" | json

fi
if want 10 && [ -n "$GEMM" ]; then
say "10. cuBLAS SGEMM 4096, native against the interposer"
timeout 60 "$GEMM" gemm 5 4096 | sed 's/"check":"gemm"/"check":"gemm","mode":"native"/' | json
run_limited 64g gemm 60 "$GEMM" gemm 5 4096 | sed 's/"check":"gemm"/"check":"gemm","mode":"limit"/' | json
env LD_PRELOAD="$LIB" CUDA_DEVICE_SM_LIMIT=100 timeout 60 "$GEMM" gemm 5 4096 |
  sed 's/"check":"gemm"/"check":"gemm","mode":"sm100"/' | json

fi
if want 11; then
say "11. a compute share on a kernel mix"
timeout 60 "$B" mix 8 | sed 's/"check":"mix"/"check":"mix","limit":100/' | json
for l in 30 50; do
  env LD_PRELOAD="$LIB" CUDA_DEVICE_SM_LIMIT=$l CUDA_DEVICE_MEMORY_SHARED_CACHE="$OUT/mix$l.region" timeout 60 "$B" mix 8 |
    sed "s/\"check\":\"mix\"/\"check\":\"mix\",\"limit\":$l/" | json
done
fi
say "done: $RESULTS"
