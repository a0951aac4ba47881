#!/bin/sh
# Instructions per call (callgrind, deterministic) for the interposer's hot paths against the
# fake driver called directly: each op runs N and 2N times; the difference divided by N removes
# start-up. Usage: bench/interpose/callgrind.sh [build dir]   (valgrind from install-deps.sh)
set -eu
BUILD=${1:-build}
BIN="$BUILD/bench/interpose_bench"
export LD_LIBRARY_PATH="$BUILD/fakes/cuda"
N=2000
ir() {
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" --count "$1" "$2" >/dev/null 2>&1
  callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}'
  rm -f "$out"
}
printf '%-20s %14s\n' op instr/call
for op in alloc-direct alloc-interposed async-direct async-interposed launch-direct launch-interposed; do
  a=$(ir "$op" "$N")
  b=$(ir "$op" $((2 * N)))
  printf '%-20s %14d\n' "$op" $(((b - a) / N))
done
