#!/usr/bin/env bash
# make e2e-scale, third part: faults at the trace's size (docs/e2e.md, "Faults"). The scale
# harness with FAULT_NODES (default every node of the default list: 1,213) on FGD's protocol
# (profile replay), the default trace replayed (gpushare replay, policy FAULT_POLICY, seed 42)
# once without a fault, then once per fault in FAULTS, each injected FAULT_AT (0.4) of the
# fault-free replay's duration into the run:
#   gpushare-scheduler  its pod killed, started again a second later (the Deployment)
#   kube-apiserver      restarted
#   leader              kube-scheduler as two replicas electing a leader; the leader killed
# After each: the replay finished with every pod decided (bound, or unschedulable with
# kube-scheduler's reason; replay --expect-running: every bound pod Running), no GPU booked past
# its capacity (the replay reads the pods' annotations and fails on any over-commit), and the
# unallocated GPU share at 100% arrival within FAULT_GAP (0.5) points of the fault-free run.
#
# Environment: FAULT_NODES, FAULTS, FAULT_AT, FAULT_GAP, FAULT_POLICY (default), FAULT_TRACE
# (default), SCALE_NODES_CSV, E2E_KEEP=1. Needs root, like make e2e.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export E2E_SCALE_DIR=${E2E_SCALE_DIR:-$repo/build/e2e/scale-faults}
data="$repo/../shared/data/alibaba-gpu-v2023"
nodes_csv=${SCALE_NODES_CSV:-$data/openb_node_list_gpu_node.csv}
nodes=${FAULT_NODES:-all}
faults=${FAULTS:-gpushare-scheduler kube-apiserver leader}
at=${FAULT_AT:-0.4}
gap_bound=${FAULT_GAP:-0.5}
policy=${FAULT_POLICY:-default}
trace=${FAULT_TRACE:-default}
kubeconfig="$repo/build/e2e/kubeconfig"
gpushare="$repo/build/bin/gpushare"
scale="$repo/scripts/e2e-scale.sh"

say() { echo "e2e-scale-faults: $*"; }
fail() { echo "e2e-scale-faults: FAIL: $*" >&2; exit 1; }
# shellcheck source=scripts/e2e-scale-lib.sh
source "$repo/scripts/e2e-scale-lib.sh"

skip_without_node_list "$nodes_csv"
pods_csv="$data/openb_pod_list_$trace.csv"
[ -r "$pods_csv" ] || fail "$pods_csv not readable"
purge_on_exit
rm -rf "$E2E_SCALE_DIR"
mkdir -p "$E2E_SCALE_DIR/out"
start=$(date +%s)
list="$nodes_csv"
if [ "$nodes" != all ]; then
  list="$E2E_SCALE_DIR/nodes.csv"
  mkdir -p "$E2E_SCALE_DIR"
  head -n $((nodes + 1)) "$nodes_csv" >"$list"
fi
"$scale" up --nodes "$list" --profile replay | grep '^e2e-scale:' || fail "scripts/e2e-scale.sh up"
n=$(($(wc -l <"$list") - 1))
say "$n nodes up in $(($(date +%s) - start)) s"

at100() { awk -F, -v p="$policy" '$1 == p && $2 == 100 {print $3}' "$1/summary.csv"; }
# replay NAME [FAULT]: a fresh gpushare-scheduler (its target workload starts from the pods it
# sees, as on a fresh cluster), then the replay, with the fault injected FAULT_AT into it.
replay() {
  local name=$1 fault=${2:-} pid rc=0 t0 out="$E2E_SCALE_DIR/out/$1"
  "$scale" policy "$policy" | grep '^e2e-scale:' >/dev/null || fail "policy $policy"
  t0=$(date +%s.%N)
  KUBECONFIG="$kubeconfig" "$gpushare" replay --quiet --expect-running --pod-timeout 300 \
    --nodes "$list" --pods "$pods_csv" --policy "$policy" --seeds 42 --out "$out" \
    >"$out.log" 2>&1 &
  pid=$!
  if [ -n "$fault" ]; then
    sleep "$(awk -v d="$base_s" -v a="$at" 'BEGIN {printf "%.1f", d * a}')"
    kill -0 "$pid" 2>/dev/null || fail "$name: the replay ended before the fault (see $out.log)"
    "$scale" fault "$fault" | grep '^e2e-scale:' | sed 's/^/  /' >&2 || fail "$name: injecting the fault"
  fi
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || { sed 's/^/  /' "$out.log" | tail -20 >&2; fail "$name: gpushare replay exited $rc (see $out.log)"; }
  grep '^seed ' "$out.log" | sed "s/^/e2e-scale-faults:   $name: /" >&2
  dur=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  result=$(at100 "$out")
  [ -n "$result" ] || fail "$name: no 100% row in $out/summary.csv"
}

replay fault-free
base=$result base_s=$dur
say "fault-free: $base% of GPU unallocated at 100% arrival ($dur s)"
table="fault unallocated% delta replay_s"$'\n'"none $base +0.00 $base_s"
for f in $faults; do
  if [ "$f" = leader ]; then
    "$scale" replicas 2 | grep '^e2e-scale:' || fail "replicas 2"
  fi
  replay "$f" "$f"
  delta=$(awk -v a="$result" -v b="$base" 'BEGIN {printf "%+.2f", a - b}')
  say "$f: $result% ($delta points from the fault-free run; $dur s)"
  table+=$'\n'"$f $result $delta $dur"
  awk -v d="$delta" -v g="$gap_bound" 'BEGIN {if (d < 0) d = -d; exit !(d <= g)}' ||
    fail "$f: $result% is more than $gap_bound points from the fault-free run's $base%"
  if [ "$f" = leader ]; then
    "$scale" replicas 1 | grep '^e2e-scale:' || fail "replicas 1"
  fi
done
say "the $trace trace on $n nodes, policy $policy, seed 42, fault at $at of the run:"
awk '{printf "e2e-scale-faults:   %-20s %12s %7s %9s\n", $1, $2, $3, $4}' <<<"$table"
say "PASS in $(($(date +%s) - start)) s"
