#!/usr/bin/env bash
# The scale harness (docs/e2e.md, "Scale"): the e2e control plane of scripts/e2e-cluster.sh
# (upstream etcd, kube-apiserver, kube-controller-manager and kube-scheduler with
# deploy/kube-scheduler-config.yaml, built by scripts/e2e-build.sh) with the nodes of a trace's
# node list faked by kwok (sigs.k8s.io/kwok, e2e/kwok), and gpushare-scheduler beside
# kube-scheduler with the arguments the Helm chart gives it in extender mode.
#
#   scripts/e2e-scale.sh up [--nodes FILE] [--count N]   start (or complete) it; harmless when up
#   scripts/e2e-scale.sh down                            stop everything `up` started
#   scripts/e2e-scale.sh status                          what runs, how many nodes are Ready
#   scripts/e2e-scale.sh purge                           down, and its state removed
#   scripts/e2e-scale.sh policy NAME [--target-workload FILE]
#                                                        gpushare-scheduler again with --policy NAME
#                                                        (and the chart's scheduler.targetWorkload
#                                                        from FILE; without: learnt)
#   scripts/e2e-scale.sh profile default|two|replay [QPS]  kube-scheduler again with that profile
#                                                        (two: two extender exchanges per pod)
#                                                        (and its API client at QPS, burst 2 x QPS)
#   scripts/e2e-scale.sh replicas 1|2                    kube-scheduler alone, or two electing a leader
#   scripts/e2e-scale.sh fault gpushare-scheduler|kube-apiserver|leader
#                                                        one fault, and the component back (below)
#   scripts/e2e-scale.sh hami on [QPS] [DELAY] | off     HAMi's scheduler beside gpushare's (below)
#
# --nodes: a node CSV in `gpushare simulate`'s format (sn, cpu_milli, memory_mib, gpu, model);
# default ../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv (1,213 nodes, 6,212
# GPUs). --count: that many of its GPU nodes (fewer: the first N; more: the list again with
# names suffixed -r1, -r2, ...); default all of them. `up` with another list converges: nodes of
# the harness that the new list lacks are deleted, the missing ones created.
#
# Each fake node is what gpushare-node --print-resources --output node prints for a simulated
# inventory of the node's GPUs (e2e/kwok/make_nodes.py, e2e/kwok/node-config.yaml): the same
# code path that publishes a real node's inventory annotation and allocatable. kwok manages only
# nodes annotated kwok.x-k8s.io/node=fake, keeps their Leases, makes them Ready and runs the pods
# bound to them (e2e/kwok/stages.yaml).
#
# The kubeconfig is build/e2e/kubeconfig, as for scripts/e2e-cluster.sh; the two clusters use
# the same ports, so only one of them runs at a time.
#
# Environment:
#   E2E_SCALE_DIR  state and logs (default: <repo>/build/e2e/scale)
#   E2E_BIN        the upstream binaries and kwok (default: <repo>/build/e2e/bin)
#   GPUSHARE_BIN   gpushare's binaries (default: <repo>/build/bin)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export E2E_DIR=${E2E_SCALE_DIR:-$repo/build/e2e/scale}
export E2E_NODES=""
# The control plane's functions (start_etcd, start_apiserver, ...); sourcing defines them only.
# shellcheck source=e2e-cluster.sh
source "$repo/scripts/e2e-cluster.sh"
# e2e_tools (and the burst helpers, unused here); sourcing defines functions only.
# shellcheck source=e2e-scale-lib.sh
source "$repo/scripts/e2e-scale-lib.sh"

log() { echo "e2e-scale: $*"; }
die() { echo "e2e-scale: error: $*" >&2; exit 1; }

default_nodes="$repo/../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv"
kwok_server=127.0.0.1:10247
scheduler_health=127.0.0.1:12346
harness_label=gpushare.io/scale-harness=true
kctl() { "$bin/kubectl" --kubeconfig "$kubeconfig_out" "$@"; }

scale_check_host() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (like scripts/e2e-cluster.sh)"
  local t
  for t in openssl curl python3; do
    command -v "$t" >/dev/null || die "$t not found; run scripts/install-deps.sh"
  done
  local b missing=0
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl helm; do
    [ -x "$bin/$b" ] || missing=1
  done
  if [ $missing = 1 ]; then
    log "upstream binaries missing in $bin; building (scripts/e2e-build.sh)"
    E2E_PARTS="kubernetes helm" "$repo/scripts/e2e-build.sh"
  fi
  # kwok only when missing or out of date (the part's stamp decides).
  E2E_PARTS=kwok "$repo/scripts/e2e-build.sh" | grep -v ' is current ' || true
  [ -x "$bin/kwok" ] || die "$bin/kwok missing after E2E_PARTS=kwok scripts/e2e-build.sh"
  [ -x "$gpushare_bin/gpushare-node" ] && [ -x "$gpushare_bin/gpushare-scheduler" ] ||
    die "gpushare-node and gpushare-scheduler not in $gpushare_bin (ninja -C build gpushare-node gpushare-scheduler)"
  # The 3-node cluster uses the same ports.
  local other="$repo/build/e2e/cluster/pids/kube-apiserver.pid"
  if [ "$dir" != "$repo/build/e2e/cluster" ] && [ -f "$other" ]; then
    local pid
    read -r pid _ <"$other" || true
    if [ -n "${pid:-}" ] && [ -d "/proc/$pid" ]; then
      die "the e2e cluster (scripts/e2e-cluster.sh) runs (kube-apiserver pid $pid); run 'scripts/e2e-cluster.sh down' first"
    fi
  fi
}

