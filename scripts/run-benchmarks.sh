#!/usr/bin/env bash
# Runs every benchmark binary in <build>/bench and prints the results. Figures worth keeping go
# into docs/benchmarks.md with the machine (lscpu model, cores) and the date.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
echo "machine: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores), $(date -u +%F)"
for b in "$BUILD"/bench/*; do
  [ -x "$b" ] || continue
  echo "== $b"
  "$b" --benchmark_min_time=0.2
done
