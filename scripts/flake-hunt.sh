#!/usr/bin/env bash
# The flake hunt (docs/testing.md, "Flake hunt"): every ctest test of a build, run again and again
# with more jobs than cores and a CPU hog beside them, until each test has passed REPEAT times or
# failed once. A test that fails once under this load fails some day in CI or on a user's first
# `make test`; fix it at the cause.
#
#   scripts/flake-hunt.sh [BUILD_DIR ...]        default: build build-asan
#
# Environment:
#   REPEAT   passes each test needs (ctest --repeat until-fail:REPEAT; default 3)
#   JOBS     ctest -j (default: twice the cores)
#   HOGS     busy-looping processes beside the tests (default: the number of cores)
#   LABELS   a ctest -L regex to hunt in only some tiers (default: every test)
# Writes build-*/flake-hunt.log (ctest's output) and prints one summary line per build:
#   flake-hunt: build-asan: 1071 tests x 3, 0 failed, 812 s (load average 5.8), 2 cores, 4 jobs, 2 hogs
# Exit status: 0 when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.."
builds=("$@")
[ ${#builds[@]} -eq 0 ] && builds=(build build-asan)
cores=$(nproc)
repeat=${REPEAT:-3}
jobs=${JOBS:-$((2 * cores))}
hogs=${HOGS:-$cores}
label_args=()
[ -n "${LABELS:-}" ] && label_args=(-L "$LABELS")

hog_pids=()
stop_hogs() {
  for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null; done
  wait "${hog_pids[@]}" 2>/dev/null
  hog_pids=()
}
trap stop_hogs EXIT

status=0
for b in "${builds[@]}"; do
  if [ ! -f "$b/CTestTestfile.cmake" ]; then
    echo "flake-hunt: $b: not a build directory (make build / make build-asan first)" >&2
    status=2
    continue
  fi
  for _ in $(seq "$hogs"); do
    (while :; do :; done) &
    hog_pids+=($!)
  done
  log="$b/flake-hunt.log"
  start=$(date +%s)
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$b" --output-on-failure -j "$jobs" --repeat "until-fail:$repeat" \
    "${label_args[@]}" >"$log" 2>&1
  rc=$?
  load=$(cut -d' ' -f1 /proc/loadavg)
  stop_hogs
  total=$(grep -oE '[0-9]+ tests failed out of [0-9]+' "$log" | tail -1 | awk '{print $NF}')
  failed=$(grep -oE '[0-9]+ tests failed out of' "$log" | tail -1 | awk '{print $1}')
  [ -z "$total" ] && total=$(grep -oE 'out of [0-9]+' "$log" | tail -1 | awk '{print $3}')
  echo "flake-hunt: $b: ${total:-?} tests x $repeat, ${failed:-0} failed, $(( $(date +%s) - start )) s" \
       "(load average $load), $cores cores, $jobs jobs, $hogs hogs"
  if [ $rc -ne 0 ]; then
    grep -E '^\s+[0-9]+ - ' "$log" | sed 's/^/flake-hunt:   /'
    status=1
  fi
done
exit $status