# Writes the filter's setting for profile $1 to $dir/keep: two, 0 (gpushare-scheduler's filter
# passes every node that fits, and kube-scheduler ranks them with prioritize); the others, the
# chart's 1. True when it changed, so that a gpushare-scheduler running with the other one must
# start again.
set_keep() {
  local keep=1 was=1
  [ "$1" = two ] && keep=0
  [ -f "$dir/keep" ] && was=$(cat "$dir/keep")
  echo "$keep" >"$dir/keep"
  [ "$keep" != "$was" ]
}

# gpushare-scheduler's arguments as the chart renders them in extender mode (helm template with
# the chart's defaults but the policy of $dir/policy), one per line; the node address of
# --health-listen is loopback here.
chart_scheduler_args() {
  local policy=default
  [ -f "$dir/policy" ] && policy=$(cat "$dir/policy")
  local keep=1
  [ -f "$dir/keep" ] && keep=$(cat "$dir/keep")
  # The target workload: the chart's ConfigMap, whose mount here is the file itself.
  local workload=()
  [ -f "$dir/target-workload.csv" ] &&
    workload=(--set-file scheduler.targetWorkload="$dir/target-workload.csv")
  "$bin/helm" template gpushare "$repo/deploy/helm/gpushare" --set scheduler.mode=extender \
    --set scheduler.policy="$policy" --set scheduler.filterKeepBest="$keep" "${workload[@]}" |
    WORKLOAD="$dir/target-workload.csv" python3 -c '
import os, sys, yaml
mounted = "/etc/gpushare-scheduler/target-workload/workload.csv"
for doc in yaml.safe_load_all(sys.stdin):
    if not doc or doc.get("kind") != "DaemonSet":
        continue
    for c in doc["spec"]["template"]["spec"]["containers"]:
        if c["name"] == "gpushare-scheduler":
            for a in c.get("args", []):
                print(a.replace("$(POD_IP)", "127.0.0.1").replace(mounted, os.environ["WORKLOAD"]))
            sys.exit(0)
sys.exit("no gpushare-scheduler container in the chart'"'"'s extender DaemonSet")
'
}

start_scale_gpushare_scheduler() {
  pid_alive gpushare-scheduler && return 0
  local args
  mapfile -t args < <(chart_scheduler_args)
  [ "${#args[@]}" -gt 0 ] || die "could not render gpushare-scheduler's arguments from the chart"
  printf '%s\n' "${args[@]}" >"$dir/gpushare-scheduler.args"
  start_bg gpushare-scheduler "$logs/gpushare-scheduler.log" "$gpushare_bin/gpushare-scheduler" \
    "$gpushare_bin/gpushare-scheduler" "${args[@]}" --kubeconfig "$kubeconfig_out"
  wait_up gpushare-scheduler 60 curl -sf -m 2 "http://$scheduler_health/healthz"
}

# kube-scheduler with deploy/kube-scheduler-config.yaml (profiles "default" and "two", which
# differ in gpushare-scheduler's --filter-keep-best: the chart's 1, one exchange per pod, or 0,
# every node that fits passed and ranked with prioritize: two exchanges), or (profile
# "replay", for gpushare replay) the same with the protocol of FGD's simulator
# (../shared/reference/fgd-benchmark.md): every node scored (percentageOfNodesToScore 100),
# kube-scheduler's own score plugins off, and a second extender entry that ranks the pods asking
# no GPU, so that the policy's ranking alone decides where every pod goes, as the engine's
# policy alone decides in gpushare simulate.
start_scale_kube_scheduler() {
  pid_alive kube-scheduler && return 0
  local profile=default
  [ -f "$dir/profile" ] && profile=$(cat "$dir/profile")
  if [ "$profile" = replay ]; then
    scheduler_config | python3 -c '
import sys, yaml
c = yaml.safe_load(sys.stdin)
c["percentageOfNodesToScore"] = 100
c["profiles"] = [{"schedulerName": "default-scheduler",
                  "plugins": {"score": {"disabled": [{"name": "*"}]}}}]
# Pods asking no GPU are ranked by the policy too (the verb prioritize-cpu; an
# entry without managedResources is called for every pod), as the simulator places them.
gpu = c["extenders"][0]
c["extenders"].append({"urlPrefix": gpu["urlPrefix"], "prioritizeVerb": "prioritize-cpu",
                       "weight": gpu["weight"], "nodeCacheCapable": True,
                       "httpTimeout": gpu.get("httpTimeout", "10s"), "ignorable": False})
yaml.safe_dump(c, sys.stdout, sort_keys=False)
' >"$dir/kube-scheduler-config.yaml"
  else
    scheduler_config >"$dir/kube-scheduler-config.yaml"
  fi
  # replicas 2: two kube-schedulers electing a leader (kube-system/kube-scheduler Lease), the
  # second on secure port 10260.
  local replicas
  replicas=$(cat "$dir/replicas" 2>/dev/null || echo 1)
  if [ "$replicas" = 2 ]; then
    python3 - "$dir/kube-scheduler-config.yaml" <<'EOF2'
import sys, yaml
path = sys.argv[1]
c = yaml.safe_load(open(path))
c["leaderElection"] = {"leaderElect": True, "resourceNamespace": "kube-system",
                       "resourceName": "kube-scheduler"}
yaml.safe_dump(c, open(path, "w"), sort_keys=False)
EOF2
  fi
  # profile NAME QPS: kube-scheduler's API client at QPS (burst twice that) instead of its
  # defaults (50, 100), which bound how fast it binds what it places alone.
  if [ -n "$(cat "$dir/qps" 2>/dev/null)" ]; then
    python3 - "$dir/kube-scheduler-config.yaml" "$(cat "$dir/qps")" <<'EOF2'
import sys, yaml
path, qps = sys.argv[1], int(sys.argv[2])
c = yaml.safe_load(open(path))
c.setdefault("clientConnection", {}).update({"qps": qps, "burst": 2 * qps})
yaml.safe_dump(c, open(path, "w"), sort_keys=False)
EOF2
  fi
  run_scheduler_with_config
  if [ "$replicas" = 2 ] && ! pid_alive kube-scheduler-2; then
    start_bg kube-scheduler-2 "$logs/kube-scheduler-2.log" "$bin/kube-scheduler" "$bin/kube-scheduler" \
      --config "$dir/kube-scheduler-config.yaml" \
      --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
      --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
      --bind-address 127.0.0.1 --secure-port 10260 --profiling=false --v=1
  fi
}

# The kube-scheduler replica that leads (its pid name: kube-scheduler or kube-scheduler-2), from
# each one's leader_election_master_status; empty when none does yet.
scheduler_leader() {
  local name port token
  token=$(kctl create token scale-scraper -n kube-system 2>/dev/null) || true
  for name in kube-scheduler kube-scheduler-2; do
    port=10259
    [ "$name" = kube-scheduler-2 ] && port=10260
    pid_alive "$name" || continue
    # Read whole, then matched (grep -q closing the pipe early fails curl, and so the pipeline).
    if grep -q '^leader_election_master_status{name="kube-scheduler"} 1' < <(curl -sfk -m 10 \
      ${token:+-H "Authorization: Bearer $token"} "https://127.0.0.1:$port/metrics"); then
      echo "$name"
      return 0
    fi
  done
}

# await_leader SECONDS: scheduler_leader, asked once a second until one leads (empty if none).
await_leader() {
  local leader=""
  for _ in $(seq "$1"); do
    leader=$(scheduler_leader)
    [ -n "$leader" ] && break
    sleep 1
  done
  echo "$leader"
}

# Waits until gpushare-scheduler sees every node of the harness.
wait_scheduler_nodes() {
  local want=$1 seen=""
  for _ in $(seq 90); do
    seen=$(scheduler_nodes || true)
    [ "${seen:-0}" -ge "$want" ] && break
    sleep 1
  done
  [ "${seen:-0}" -ge "$want" ] || die "gpushare-scheduler sees ${seen:-no} of $want nodes; see $logs/gpushare-scheduler.log"
  echo "$seen"
}

start_kwok() {
  pid_alive kwok && return 0
  start_bg kwok "$logs/kwok.log" "$bin/kwok" "$bin/kwok" \
    --kubeconfig "$dir/kwok.kubeconfig" --config "$repo/e2e/kwok/stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --node-ip 10.255.1.1 --cidr 10.128.0.0/9 --node-lease-duration-seconds 40 \
    --server-address "$kwok_server"
  wait_up kwok 60 curl -sf -m 2 "http://$kwok_server/healthz"
}

# The node agent's confirmations for the fake nodes (e2e/cmd/fakeagent): what gpushare-node
# writes on a real node once kubelet allocated a pod's GPUs, so that gpushare-scheduler's
# restart hold (it waits for pending pods to be confirmed) ends on the harness as on a cluster.
start_fakeagent() {
  pid_alive fakeagent && return 0
  e2e_tools fakeagent || die "building e2e/cmd/fakeagent failed"
  start_bg fakeagent "$logs/fakeagent.log" "$bin/fakeagent" "$bin/fakeagent" \
    --kubeconfig "$dir/kwok.kubeconfig" --node-label "$harness_label"
  wait_up fakeagent 60 grep -q '^fakeagent: confirming' "$logs/fakeagent.log"
}

# Ready nodes of the harness, as a count.
ready_nodes() {
  kctl get nodes -l "$harness_label" -o jsonpath='{range .items[*]}{range .status.conditions[?(@.type=="Ready")]}{.status}{"\n"}{end}{end}' |
    grep -c '^True$' || true
}

# make_nodes csv count: creates the missing nodes of the list and deletes the harness's nodes the
# list lacks; waits for all of them to be Ready.
make_nodes() {
  local csv=$1 count=$2 out="$dir/nodes" want have
  rm -rf "$out"
  local args=(--nodes "$csv" --gpushare-node "$gpushare_bin/gpushare-node"
    --config "$repo/e2e/kwok/node-config.yaml" --out-dir "$out")
  [ "$count" -gt 0 ] && args+=(--count "$count")
  log "nodes from $csv$([ "$count" -gt 0 ] && echo " (first $count)"): $(python3 "$repo/e2e/kwok/make_nodes.py" "${args[@]}")"
  python3 -c '
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/nodes-*.json")):
    for n in json.load(open(f))["items"]:
        print(n["metadata"]["name"])
' "$out" | sort >"$out/want"
  kctl get nodes -l "$harness_label" -o name | sed 's#^node/##' | sort >"$out/have"
  comm -13 "$out/want" "$out/have" >"$out/extra"
  if [ -s "$out/extra" ]; then
    # One DELETE per node runs at a few nodes per second; a delete-collection of every node of
    # the harness is one request, and the wanted ones are created again below.
    log "$(wc -l <"$out/extra") nodes of an earlier list: deleting the harness's $(wc -l <"$out/have") nodes (one delete-collection)"
    kctl delete --raw "/api/v1/nodes?labelSelector=${harness_label/=/%3D}" >/dev/null ||
      die "deleting the nodes of an earlier list failed"
    local left
    for _ in $(seq 120); do
      left=$(kctl get nodes -l "$harness_label" -o name | wc -l)
      [ "$left" -eq 0 ] && break
      sleep 1
    done
    [ "$left" -eq 0 ] || die "$left nodes of the harness still there 120 s after their deletion"
    : >"$out/have"
  fi
  # Create only the missing ones (a Node keeps the status it is created with: its allocatable).
  python3 -c '
import glob, json, sys
have = set(open(sys.argv[2]).read().split())
for f in sorted(glob.glob(sys.argv[1] + "/nodes-*.json")):
    d = json.load(open(f))
    d["items"] = [n for n in d["items"] if n["metadata"]["name"] not in have]
    json.dump(d, open(f, "w"))
' "$out" "$out/have"
  local f start
  start=$(date +%s)
  for f in "$out"/nodes-*.json; do
    grep -q '"items": \[\]' "$f" && continue
    kctl create -f "$f" >/dev/null || die "creating the nodes of $f failed"
  done
  want=$(wc -l <"$out/want")
  log "waiting for $want nodes to be Ready (kwok)"
  local deadline=$(($(date +%s) + 120 + want / 5))
  while true; do
    have=$(ready_nodes)
    [ "$have" -ge "$want" ] && break
    pid_alive kwok || die "kwok exited; see $logs/kwok.log"
    [ "$(date +%s)" -lt "$deadline" ] || die "$have of $want nodes Ready after $((deadline - start)) s; see $logs/kwok.log"
    sleep 2
  done
  log "$want nodes Ready in $(($(date +%s) - start)) s"
  # Ready is not schedulable yet: the node lifecycle controller lifts the not-ready taint a few
  # seconds later. A pod created before then is refused ("untolerated taint"), which a replay
  # would count as the policy's failure.
  # The controller lifts it when it processes an update of the node; kwok renews Leases but
  # sends no status heartbeat, so a node whose Ready update it handled before Ready stays
  # tainted (169 of 1,213 here, for minutes). Touching such a node (an annotation) is the update
  # a kubelet's heartbeat would have been.
  local tries=0
  while true; do
    have=$(tainted_nodes)
    [ "$have" = 0 ] && break
    [ "$(date +%s)" -lt "$deadline" ] || die "$have nodes still tainted after $((deadline - start)) s; see $logs/kube-controller-manager.log"
    if [ $((++tries % 5)) = 0 ]; then
      # shellcheck disable=SC2046  # one argument per node name
      touch_nodes $(kctl get nodes -l "$harness_label" -o jsonpath='{range .items[*]}{.metadata.name} {.spec.taints[*].key}{"\n"}{end}' | awk '$2 != "" {print $1}')
    fi
    sleep 1
  done
  log "$want nodes schedulable (no taints) in $(($(date +%s) - start)) s"
}

# touch_nodes NAME...: an annotation changed on each node, 50 nodes per kubectl call (the names
# go before the KEY=VALUE, else kubectl refuses: "all resources must be specified before
# annotation changes").
touch_nodes() {
  local stamp names=("$@") i jobs=()
  stamp="gpushare.io/scale-touch=$(date +%s)"
  # 8 kubectl calls at once (each reads, then patches, its nodes one by one). Waited for by pid:
  # a bare `wait` would wait for the daemons this shell started too.
  for ((i = 0; i < ${#names[@]}; i += 50)); do
    kctl annotate node "${names[@]:i:50}" --overwrite "$stamp" >/dev/null 2>&1 &
    jobs+=($!)
    if [ "${#jobs[@]}" = 8 ]; then
      wait "${jobs[@]}" || true
      jobs=()
    fi
  done
  [ "${#jobs[@]}" = 0 ] || wait "${jobs[@]}" || true
}

# Harness nodes with a taint (not-ready, unreachable, ...), as a count.
tainted_nodes() {
  kctl get nodes -l "$harness_label" -o jsonpath='{range .items[*]}{.spec.taints[*].key}{"\n"}{end}' |
    grep -c . || true
}

# A ServiceAccount allowed GET /metrics, as Prometheus is (--metrics-auth=kubernetes).
ensure_scraper() {
  kctl apply -f - >/dev/null <<'EOF2'
apiVersion: v1
kind: ServiceAccount
metadata: {name: scale-scraper, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gpushare-scale-metrics-reader}
rules:
- nonResourceURLs: ["/metrics"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gpushare-scale-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gpushare-scale-metrics-reader}
subjects:
- {kind: ServiceAccount, name: scale-scraper, namespace: kube-system}
EOF2
}

# The scheduler's view: nodes with a readable inventory (gpushare_scheduler_cache_nodes).
scheduler_nodes() {
  local token
  token=$(kctl create token scale-scraper -n kube-system 2>/dev/null) || true
  curl -sf -m 5 ${token:+-H "Authorization: Bearer $token"} "http://$scheduler_health/metrics" |
    awk '$1 == "gpushare_scheduler_cache_nodes" {print $2}'
}

cmd_up() {
  local csv=$default_nodes count=0 policy=default profile=default
  while [ $# -gt 0 ]; do
    case $1 in
      --nodes) csv=${2:?--nodes needs a file}; shift 2 ;;
      --count) count=${2:?--count needs a number}; shift 2 ;;
      --policy) policy=${2:?--policy needs a name}; shift 2 ;;
      --profile) profile=${2:?--profile needs default, two or replay}; shift 2 ;;
      *) die "up: unknown argument '$1' (want --nodes FILE, --count N, --policy NAME, --profile default|two|replay)" ;;
    esac
  done
  case $profile in default | two | replay) ;; *) die "--profile must be default, two or replay, not '$profile'" ;; esac
  [ -r "$csv" ] || die "node list $csv not readable (--nodes FILE; the default is in ../shared/data)"
  [[ $count =~ ^[0-9]+$ ]] || die "--count must be a number, not '$count'"
  scale_check_host
  mkdir -p "$logs" "$pids"
  echo "$policy" >"$dir/policy"
  echo "$profile" >"$dir/profile"
  # The filter's setting follows the profile; a gpushare-scheduler left running with the other
  # one is started again.
  if set_keep "$profile"; then stop_pid gpushare-scheduler 20; fi
  : >"$dir/qps"
  [ -f "$dir/replicas" ] || echo 1 >"$dir/replicas"
  make_pki
  make_cert kwok "/O=system:masters/CN=kwok-controller" "" client
  write_kubeconfig "$kubeconfig_out" admin
  write_kubeconfig "$dir/controller-manager.kubeconfig" controller-manager
  write_kubeconfig "$dir/scheduler.kubeconfig" scheduler
  write_kubeconfig "$dir/kwok.kubeconfig" kwok

  start_etcd
  start_apiserver
  start_controller_manager
  start_scale_kube_scheduler
  ensure_scraper
  start_scale_gpushare_scheduler
  start_kwok
  start_fakeagent
  make_nodes "$csv" "$count"
  local want seen
  want=$(wc -l <"$dir/nodes/want")
  seen=$(wait_scheduler_nodes "$want")
  log "up: $want fake nodes, gpushare-scheduler sees $seen with a GPU inventory (policy $policy, kube-scheduler profile $profile)"
  print_scale
}

