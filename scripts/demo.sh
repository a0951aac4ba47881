#!/usr/bin/env bash
# `make demo`: the main job on a built-in default. Until the simulator lands this prints the
# resource plan of every example inventory with the example sharing configs.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
node="$BUILD/bin/gpushare-node"
for inv in examples/inventory/*.yaml; do
  cfg="examples/config/$(basename "$inv" .yaml).yaml"
  echo "== $inv ${cfg:+with $cfg}"
  if [ -f "$cfg" ]; then
    "$node" --inventory "$inv" --config "$cfg" --print-resources
  else
    "$node" --inventory "$inv" --print-resources
  fi
  echo
done
