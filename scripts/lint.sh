#!/usr/bin/env bash
# make lint: the checks the compiler of `make test` cannot make (docs/development.md, "Lint").
#   1. formatting: every C/C++ source as clang-format-14 (.clang-format) writes it;
#   2. lock rules: the product built with clang -Wthread-safety as errors, so every member marked
#      GPUSHARE_GUARDED_BY (base/sync.h) is touched only under its mutex.
# Usage: scripts/lint.sh [BUILD_DIR]   (default build-lint; only the product, no tests)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-lint}
jobs=${JOBS:-$(nproc)}

# Sources we format: tracked C/C++ outside generated code and the Go harness.
sources() {
  git ls-files '*.h' '*.cc' '*.c' | grep -v -e '/generated/' -e '^proto/' -e '^e2e/'
}

echo "lint: clang-format-14 over $(sources | wc -l) files"
if ! sources | xargs clang-format-14 --dry-run --Werror 2>/tmp/gpushare-format.$$; then
  grep -E '^[^ ]+:[0-9]+:[0-9]+: (error|warning)' /tmp/gpushare-format.$$ | cut -d: -f1 | sort -u |
    sed 's/^/lint: not formatted: /' | head -50
  echo "lint: FAIL: run 'make format' and commit the result" >&2
  rm -f /tmp/gpushare-format.$$
  exit 1
fi
rm -f /tmp/gpushare-format.$$

echo "lint: clang -Wthread-safety build of the product in $build"
if [ ! -f "$build/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_COMPILER=clang -DGPUSHARE_THREAD_SAFETY=ON -DGPUSHARE_BUILD_TESTS=OFF \
    -DGPUSHARE_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
fi
# -Werror=thread-safety makes a broken lock rule fail the build; the log keeps every report.
if ! cmake --build "$build" -j "$jobs" >"$build/lint.log" 2>&1; then
  grep -E 'error:|-Wthread-safety' "$build/lint.log" | head -40 >&2
  echo "lint: FAIL: see $build/lint.log" >&2
  exit 1
fi
if grep -q -- '-Wthread-safety' "$build/lint.log"; then
  grep -- '-Wthread-safety' "$build/lint.log" | head -20 >&2
  echo "lint: FAIL: thread-safety reports (see $build/lint.log)" >&2
  exit 1
fi
echo "lint: PASS"