print_scale() {
  echo "kubeconfig: $kubeconfig_out   (export KUBECONFIG=$kubeconfig_out; $bin/kubectl get nodes -l $harness_label)"
  echo "logs:       $logs/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,gpushare-scheduler,kwok}.log"
  echo "gpushare-scheduler: extender on 127.0.0.1:12345, health and metrics on $scheduler_health (args: $dir/gpushare-scheduler.args)"
}

cmd_down() {
  mkdir -p "$pids"
  stop_pid fakeagent 10
  stop_pid kube-scheduler-2 20
  stop_pid hamistandin 10
  stop_pid kube-scheduler-hami 20
  stop_pid hami-scheduler 20
  stop_pid kwok 10
  stop_control_plane
  log "down (state kept in $dir; remove it for a fresh cluster)"
}

cmd_status() {
  local ok=0 name
  local extra=""
  [ "$(cat "$dir/replicas" 2>/dev/null)" = 2 ] && extra=kube-scheduler-2
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler $extra gpushare-scheduler kwok fakeagent; do
    if pid_alive "$name"; then echo "$name: running (pid $(pid_of "$name"))"; else echo "$name: stopped"; ok=1; fi
  done
  if pid_alive kube-apiserver; then
    local total gpus mem
    total=$(kctl get nodes -l "$harness_label" -o name | wc -l)
    read -r gpus mem < <(kctl get nodes -l "$harness_label" -o jsonpath='{range .items[*]}{.status.allocatable.aliyun\.com/gpu-count} {.status.allocatable.aliyun\.com/gpu-mem}{"\n"}{end}' |
      awk '{g += $1; m += $2} END {print g + 0, m + 0}')
    echo "nodes: $(ready_nodes) of $total Ready; $gpus GPUs, $mem aliyun.com/gpu-mem allocatable"
    if pid_alive gpushare-scheduler; then echo "gpushare-scheduler: $(scheduler_nodes || echo '?') nodes with a GPU inventory"; fi
    echo "pods: $(kctl get pods -A --no-headers 2>/dev/null | wc -l)"
  fi
  print_scale
  return $ok
}

