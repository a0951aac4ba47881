#!/usr/bin/env bash
# `make demo`: the main job on a built-in default.
#  1. `gpushare simulate` on its built-in cluster and workload (generated, no data needed):
#     unallocated GPU per policy at 90..130% arrived workload, and how many GPUs the workload
#     needs with and without sharing. Reports go to $BUILD/demo-simulate/.
#  2. The node agent's resource plans for the example inventories, when it is built.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
echo "== gpushare simulate (built-in default cluster and workload)"
"$BUILD/bin/gpushare" simulate --out "$BUILD/demo-simulate" --quiet
echo
node="$BUILD/bin/gpushare-node"
if [ -x "$node" ]; then
  for inv in examples/inventory/*.yaml; do
    [ -e "$inv" ] || continue
    cfg="examples/config/$(basename "$inv" .yaml).yaml"
    echo "== $inv ${cfg:+with $cfg}"
    if [ -f "$cfg" ]; then
      "$node" --inventory "$inv" --config "$cfg" --print-resources
    else
      "$node" --inventory "$inv" --print-resources
    fi
    echo
  done
fi
