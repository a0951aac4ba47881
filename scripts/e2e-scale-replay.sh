#!/usr/bin/env bash
# make e2e-scale: the product against the simulator at the trace's size (docs/e2e.md, "Replay";
# figures in docs/benchmarks.md). A scale cluster of every node of the default node list
# (1,213 nodes, 6,212 GPUs) with kube-scheduler on FGD's protocol (scripts/e2e-scale.sh profile
# replay); for each trace and policy, gpushare-scheduler restarted with that policy, the trace
# replayed through the cluster (gpushare replay) and simulated (gpushare simulate) with the same
# seed; prints the unallocated GPU share at 100% arrival of both, and the replay's pace.
#
# gpushare-scheduler is given the trace's pod list as its target workload (--target-workload),
# as FGD and gpushare simulate take the workload from the whole trace; REPLAY_WORKLOAD=learnt
# leaves it to learn the workload from the pods it sees.
#
# Environment: REPLAY_TRACES (default gpushare40 multigpu20: the default trace and these),
# REPLAY_POLICIES (default fgd), REPLAY_SEED (42), SCALE_NODES_CSV (the node list),
# E2E_KEEP=1 (leave the cluster up). Needs root, like make e2e.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export E2E_SCALE_DIR=${E2E_SCALE_DIR:-$repo/build/e2e/scale-replay}
data="$repo/../shared/data/alibaba-gpu-v2023"
nodes_csv=${SCALE_NODES_CSV:-$data/openb_node_list_gpu_node.csv}
traces=${REPLAY_TRACES:-default gpushare40 multigpu20}
policies=${REPLAY_POLICIES:-default fgd}
seed=${REPLAY_SEED:-42}
kubeconfig="$repo/build/e2e/kubeconfig"
gpushare="$repo/build/bin/gpushare"

say() { echo "e2e-scale-replay: $*"; }
fail() { echo "e2e-scale-replay: FAIL: $*" >&2; exit 1; }
# shellcheck source=scripts/e2e-scale-lib.sh
source "$repo/scripts/e2e-scale-lib.sh"

skip_without_node_list "$nodes_csv"
purge_on_exit
rm -rf "$E2E_SCALE_DIR"
start=$(date +%s)
"$repo/scripts/e2e-scale.sh" up --nodes "$nodes_csv" --profile replay | grep '^e2e-scale:' ||
  fail "scripts/e2e-scale.sh up"
say "up in $(($(date +%s) - start)) s"
at100() { awk -F, -v p="$2" '$1 == p && $2 == 100 {print $3}' "$1/summary.csv"; }
table="trace policy replay% simulate% gap pods pods/s"
for trace in $traces; do
  pods_csv="$data/openb_pod_list_$trace.csv"
  [ -r "$pods_csv" ] || fail "$pods_csv not readable"
  for policy in $policies; do
    workload=(--target-workload "$pods_csv")
    [ "${REPLAY_WORKLOAD:-trace}" = learnt ] && workload=()
    "$repo/scripts/e2e-scale.sh" policy "$policy" "${workload[@]}" | grep '^e2e-scale:' ||
      fail "policy $policy"
    out="$E2E_SCALE_DIR/out/$trace-$policy"
    mkdir -p "$E2E_SCALE_DIR/out"
    line=$(KUBECONFIG="$kubeconfig" "$gpushare" replay --quiet --nodes "$nodes_csv" \
      --pods "$pods_csv" --policy "$policy" --seeds "$seed" --out "$out/replay" |
      tee "$out.log" | grep '^seed ') || fail "gpushare replay $trace $policy (see $out.log)"
    "$gpushare" simulate --quiet --nodes "$nodes_csv" --pods "$pods_csv" --policy "$policy" \
      --seeds "$seed" --out "$out/simulate" >/dev/null || fail "gpushare simulate $trace $policy"
    product=$(at100 "$out/replay" "$policy")
    predicted=$(at100 "$out/simulate" "$policy")
    pods=$(sed -n 's/^seed [0-9]*: \([0-9]*\) pods.*/\1/p' <<<"$line")
    rate=$(sed -n 's/.*(\([0-9.]*\) pods\/s).*/\1/p' <<<"$line")
    gap=$(awk -v a="$product" -v b="$predicted" 'BEGIN {printf "%+.2f", a - b}')
    say "$trace $policy: replay $product%, simulate $predicted% ($gap points); $line"
    table+=$'\n'"$trace $policy $product $predicted $gap $pods $rate"
  done
done
say "unallocated GPU % at 100% arrival, seed $seed, $(tail -n +2 "$nodes_csv" | wc -l) nodes:"
awk '{printf "e2e-scale-replay:   %-11s %-8s %8s %10s %7s %6s %7s\n", $1, $2, $3, $4, $5, $6, $7}' <<<"$table"
say "done in $(($(date +%s) - start)) s"