# policy NAME [--target-workload FILE]: gpushare-scheduler again, with --policy NAME (the
# cluster's pods are its truth) and FILE as its target workload (without: it learns it).
cmd_policy() {
  local policy=${1:?policy needs a name (default, fgd, bestfit, ...)}
  shift
  local workload=""
  case "${1:-}" in
    --target-workload) workload=${2:?--target-workload needs a file}; shift 2 ;;
    "") ;;
    *) die "policy: unknown argument '$1' (want --target-workload FILE)" ;;
  esac
  pid_alive kube-apiserver || die "the harness is not up"
  echo "$policy" >"$dir/policy"
  rm -f "$dir/target-workload.csv"
  if [ -n "$workload" ]; then
    [ -r "$workload" ] || die "policy: $workload is not readable"
    cp "$workload" "$dir/target-workload.csv"
  fi
  stop_pid gpushare-scheduler 20
  start_scale_gpushare_scheduler
  local want
  want=$(wc -l <"$dir/nodes/want")
  wait_scheduler_nodes "$want" >/dev/null
  log "gpushare-scheduler runs with --policy $policy${workload:+ and the target workload $workload}"
}

# replicas 1|2: kube-scheduler again, alone (no leader election) or as two replicas electing a
# leader.
cmd_replicas() {
  local n=${1:?replicas needs 1 or 2}
  case $n in 1 | 2) ;; *) die "replicas must be 1 or 2, not '$n'" ;; esac
  pid_alive kube-apiserver || die "the harness is not up"
  echo "$n" >"$dir/replicas"
  stop_pid kube-scheduler-2 20
  stop_pid kube-scheduler 20
  start_scale_kube_scheduler
  wait_up kube-scheduler 60 curl -sfk -m 2 https://127.0.0.1:10259/healthz
  if [ "$n" = 2 ]; then
    local leader
    leader=$(await_leader 60)
    [ -n "$leader" ] || die "no kube-scheduler replica became leader in 60 s; see $logs/kube-scheduler*.log"
    log "kube-scheduler runs as 2 replicas; $leader leads"
  else
    log "kube-scheduler runs alone"
  fi
}

