#!/usr/bin/env bash
# Runs the libFuzzer targets (fuzz/): each for SECONDS (default 20) from its committed seed
# corpus. Inputs the fuzzer finds are kept in BUILD/corpus/<target>/ (not committed); a crash,
# a leak, a hang (one input over 10 s) or an input over 2 GiB of memory stops the run, leaves the
# input in BUILD/artifacts/ and fails the script with the command that reproduces it.
#
#   scripts/fuzz.sh                     # every target, 20 s each (what `make test` runs)
#   scripts/fuzz.sh 3600                # every target, an hour each
#   scripts/fuzz.sh 600 fuzz_http_request
#   FUZZ_JOBS=2 scripts/fuzz.sh 3600    # two fuzzing processes per target
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SECONDS_EACH=${1:-20}
shift || true
BUILD=$(realpath -m "${FUZZ_BUILD:-build-fuzz}")
JOBS=${FUZZ_JOBS:-1}
ALL=(fuzz_node_config fuzz_inventory fuzz_http_request fuzz_extender_json fuzz_trace_csv)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
case "$JOBS" in ''|*[!0-9]*|0) echo "fuzz.sh: FUZZ_JOBS must be a whole number > 0, got '$JOBS'" >&2; exit 2 ;; esac
case "$SECONDS_EACH" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, got '$SECONDS_EACH'" >&2; exit 2 ;; esac

CXX_CLANG=$(command -v clang++ || command -v clang++-14 || true)
CC_CLANG=$(command -v clang || command -v clang-14 || true)
if [ -z "$CXX_CLANG" ] || [ -z "$CC_CLANG" ]; then
  echo "fuzz.sh: clang is not installed (scripts/install-deps.sh installs clang and libclang-rt-14-dev)" >&2
  exit 2
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSHARE_FUZZ=ON \
    -DCMAKE_CXX_COMPILER="$CXX_CLANG" -DCMAKE_C_COMPILER="$CC_CLANG" >/dev/null
fi
cmake --build "$BUILD" --target "${TARGETS[@]}"

mkdir -p "$BUILD/artifacts"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in "${TARGETS[@]}"; do
  mkdir -p "$BUILD/corpus/$t"
  echo "fuzz.sh: $t for ${SECONDS_EACH} s"
  # New inputs go to the first directory (scratch); the committed seeds are only read. With
  # FUZZ_JOBS > 1 libFuzzer writes fuzz-<job>.log into its working directory: BUILD/work/<target>.
  parallel=()
  [ "$JOBS" -gt 1 ] && parallel=(-jobs="$JOBS" -workers="$JOBS")
  mkdir -p "$BUILD/work/$t"
  if ! (cd "$BUILD/work/$t" && "$BUILD/bin/$t" "$BUILD/corpus/$t" "$ROOT/fuzz/corpus/$t" \
      -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -max_len=65536 "${parallel[@]}" \
      -artifact_prefix="$BUILD/artifacts/$t-" -print_final_stats=1) >"$BUILD/$t.log" 2>&1; then
    tail -60 "$BUILD/$t.log" >&2
    [ "$JOBS" -gt 1 ] && tail -60 "$BUILD"/work/"$t"/fuzz-*.log >&2
    echo "fuzz.sh: $t FAILED; reproduce with: $BUILD/bin/$t $BUILD/artifacts/$t-*" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$BUILD/$t.log" | tr '\n' ' ' | sed "s/^/fuzz.sh: $t: /"
  echo
done
echo "fuzz.sh: ${#TARGETS[@]} targets, no crash, leak or hang"
