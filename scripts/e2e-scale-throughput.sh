#!/usr/bin/env bash
# make e2e-scale, second part: scheduling throughput at the trace's size and beyond (docs/e2e.md,
# "Throughput"; figures in docs/benchmarks.md). For each size in THROUGHPUT_SIZES (default
# 1213 5000: every node of the default node list, then the list repeated to 5,000 nodes), the
# scale harness up with that many nodes, and for each kube-scheduler client setting in
# THROUGHPUT_QPS ("default": kube-scheduler's own, QPS 50 and burst 100; a number: that QPS,
# burst twice it), bursts of THROUGHPUT_PODS (3000) pods through the real kube-scheduler:
#   share     aliyun.com/gpu-mem 3: filter, prioritize and bind by gpushare-scheduler
#   fraction  alibabacloud.com/gpu-milli 250: the same, a quarter of a GPU
#   whole     aliyun.com/gpu-count 1: kube-scheduler alone (an extended resource the extender does
#             not manage, counted per node like nvidia.com/gpu), the baseline
# Each burst: pods/s, each pod's wait to be bound (p50, p99), kube-scheduler's scheduling
# algorithm p99 (extenders included) and cycle p99, gpushare-scheduler's filter, prioritize and
# bind p99, both schedulers' CPU seconds, gpushare-scheduler's peak RSS and the API requests per
# pod; then the ratio of each extender workload's rate to the baseline's in the same run.
#
# For each client setting, each kube-scheduler profile of THROUGHPUT_PROFILES (default "default
# two"): default is deploy/kube-scheduler-config.yaml with gpushare-scheduler as the chart runs
# it (--filter-keep-best 1: the filter keeps the policy's best node, one exchange per pod); two
# is the same with --filter-keep-best 0 (every node that fits passed, then prioritize: two
# exchanges per pod).
#
# Environment: THROUGHPUT_SIZES, THROUGHPUT_QPS, THROUGHPUT_PROFILES, THROUGHPUT_PODS,
# SCALE_NODES_CSV (the node list),
# E2E_KEEP=1 (leave the cluster up). Needs root, like make e2e.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${E2E_BIN:-$repo/build/e2e/bin}
export E2E_SCALE_DIR=${E2E_SCALE_DIR:-$repo/build/e2e/scale-throughput}
nodes_csv=${SCALE_NODES_CSV:-$repo/../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv}
sizes=${THROUGHPUT_SIZES:-1213 5000}
qpss=${THROUGHPUT_QPS:-default 500}
profiles=${THROUGHPUT_PROFILES:-default two}
count=${THROUGHPUT_PODS:-3000}
kubeconfig="$repo/build/e2e/kubeconfig"
ns=scale-throughput

say() { echo "e2e-scale-throughput: $*"; }
fail() { echo "e2e-scale-throughput: FAIL: $*" >&2; exit 1; }
# shellcheck source=scripts/e2e-scale-lib.sh
source "$repo/scripts/e2e-scale-lib.sh"

skip_without_node_list "$nodes_csv"
purge_on_exit
rm -rf "$E2E_SCALE_DIR"
start=$(date +%s)
cols="nodes qps profile workload pods pods/s p50_s p99_s ks_algo_p99_ms ks_cycle_p99_ms gs_filter_p99_ms gs_prio_p99_ms gs_bind_p99_ms gs_cpu_s ks_cpu_s gs_rss_mib api_req/pod"
table=$cols
ratios=""
for size in $sizes; do
  t=$(date +%s)
  "$repo/scripts/e2e-scale.sh" up --nodes "$nodes_csv" --count "$size" | grep '^e2e-scale:' ||
    fail "scripts/e2e-scale.sh up --count $size"
  say "$size nodes up in $(($(date +%s) - t)) s"
  new_scale_namespace
  for qps in $qpss; do
    declare -A rate=()
    for prof in $profiles; do
      if [ "$qps" = default ]; then
        "$repo/scripts/e2e-scale.sh" profile "$prof" | grep '^e2e-scale:' || fail "profile $prof"
      else
        "$repo/scripts/e2e-scale.sh" profile "$prof" "$qps" | grep '^e2e-scale:' || fail "profile $prof $qps"
      fi
      # The baseline once per client setting (the extender takes no part in it).
      works=("share aliyun.com/gpu-mem=3" "fraction alibabacloud.com/gpu-milli=250")
      [ -n "${rate[whole]:-}" ] || works+=("whole aliyun.com/gpu-count=1")
      for w in "${works[@]}"; do
        read -r wname res <<<"$w"
        line=$(burst "tp-$wname" "$res" "$count")
        key=$wname
        [ "$wname" = whole ] || key="$prof/$wname"
        rate[$key]=$(field "$line" pods_per_s)
        row="$size $qps $prof $wname $count"
        for k in pods_per_s p50_s p99_s ks_algo_p99_ms ks_attempt_p99_ms gs_filter_p99_ms gs_prioritize_p99_ms gs_bind_p99_ms gs_cpu_s ks_cpu_s gs_rss_peak_mib api_req_per_pod; do
          row+=" $(field "$line" "$k")"
        done
        say "$row"
        table+=$'\n'"$row"
        clear_pods
      done
    done
    for prof in $profiles; do
      for wname in share fraction; do
        ratios+="$size nodes, kube-scheduler client $qps, profile $prof: $wname / whole = $(awk -v a="${rate[$prof/$wname]}" -v b="${rate[whole]}" 'BEGIN {printf "%.2f", a / b}') (${rate[$prof/$wname]} / ${rate[whole]} pods/s)"$'\n'
      done
    done
    unset rate
  done
done
say "bursts of $count pods through kube-scheduler v1.37 (+ gpushare-scheduler for share and fraction):"
awk '{printf "e2e-scale-throughput:   %5s %7s %-7s %-8s %5s %7s %6s %6s %9s %9s %9s %9s %9s %6s %6s %6s %7s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17}' <<<"$table"
while IFS= read -r r; do [ -n "$r" ] && say "ratio: $r"; done <<<"$ratios"
say "done in $(($(date +%s) - start)) s"