# fault NAME: one fault, as a cluster sees it, and the component back as its controller would
# bring it back:
#   gpushare-scheduler  its pod killed (SIGKILL), started again after 1 s (the Deployment);
#   kube-apiserver      restarted (SIGTERM, then started again; clients reconnect);
#   leader              the leading kube-scheduler killed (SIGKILL): the other replica takes the
#                       Lease when it expires (15 s); the killed one started again as standby.
cmd_fault() {
  local what=${1:?fault needs gpushare-scheduler, kube-apiserver or leader} t leader
  pid_alive kube-apiserver || die "the harness is not up"
  t=$(date +%s.%N)
  case $what in
    gpushare-scheduler)
      kill -KILL "$(pid_of gpushare-scheduler)" 2>/dev/null || true
      rm -f "$pids/gpushare-scheduler.pid"
      sleep 1
      start_scale_gpushare_scheduler ;;
    kube-apiserver)
      stop_pid kube-apiserver 30
      start_apiserver ;;
    leader)
      leader=$(await_leader 30) # its /metrics may be slow to answer under load
      [ -n "$leader" ] || die "no kube-scheduler leads (replicas 2 first)"
      kill -KILL "$(pid_of "$leader")" 2>/dev/null || true
      rm -f "$pids/$leader.pid"
      local next
      next=$(await_leader 60)
      [ -n "$next" ] || die "no kube-scheduler took the lead within 60 s of killing $leader"
      start_scale_kube_scheduler
      what="leader ($leader killed, $next leads)" ;;
    *) die "fault: unknown '$what' (want gpushare-scheduler, kube-apiserver or leader)" ;;
  esac
  log "fault: $what: back in $(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
}

