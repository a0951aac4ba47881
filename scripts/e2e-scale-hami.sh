#!/usr/bin/env bash
# make e2e-hami: gpushare's scheduler beside HAMi's on the same cluster, same run (issue 25;
# docs/e2e.md "HAMi side by side", figures in docs/benchmarks.md). The scale harness up with
# HAMI_NODES nodes of the trace's node list (kwok, the real kube-scheduler v1.37.2), then HAMi's
# scheduler built from its public source (scripts/e2e-build.sh, part hami) and run beside it as
# its chart runs it (scripts/e2e-scale.sh hami on), and for each of HAMI_ROUNDS rounds, for each
# burst size of HAMI_SIZES, one burst of 3 GiB per pod through each of:
#   whole     nvidia.com/gpu: 1, kube-scheduler alone (the baseline; aliyun.com/gpu-count: 1 when
#             HAMi could not be built, since only its stand-in advertises nvidia.com/gpu)
#   gpushare  aliyun.com/gpu-mem: 3, kube-scheduler + gpushare-scheduler (the chart's defaults)
#   hami      nvidia.com/gpu: 1 + nvidia.com/gpumem: 3072, HAMi's kube-scheduler + hami-scheduler
#             (with every kube-scheduler's client at HAMI_QPS, and hami-scheduler's too)
# each created while its kube-scheduler is stopped (e2e/cmd/bindrate -pause-pid) and waited for
# up to HAMI_TIMEOUT: pods/s, p50/p99 wait from creation to binding, pods left unbound (stuck)
# and pods over-booked (e2e/scale/overbook.py, from the pods' and nodes' annotations). Then one
# burst of HAMI_CHART_PODS through HAMi with its chart's own client rate (QPS 5, burst 10: the
# chart sets no --kube-qps), the way its users run it.
#
# HAMi's lock: hami-scheduler locks the node at each bind until its device plugin, after
# kubelet's Allocate, releases it; e2e/cmd/hamistandin does that for the fake nodes, HAMI_DELAY
# after the bind (default 0s: HAMi's best case); then one round with HAMI_KUBELET_DELAY (86ms: the
# median gap between two Allocates of a burst on the e2e cluster's kubelet; empty skips it).
#
# Environment: HAMI_GIT, HAMI_COMMIT (HAMi's source; scripts/e2e-build.sh), HAMI_NODES (1213),
# HAMI_ROUNDS (10), HAMI_SIZES ("100 1000"), HAMI_QPS (500), HAMI_DELAY (0s), HAMI_TIMEOUT
# (5m), HAMI_KUBELET_DELAY (86ms), HAMI_CHART_PODS (100; 0 skips), HAMI_QUIET (1: hami-scheduler
# without its chart's --debug -v=4, named hami-quiet), SCALE_NODES_CSV, E2E_KEEP=1.
# Needs root, like make e2e.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${E2E_BIN:-$repo/build/e2e/bin}
export E2E_SCALE_DIR=${E2E_SCALE_DIR:-$repo/build/e2e/scale-hami}
nodes_csv=${SCALE_NODES_CSV:-$repo/../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv}
nodes=${HAMI_NODES:-1213}
rounds=${HAMI_ROUNDS:-10}
sizes=${HAMI_SIZES:-100 1000}
qps=${HAMI_QPS:-500}
delay=${HAMI_DELAY:-0s}
timeout=${HAMI_TIMEOUT:-5m}
chart_pods=${HAMI_CHART_PODS:-100}
kubelet_delay=${HAMI_KUBELET_DELAY-86ms}
# HAMI_QUIET=1: hami-scheduler without its chart's debug logging (scripts/e2e-scale.sh hami).
hami=hami
[ "${HAMI_QUIET:-0}" = 1 ] && hami=hami-quiet
kubeconfig="$repo/build/e2e/kubeconfig"
ns=scale-hami

say() { echo "e2e-scale-hami: $*"; }
fail() { echo "e2e-scale-hami: FAIL: $*" >&2; exit 1; }
# shellcheck source=scripts/e2e-scale-lib.sh
source "$repo/scripts/e2e-scale-lib.sh"

skip_without_node_list "$nodes_csv"
start=$(date +%s)
# HAMi's scheduler first: without its source (HAMI_GIT) or with a build that fails, the bursts
# run without it, and the output says which step failed.
hami_log=$(mktemp)
if ! E2E_PARTS=hami "$repo/scripts/e2e-build.sh" >"$hami_log" 2>&1; then
  say "HAMi's scheduler NOT built, so NOT measured: $(grep -v '^go: downloading' "$hami_log" | tail -3 | tr '\n' ' ')"
  hami=""
fi
rm -f "$hami_log"
# The baseline asks nvidia.com/gpu, which the fake nodes advertise once hamistandin registered
# them for HAMi; without HAMi, the count gpushare-node publishes (aliyun.com/gpu-count, as in
# scripts/e2e-scale-throughput.sh).
whole_res=nvidia.com/gpu=1
[ -n "$hami" ] || whole_res=aliyun.com/gpu-count=1
purge_on_exit
rm -rf "$E2E_SCALE_DIR"
"$repo/scripts/e2e-scale.sh" up --nodes "$nodes_csv" --count "$nodes" | grep '^e2e-scale:' ||
  fail "scripts/e2e-scale.sh up --count $nodes"
