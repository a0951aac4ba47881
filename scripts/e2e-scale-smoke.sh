#!/usr/bin/env bash
# The scale harness's smoke test (docs/e2e.md, "Scale"), run by `make e2e` after the 3-node tests
# so that CI keeps the harness working: a fresh scale cluster of SCALE_NODES (200) nodes of the
# default trace, then, through the real kube-scheduler:
#   - SCALE_PODS (600) pods of aliyun.com/gpu-mem 3 (filter, prioritize and bind by
#     gpushare-scheduler): every one bound and Running, and, from the pods' own annotations, no
#     GPU booked past its units in the node's inventory annotation;
#   - as many pods of aliyun.com/gpu-count 1 (kube-scheduler alone: an extended resource the
#     extender does not manage), the baseline on the same nodes;
# prints both bind rates (bindrate, kube-scheduler stopped while the pods are created) with what
# each burst cost (scripts/e2e-scale-lib.sh: waits to bind, latency p99s, CPU, API requests per
# pod), replays the default trace on the same nodes and checks it against gpushare simulate
# (below), then takes the cluster down and removes its state (the pods with it: kwok's deletions run at a few
# pods per second). Needs root, like make e2e.
#
# Environment: SCALE_NODES, SCALE_PODS, E2E_KEEP=1 (leave the cluster up), E2E_BIN, GPUSHARE_BIN.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${E2E_BIN:-$repo/build/e2e/bin}
export E2E_SCALE_DIR=${E2E_SCALE_DIR:-$repo/build/e2e/scale-smoke}
nodes=${SCALE_NODES:-200}
count=${SCALE_PODS:-600}
kubeconfig="$repo/build/e2e/kubeconfig"
kubectl=("$bin/kubectl" --kubeconfig "$kubeconfig")
ns=e2e-scale

say() { echo "e2e-scale-smoke: $*"; }
fail() { echo "e2e-scale-smoke: FAIL: $*" >&2; exit 1; }

# shellcheck source=scripts/e2e-scale-lib.sh
source "$repo/scripts/e2e-scale-lib.sh"

data="$repo/../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv"
skip_without_node_list "$data"
purge_on_exit
rm -rf "$E2E_SCALE_DIR"
start=$(date +%s)
"$repo/scripts/e2e-scale.sh" up --count "$nodes" | grep '^e2e-scale:' || fail "scripts/e2e-scale.sh up"
say "up with $nodes nodes in $(($(date +%s) - start)) s"

new_scale_namespace

mem_line=$(burst scale-mem aliyun.com/gpu-mem=3 "$count")
say "scale-mem: $mem_line"
mem_rate=$(field "$mem_line" pods_per_s)
# Every share, from the pods' annotations (what gpushare-scheduler wrote at bind), against every
# GPU's units in its node's inventory annotation.
"${kubectl[@]}" get nodes -l gpushare.io/scale-harness=true -o json >"$E2E_SCALE_DIR/nodes.json"
"${kubectl[@]}" -n "$ns" get pods -l bindrate=scale-mem -o json >"$E2E_SCALE_DIR/pods.json"
python3 - "$E2E_SCALE_DIR/nodes.json" "$E2E_SCALE_DIR/pods.json" "$count" <<'EOF' || fail "GPU bookings (above)"
import json, sys
nodes = json.load(open(sys.argv[1]))["items"]
pods = json.load(open(sys.argv[2]))["items"]
want = int(sys.argv[3])
units = {}
for n in nodes:
    inv = json.loads(n["metadata"]["annotations"]["gpushare.io/gpu-inventory"])
    for g in inv["gpus"]:
        units[(n["metadata"]["name"], g["index"])] = g["units"]
booked, bad = {}, []
for p in pods:
    a = p["metadata"].get("annotations", {})
    name = p["metadata"]["name"]
    if p["status"].get("phase") != "Running":
        bad.append(f"{name}: {p['status'].get('phase')}")
        continue
    gpus = json.loads(a.get("gpushare.io/gpu-mem-assumed", "{}"))
    if len(gpus) != 1:
        bad.append(f"{name}: assumed map {gpus}")
        continue
    key = (p["spec"]["nodeName"], next(iter(gpus.values())))
    if key not in units:
        bad.append(f"{name}: GPU {key} not in the node's inventory")
        continue
    booked[key] = booked.get(key, 0) + int(a.get("ALIYUN_COM_GPU_MEM_POD", "0"))
over = [f"{k[0]} GPU {k[1]}: {v} of {units[k]}" for k, v in booked.items() if v > units[k]]
if len(pods) != want:
    bad.append(f"{len(pods)} pods, want {want}")