# hami on [QPS] [DELAY]: HAMi's scheduler beside gpushare's on the same nodes
# (scripts/e2e-scale-hami.sh, docs/e2e.md "HAMi side by side"), run as HAMi's chart runs it:
#   hami-scheduler (E2E_PARTS=hami scripts/e2e-build.sh) with the arguments of its chart's
#     Deployment, except what a host process cannot have (TLS files, leader election) and the
#     addresses (loopback); with QPS, --kube-qps QPS --kube-burst 2xQPS (the chart sets neither:
#     HAMi's defaults are 5 and 10); with HAMI_QUIET=1 also without the chart's --debug and
#     -v=4 (its log then holds no line per node per filter: HAMi's best case);
#   kube-scheduler-hami: a second kube-scheduler (secure port 10261) with the
#     KubeSchedulerConfiguration of HAMi's chart (profile hami-scheduler; one extender, filter
#     and bind), pointed at it over plain HTTP, with this harness's client QPS;
#   hamistandin (e2e/cmd/hamistandin): HAMi's device plugin's part: every node registered as the
#     plugin registers it, and each bind completed DELAY (a Go duration, default 0s) after it
#     is seen, as the plugin completes it after kubelet's Allocate (the node lock released).
# hami off: the three stopped.
hami_port=12350
cmd_hami() {
  local what=${1:?hami needs on or off} qps=${2:-} delay=${3:-0s}
  stop_pid hamistandin 10
  stop_pid kube-scheduler-hami 20
  stop_pid hami-scheduler 20
  if [ "$what" = off ]; then
    log "HAMi's scheduler stopped"
    return 0
  fi
  [ "$what" = on ] || die "hami: want on or off, not '$what'"
  [ -z "$qps" ] || [[ $qps =~ ^[1-9][0-9]*$ ]] || die "hami: QPS must be a positive number, not '$qps'"
  pid_alive kube-apiserver || die "the harness is not up"
  E2E_PARTS=hami "$repo/scripts/e2e-build.sh" | grep -v ' is current ' || true
  [ -x "$bin/hami-scheduler" ] || die "$bin/hami-scheduler missing after E2E_PARTS=hami scripts/e2e-build.sh"
  local h="$dir/hami"
  mkdir -p "$h"
  "$bin/helm" template hami "$bin/hami-chart" --show-only templates/scheduler/device-configmap.yaml |
    python3 -c 'import sys, yaml; sys.stdout.write(yaml.safe_load(sys.stdin)["data"]["device-config.yaml"])' \
    >"$h/device-config.yaml" || die "rendering HAMi's device config from its chart failed"
  local args
  mapfile -t args < <("$bin/helm" template hami "$bin/hami-chart" --show-only templates/scheduler/deployment.yaml |
    python3 -c '
import sys, yaml
d = yaml.safe_load(sys.stdin)
for c in d["spec"]["template"]["spec"]["containers"]:
    if c["name"] != "vgpu-scheduler-extender":
        continue
    for a in c["command"][1:] + c.get("args", []):
        k = a.split("=", 1)[0]
        if k in ("--cert_file", "--key_file", "--leader-elect", "--leader-elect-resource-name",
                 "--leader-elect-resource-namespace", "--http_bind", "--metrics-bind-address",
                 "--device-config-file"):
            continue
        # HAMI_QUIET=1: without the debug logging of the chart (its best case).
        if sys.argv[1] == "1" and (k in ("--debug", "-v", "--v")):
            continue
        print(a)
    sys.exit(0)
sys.exit("no vgpu-scheduler-extender container in HAMi'"'"'s chart")
' "${HAMI_QUIET:-0}")
  [ "${#args[@]}" -gt 0 ] || die "could not render hami-scheduler's arguments from its chart"
  args+=(--http_bind="127.0.0.1:$hami_port" --metrics-bind-address="127.0.0.1:$((hami_port + 1))"
    --device-config-file="$h/device-config.yaml")
  [ -z "$qps" ] || args+=(--kube-qps="$qps" --kube-burst="$((2 * qps))")
  printf '%s\n' "${args[@]}" >"$h/hami-scheduler.args"
  KUBECONFIG="$kubeconfig_out" start_bg hami-scheduler "$logs/hami-scheduler.log" "$bin/hami-scheduler" \
    "$bin/hami-scheduler" "${args[@]}"
  wait_up hami-scheduler 60 curl -sf -m 2 "http://127.0.0.1:$hami_port/healthz"
  "$bin/helm" template hami "$bin/hami-chart" --show-only templates/scheduler/configmap.yaml |
    python3 -c '
import sys, yaml
d = yaml.safe_load(sys.stdin)
c = yaml.safe_load(d["data"]["config.yaml"])
c["leaderElection"] = {"leaderElect": False}
c["clientConnection"] = {"kubeconfig": sys.argv[1]}
qps = sys.argv[3]
if qps:
    c["clientConnection"].update({"qps": int(qps), "burst": 2 * int(qps)})
for e in c["extenders"]:
    e["urlPrefix"] = "http://127.0.0.1:" + sys.argv[2]
    e["enableHTTPS"] = False
    e.pop("tlsConfig", None)
yaml.safe_dump(c, sys.stdout, sort_keys=False)
' "$dir/scheduler.kubeconfig" "$hami_port" "$(cat "$dir/qps" 2>/dev/null)" >"$h/kube-scheduler-config.yaml" ||
    die "rendering HAMi's KubeSchedulerConfiguration from its chart failed"
  start_bg kube-scheduler-hami "$logs/kube-scheduler-hami.log" "$bin/kube-scheduler" "$bin/kube-scheduler" \
    --config "$h/kube-scheduler-config.yaml" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 10261 --profiling=false --v=1
  wait_up kube-scheduler-hami 60 curl -sfk -m 2 https://127.0.0.1:10261/healthz
  e2e_tools hamistandin || die "building e2e/cmd/hamistandin failed"
  start_bg hamistandin "$logs/hamistandin.log" "$bin/hamistandin" "$bin/hamistandin" \
    --kubeconfig "$dir/kwok.kubeconfig" --node-label "$harness_label" --allocate-delay "$delay"
  wait_up hamistandin 300 grep -q '^hamistandin: registered' "$logs/hamistandin.log"
  log "HAMi $(cat "$bin/hami-scheduler.commit" 2>/dev/null) scheduler up (client QPS ${qps:-5, its default}), $(grep '^hamistandin: registered' "$logs/hamistandin.log" | tail -1 | sed 's/^hamistandin: //'), binds completed after $delay"
}

# profile default|two|replay [QPS]: kube-scheduler again with that configuration (and its API
# client at QPS, burst 2 x QPS, when given; else kube-scheduler's defaults).
cmd_profile() {
  local profile=${1:?profile needs default, two or replay} qps=${2:-}
  case $profile in default | two | replay) ;; *) die "profile must be default, two or replay, not '$profile'" ;; esac
  [ -z "$qps" ] || [[ $qps =~ ^[1-9][0-9]*$ ]] || die "profile: QPS must be a positive number, not '$qps'"
  pid_alive kube-apiserver || die "the harness is not up"
  echo "$profile" >"$dir/profile"
  printf '%s' "$qps" >"$dir/qps"
  if set_keep "$profile"; then
    stop_pid gpushare-scheduler 20
    start_scale_gpushare_scheduler
    wait_scheduler_nodes "$(wc -l <"$dir/nodes/want")" >/dev/null
  fi
  stop_pid kube-scheduler 20
  start_scale_kube_scheduler
  wait_up kube-scheduler 60 curl -sfk -m 2 https://127.0.0.1:10259/healthz
  log "kube-scheduler runs with profile $profile${qps:+, client QPS $qps}"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  purge) cmd_down && rm -rf "$dir" ;;
  status) cmd_status ;;
  policy) shift; cmd_policy "$@" ;;
  profile) shift; cmd_profile "$@" ;;
  replicas) shift; cmd_replicas "$@" ;;
  fault) shift; cmd_fault "$@" ;;
  hami) shift; cmd_hami "$@" ;;
  *) echo "usage: $0 up [--nodes FILE] [--count N] [--policy NAME] [--profile default|two|replay] | down | purge | status | policy NAME [--target-workload FILE] | profile default|two|replay [QPS] | replicas 1|2 | fault gpushare-scheduler|kube-apiserver|leader | hami on [QPS] [DELAY] | hami off" >&2; exit 2 ;;
esac