"$repo/scripts/e2e-scale.sh" profile default "$qps" | grep '^e2e-scale:' || fail "profile default $qps"
if [ -n "$hami" ]; then
  "$repo/scripts/e2e-scale.sh" hami on "$qps" "$delay" | grep '^e2e-scale:' || fail "hami on $qps $delay"
fi
new_scale_namespace
ensure_bindrate
out="$E2E_SCALE_DIR/results"
mkdir -p "$out"

# one WORKLOAD SIZE ROUND: one burst, its line appended to $out/bursts.
one() {
  local w=$1 size=$2 round=$3 res sched="kube-scheduler" extra=() line check
  case $w in
    whole) res=$whole_res ;;
    gpushare) res=aliyun.com/gpu-mem=3 ;;
    hami*) res=nvidia.com/gpu=1,nvidia.com/gpumem=3072; sched=kube-scheduler-hami
      extra=(-scheduler-name hami-scheduler) ;;
  esac
  line=$(KUBECONFIG="$kubeconfig" "$bin/bindrate" -namespace "$ns" -name "$w-$size-$round" -count "$size" \
    -resource "$res" "${extra[@]}" -partial -timeout "$timeout" \
    -pause-pid "$(cut -d' ' -f1 "$E2E_SCALE_DIR/pids/$sched.pid")") || fail "bindrate $w $size: $line"
  grep '^bindrate:' <<<"$line" >&2
  scale_kubectl -n "$ns" get pods -o json >"$out/pods.json"
  scale_kubectl get nodes -l gpushare.io/scale-harness=true -o json >"$out/nodes.json"
  check=$(python3 "$repo/e2e/scale/overbook.py" "$out/pods.json" "$out/nodes.json")
  local r
  r="$w $size $round $(field "$line" pods_per_s) $(field "$line" p50_s) $(field "$line" p99_s) $(($(field "$line" count) - $(field "$line" bound))) $(field "$check" overbooked)"
  say "burst: $r ($check)"
  echo "$r" >>"$out/bursts"
  clear_pods
}

for round in $(seq "$rounds"); do
  for size in $sizes; do
    for w in whole gpushare ${hami:+"$hami"}; do one "$w" "$size" "$round"; done
  done
done
# HAMi again with the lock held as long as the e2e cluster's kubelet takes from a bind to the
# Allocate of a pod in a burst (HAMI_KUBELET_DELAY): one round.
if [ -n "$hami" ] && [ -n "$kubelet_delay" ]; then
  "$repo/scripts/e2e-scale.sh" hami on "$qps" "$kubelet_delay" | grep '^e2e-scale:' || fail "hami on $qps $kubelet_delay"
  for size in $sizes; do one "$hami-kubelet" "$size" 1; done
fi
if [ -n "$hami" ] && [ "$chart_pods" -gt 0 ]; then
  "$repo/scripts/e2e-scale.sh" hami on "" "$delay" | grep '^e2e-scale:' || fail "hami on (chart QPS)"
  one "$hami-chart" "$chart_pods" 1
fi

say "${hami:+HAMi $(cat "$bin/hami-scheduler.commit") beside }gpushare on $nodes nodes ($(python3 -c '
import json, sys
print(sum(len(json.loads(n["metadata"]["annotations"]["gpushare.io/gpu-inventory"])["gpus"])
          for n in json.load(open(sys.argv[1]))["items"]))' "$out/nodes.json") GPUs), kube-scheduler v1.37.2 client QPS $qps${hami:+, the HAMi node lock released $delay after each bind}:"
say "workload size bursts pods/s(median,min) p50_s(median) p99_s(median,max) stuck(total) overbooked(total)"
python3 - "$out/bursts" <<'EOF' | while IFS= read -r l; do say "  $l"; done
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    w, size, _round, rate, p50, p99, stuck, over = line.split()
    rows.setdefault((w, int(size)), []).append((float(rate), float(p50), float(p99), int(stuck), int(over)))
rates = {}
order = ["whole", "gpushare", "hami", "hami-kubelet", "hami-chart",
         "hami-quiet", "hami-quiet-kubelet", "hami-quiet-chart"]
for (w, size), rs in sorted(rows.items(), key=lambda kv: (kv[0][1], order.index(kv[0][0]))):
    r = [x[0] for x in rs]
    rates[(w, size)] = statistics.median(r)
    print("%-12s %5d %3d %8.1f %8.1f %8.3f %8.3f %8.3f %5d %5d" % (
        w, size, len(rs), statistics.median(r), min(r), statistics.median(x[1] for x in rs),
        statistics.median(x[2] for x in rs), max(x[2] for x in rs), sum(x[3] for x in rs), sum(x[4] for x in rs)))
for size in sorted({s for _, s in rates}):
    g, wh = rates.get(("gpushare", size)), rates.get(("whole", size))
    h = rates.get(("hami", size)) or rates.get(("hami-quiet", size))
    if g and wh:
        print("ratio %d pods: gpushare / whole = %.2f" % (size, g / wh))
    if g and h:
        print("ratio %d pods: gpushare / hami = %.1f" % (size, g / h))
EOF
say "done in $(($(date +%s) - start)) s"