for line in bad[:10] + over[:10]:
    print("e2e-scale-smoke:   " + line, file=sys.stderr)
if bad or over:
    sys.exit(1)
print(f"e2e-scale-smoke: {want} shares Running on {len(booked)} GPUs of "
      f"{len({k[0] for k in booked})} nodes, none booked past its units (from the annotations)")
EOF

gpu_line=$(burst scale-count aliyun.com/gpu-count=1 "$count")
say "scale-count: $gpu_line"
gpu_rate=$(field "$gpu_line" pods_per_s)
say "figure: $nodes nodes: kube-scheduler + gpushare-scheduler binds aliyun.com/gpu-mem pods at $mem_rate pods/s; kube-scheduler alone binds aliyun.com/gpu-count pods at $gpu_rate pods/s (ratio $(awk -v a="$mem_rate" -v b="$gpu_rate" 'BEGIN {printf "%.2f", a / b}'))"

# Two exchanges per pod (profile two: gpushare-scheduler --filter-keep-best 0, every node that
# fits passed and ranked with prioritize; the chart's default is one): the same shares bind, and
# the rate is printed beside the two above.
clear_pods
"$repo/scripts/e2e-scale.sh" profile two | grep '^e2e-scale:' || fail "scripts/e2e-scale.sh profile two"
two_line=$(burst scale-two aliyun.com/gpu-mem=3 "$count")
say "scale-two: $two_line"
say "figure: $nodes nodes: with two extender exchanges per pod (profile two) kube-scheduler + gpushare-scheduler binds aliyun.com/gpu-mem pods at $(field "$two_line" pods_per_s) pods/s"

# The small replay (docs/e2e.md, "Replay"): the default trace on the same nodes through the real
# kube-scheduler (FGD's protocol: profile replay) and gpushare-scheduler (policy default), and
# gpushare simulate on the same input. Checked: every pod decided, nothing over-committed (the
# replay itself fails otherwise), and the product's unallocated share at 100% arrival within
# REPLAY_GAP points of the simulator's (a regression bound; docs/benchmarks.md has the gap and
# its causes).
pods_csv="$repo/../shared/data/alibaba-gpu-v2023/openb_pod_list_default.csv"
gap_bound=${REPLAY_GAP:-1.0}
clear_pods
"$repo/scripts/e2e-scale.sh" profile replay | grep '^e2e-scale:' || fail "scripts/e2e-scale.sh profile replay"
# A fresh gpushare-scheduler, as for a replay on a fresh cluster, with the trace's pods as its
# target workload, as gpushare simulate has them (docs/scheduler.md, "Target workload").
"$repo/scripts/e2e-scale.sh" policy default --target-workload "$pods_csv" | grep '^e2e-scale:' ||
  fail "scripts/e2e-scale.sh policy default --target-workload $pods_csv"
head -n $((nodes + 1)) "$data" >"$E2E_SCALE_DIR/replay-nodes.csv"
replay_out=$(KUBECONFIG="$kubeconfig" "$repo/build/bin/gpushare" replay --quiet \
  --nodes "$E2E_SCALE_DIR/replay-nodes.csv" --pods "$pods_csv" --policy default --seeds 42 \
  --out "$E2E_SCALE_DIR/replay") || fail "gpushare replay: $replay_out"
echo "$replay_out" | sed 's/^/e2e-scale-smoke:   /' >&2
"$repo/build/bin/gpushare" simulate --quiet --nodes "$E2E_SCALE_DIR/replay-nodes.csv" \
  --pods "$pods_csv" --policy default --seeds 42 --out "$E2E_SCALE_DIR/simulate" >/dev/null ||
  fail "gpushare simulate on the replay's input"
at100() { awk -F, '$1 == "default" && $2 == 100 {print $3}' "$1/summary.csv"; }
product=$(at100 "$E2E_SCALE_DIR/replay")
predicted=$(at100 "$E2E_SCALE_DIR/simulate")
[ -n "$product" ] && [ -n "$predicted" ] || fail "no 100% row in the summaries (replay '$product', simulate '$predicted')"
say "figure: replay of the default trace on $nodes nodes, policy default, seed 42: $product% of GPU unallocated at 100% arrival through the cluster, $predicted% in gpushare simulate"
awk -v a="$product" -v b="$predicted" -v g="$gap_bound" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= g)}' ||
  fail "the replay's $product% is more than $gap_bound points from the simulator's $predicted%"
say "PASS in $(($(date +%s) - start)) s"
