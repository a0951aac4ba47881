#!/usr/bin/env bash
# gpushare on the e2e cluster (docs/e2e.md, issue 11 sections 3 and 4, then issue 12 section 4
# through scripts/e2e-helm.sh): the real kubelets,
# kube-scheduler and API server with gpushare-node and gpushare-scheduler as host processes on
# simulated GPUs. Brings the cluster up (with gpushare), checks what the kubelets advertise and
# that GPU pods run where and with what they should, then takes the cluster down.
#   E2E_KEEP=1  leave the cluster up afterwards
#   E2E_UPDATE_GOLDEN=1  rewrite e2e/testdata/inspect.golden (gpushare inspect of the cluster)
# Each check fails with a message naming what was wrong. Needs root, the binaries of
# scripts/e2e-build.sh and build/bin/gpushare-{node,scheduler}.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cluster="$repo/scripts/e2e-cluster.sh"
bin=${E2E_BIN:-$repo/build/e2e/bin}
kubectl="$bin/kubectl"
export KUBECONFIG="$repo/build/e2e/kubeconfig"
state=${E2E_DIR:-$repo/build/e2e/cluster}
pids="$state/pids"
gpushare_bin=${GPUSHARE_BIN:-$repo/build/bin}
ns=e2e-gpushare
export E2E_NODES="ts mig mem"

fail() { echo "e2e-test: FAIL: $*" >&2; exit 1; }
cleanup() {
  local rc=$?
  # Whatever the test cordoned or stopped (read $? first: any command here would replace it).
  local f
  for f in "$pids"/kubelet-*.pid "$pids/kube-scheduler.pid"; do
    [ -f "$f" ] && kill -CONT "$(cut -d' ' -f1 "$f")" 2>/dev/null || true
  done
  "$kubectl" uncordon mig >/dev/null 2>&1 || true
  "$kubectl" uncordon ts >/dev/null 2>&1 || true
  "$kubectl" -n default delete ksvc helloworld-go --ignore-not-found >/dev/null 2>&1 || true
  "$kubectl" -n default delete deployment helloworld-go-00001-deployment --ignore-not-found >/dev/null 2>&1 || true
  "$kubectl" -n default delete pdb guard --ignore-not-found >/dev/null 2>&1 || true
  "$kubectl" delete priorityclass gpushare-e2e-serving --ignore-not-found >/dev/null 2>&1 || true
  if [ "${E2E_KEEP:-0}" != 1 ]; then "$cluster" down >/dev/null || rc=1; fi
  if [ $rc -eq 0 ]; then echo "e2e-test: PASS"; else echo "e2e-test: FAILED (rc=$rc); logs in $state/logs" >&2; fi
  exit $rc
}

for b in gpushare-node gpushare-scheduler; do
  [ -x "$gpushare_bin/$b" ] || fail "$gpushare_bin/$b missing (ninja -C build gpushare-node gpushare-scheduler)"
done
# The PodResources client and the bind-rate meter (e2e/cmd), built from the e2e module's pinned deps.
(cd "$repo/e2e" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath \
  -o "$bin/" ./cmd/podresources ./cmd/bindrate ./cmd/podwatch) || fail "building e2e/cmd failed"

trap cleanup EXIT
"$cluster" up
"$cluster" status >/dev/null || fail "status after up says something is stopped"
# A Helm release that an earlier, failed run left (etcd outlives `down`) would run a second
# gpushare-node beside the host processes, answering kubelet with its own library: gone first.
# The host agents then start again, so that theirs are the registrations kubelet holds.
if [ -x "$bin/helm" ] && "$bin/helm" status gpushare -n gpushare >/dev/null 2>&1; then
  echo "e2e-test: an earlier run's Helm release is installed: uninstalling it" >&2
  "$bin/helm" uninstall gpushare -n gpushare --wait --timeout 3m >/dev/null || fail "helm uninstall of the earlier release"
  "$kubectl" delete namespace gpushare e2e-helm --ignore-not-found --wait=true --timeout=180s >/dev/null
  "$cluster" host-gpushare-stop
  "$cluster" up
fi

# Helpers and the seed checks, shared with scripts/e2e-helm.sh.
source "$repo/scripts/e2e-lib.sh"

want_alloc ts nvidia.com/gpu 80
want_alloc mig nvidia.com/mig-1g.10gb 21
want_alloc mig nvidia.com/gpu 2
# 8 x A10 of 23028 MiB, in whole GiB: 8 x 22 = 176.
want_alloc mem aliyun.com/gpu-mem 176
want_alloc mem aliyun.com/gpu-count 8
[ -z "$(alloc mem nvidia.com/gpu)" ] || [ "$(alloc mem nvidia.com/gpu)" = 0 ] ||
  fail "node mem: its GPUs are memory-shared, yet it advertises nvidia.com/gpu $(alloc mem nvidia.com/gpu)"

"$kubectl" delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s >/dev/null
new_namespace "$ns"

# A time-slice on ts: NVIDIA_VISIBLE_DEVICES names one of the node's A10s.
gpu_pod slice ts nvidia.com/gpu 1
# A MIG share on mig: names one of the H100's MIG instances.
gpu_pod migshare mig nvidia.com/mig-1g.10gb 1
# A whole GPU on mig.
gpu_pod whole mig nvidia.com/gpu 1
# 3 GiB of one GPU, placed by kube-scheduler with gpushare-scheduler as extender (no selector:
# only node mem has the resource).
gpu_pod mem3 "" aliyun.com/gpu-mem 3
for p in slice migshare whole mem3; do running "$p"; done
"$kubectl" -n "$ns" get pods -o wide

check_visible() { # pod node inventory-file [uuid-prefix]
  local out dev
  out=$(logs_of "$1")
  echo "$1: $(tr '\n' ' ' <<<"$out")"
  [ "$("$kubectl" -n "$ns" get pod "$1" -o jsonpath='{.spec.nodeName}')" = "$2" ] || fail "pod $1 not on node $2"
  dev=$(sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p' <<<"$out")
  [ -n "$dev" ] || fail "pod $1: no NVIDIA_VISIBLE_DEVICES in its environment ('$out')"
  grep -qxF "$dev" <(uuids "$3" | grep "^${4:-}") || fail "pod $1: NVIDIA_VISIBLE_DEVICES=$dev is not a ${4:-}device of $3"
}
check_visible slice ts "$repo/examples/inventory/8x-a10.yaml" GPU-
check_visible migshare mig "$repo/e2e/gpushare/mig-inventory.yaml" MIG-
check_visible whole mig "$repo/e2e/gpushare/mig-inventory.yaml" GPU-
check_visible mem3 mem "$repo/examples/inventory/8x-a10.yaml" GPU-

# The memory pod: the GPU in its annotations (written by gpushare-scheduler at bind, confirmed
# by gpushare-node) is the GPU of the units kubelet's PodResources says the container holds.
annot() { "$kubectl" -n "$ns" get pod "$1" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"].get("annotations",{}).get(sys.argv[1],""))' "$2"; }
idx=""
for _ in $(seq 40); do
  idx=$(annot mem3 ALIYUN_COM_GPU_MEM_IDX)
  [ "$(annot mem3 ALIYUN_COM_GPU_MEM_ASSIGNED)" = true ] && [ -n "$idx" ] && break
  sleep 0.5
done
[ -n "$idx" ] || fail "pod mem3: no ALIYUN_COM_GPU_MEM_IDX annotation"
[ "$(annot mem3 ALIYUN_COM_GPU_MEM_ASSIGNED)" = true ] || fail "pod mem3: ALIYUN_COM_GPU_MEM_ASSIGNED is '$(annot mem3 ALIYUN_COM_GPU_MEM_ASSIGNED)', want true"
pr=$(node_pr mem) || fail "PodResources List on node mem failed"
# The real kubelet lists one ContainerDevices entry per device ID here (not one per resource),
# so the container's units are the IDs of all its lines.
lines=$(grep "^$ns/mem3/c aliyun.com/gpu-mem " <<<"$pr") || fail "PodResources of node mem has no aliyun.com/gpu-mem for $ns/mem3/c: $pr"
echo "e2e-test: PodResources of node mem for mem3:"; sed 's/^/  /' <<<"$lines"
read -r -a ids <<<"$(sed "s|^$ns/mem3/c aliyun.com/gpu-mem ||" <<<"$lines" | tr '\n' ' ')"
[ "${#ids[@]}" -eq 3 ] || fail "pod mem3 holds ${#ids[@]} units in PodResources, want 3: ${ids[*]}"
gpus=$(printf '%s\n' "${ids[@]}" | sed 's/-_-[0-9]*$//' | sort -u)
[ "$(wc -l <<<"$gpus")" -eq 1 ] || fail "pod mem3's units span several GPUs: $gpus"
# The GPU's index in the inventory.
want=$(uuids "$repo/examples/inventory/8x-a10.yaml" | grep -nxF "$gpus" | cut -d: -f1)
[ -n "$want" ] || fail "PodResources names GPU $gpus, not in the inventory"
want=$((want - 1))
[ "$idx" = "$want" ] || fail "pod mem3: ALIYUN_COM_GPU_MEM_IDX=$idx, but kubelet's PodResources gives it GPU $want ($gpus)"
env_idx=$(logs_of mem3 | sed -n 's/^ALIYUN_COM_GPU_MEM_IDX=//p')
[ "$env_idx" = "$want" ] || fail "pod mem3: its environment says ALIYUN_COM_GPU_MEM_IDX=$env_idx, PodResources GPU $want"
[ "$(logs_of mem3 | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p')" = "$gpus" ] || fail "pod mem3: NVIDIA_VISIBLE_DEVICES is not $gpus"
echo "e2e-test: pod mem3 on GPU $idx ($gpus) by annotation, environment and PodResources"

# The in-container library on node mem (scripts/e2e-cluster.sh passes --interposer-library
# when build/lib/libgpushare-cuda.so exists): gpushare-node installed it once at a versioned
# host path, and the real kubelet and runc mounted that file, the preload list and the limit
# into mem3's container.
gpushare_lib=${GPUSHARE_LIB:-$(dirname "$gpushare_bin")/lib/libgpushare-cuda.so}
lib_root="$state/nodes/mem/gpushare/lib"
if [ -f "$gpushare_lib" ]; then
  out=""
  for _ in $(seq 40); do  # the whole log: the md5sum line is its last before the sleep
    out=$("$kubectl" -n "$ns" logs mem3 2>/dev/null || true)
    grep -q ' /usr/local/gpushare/lib/libgpushare-cuda.so$' <<<"$out" && break
    sleep 0.5
  done
  grep -qxF 'CUDA_DEVICE_MEMORY_LIMIT_0=3072m' <<<"$out" || fail "pod mem3: no CUDA_DEVICE_MEMORY_LIMIT_0=3072m in its environment: $out"
  grep -qxF 'PRELOAD=/usr/local/gpushare/lib/libgpushare-cuda.so' <<<"$out" || fail "pod mem3: /etc/ld.so.preload does not name the library: $out"
  want_md5=$(md5sum <"$gpushare_lib" | cut -d' ' -f1)
  grep -qx "$want_md5  /usr/local/gpushare/lib/libgpushare-cuda.so" <<<"$out" ||
    fail "pod mem3: the library in the container is not $gpushare_lib (md5 $want_md5): $out"
  # (Versions of earlier runs' libraries stay: a directory is never removed or rewritten.)
  version=""
  for d in "$lib_root"/*/; do
    d=${d%/}
    [[ "$(basename "$d")" =~ ^[0-9]+\.[0-9]+\.[0-9]+-[0-9a-f]{16}$ ]] ||
      fail "node mem: $d in $lib_root is not a <version>-<hash> directory"
    if cmp -s "$gpushare_lib" "$d/libgpushare-cuda.so"; then
      [ -z "$version" ] || fail "node mem: $gpushare_lib installed twice: $version and $d"
      version=$d
    fi
  done
  [ -n "$version" ] || fail "node mem: $gpushare_lib is not installed in $lib_root: $(ls -A "$lib_root" 2>&1)"
  lib_installed="$version/libgpushare-cuda.so"
  lib_inode=$(stat -c %i "$lib_installed")
  lib_count=$(ls -A "$lib_root" | wc -l)
  echo "e2e-test: pod mem3: limit 3072m, /etc/ld.so.preload and the library (md5 $want_md5) from $version/"
else
  echo "e2e-test: $gpushare_lib not built: the in-container library checks SKIPPED"
fi

# Fractions and whole GPUs (alibabacloud.com/gpu-milli, docs/memory-shares.md): placed by
# gpushare-scheduler on node mem's memory-share GPUs, admitted by the real kubelet through
# gpushare-node's 1,000 devices per GPU, confirmed in the annotations; the fraction limited to
# 250/1000 of an A10's 23,028 MiB (5757m), the whole GPU not limited.
want_alloc mem alibabacloud.com/gpu-milli 8k  # 8,000, as the API server writes it
gpu_pod milli250 "" alibabacloud.com/gpu-milli 250
gpu_pod milli1000 "" alibabacloud.com/gpu-milli 1000
for p in milli250 milli1000; do running "$p"; done
check_visible milli250 mem "$repo/examples/inventory/8x-a10.yaml" GPU-
check_visible milli1000 mem "$repo/examples/inventory/8x-a10.yaml" GPU-
pr=$(node_pr mem) || fail "PodResources List on node mem failed"
for p in milli250:250 milli1000:1000; do
  name=${p%%:*} want_n=${p#*:}
  m_lines=$(grep "^$ns/$name/c alibabacloud.com/gpu-milli " <<<"$pr") ||
    fail "PodResources of node mem has no alibabacloud.com/gpu-milli for $ns/$name/c"
  read -r -a m_ids <<<"$(sed "s|^$ns/$name/c alibabacloud.com/gpu-milli ||" <<<"$m_lines" | tr '\n' ' ')"
  [ "${#m_ids[@]}" -eq "$want_n" ] || fail "pod $name holds ${#m_ids[@]} milli in PodResources, want $want_n"
  m_gpus=$(printf '%s\n' "${m_ids[@]}" | sed 's/-_-m[0-9]*$//' | sort -u)
  [ "$(wc -l <<<"$m_gpus")" -eq 1 ] || fail "pod $name's milli span several GPUs: $m_gpus"
  [ "$(logs_of "$name" | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p')" = "$m_gpus" ] ||
    fail "pod $name: NVIDIA_VISIBLE_DEVICES is not the GPU of its milli ($m_gpus)"
  m_want=$(( $(uuids "$repo/examples/inventory/8x-a10.yaml" | grep -nxF "$m_gpus" | cut -d: -f1) - 1 ))
  for _ in $(seq 40); do
    [ "$(annot "$name" ALIYUN_COM_GPU_MEM_ASSIGNED)" = true ] && break
    sleep 0.5
  done
  [ "$(annot "$name" ALIYUN_COM_GPU_MEM_ASSIGNED)" = true ] || fail "pod $name: not confirmed by gpushare-node"
  [ "$(annot "$name" ALIYUN_COM_GPU_MEM_IDX)" = "$m_want" ] ||
    fail "pod $name: ALIYUN_COM_GPU_MEM_IDX=$(annot "$name" ALIYUN_COM_GPU_MEM_IDX), PodResources GPU $m_want"
  echo "e2e-test: pod $name: $want_n milli of GPU $m_want ($m_gpus) by PodResources, environment and annotation"
done
if [ -f "$gpushare_lib" ]; then
  out=$(logs_of milli250)
  grep -qxF 'CUDA_DEVICE_MEMORY_LIMIT_0=5757m' <<<"$out" || fail "pod milli250: no CUDA_DEVICE_MEMORY_LIMIT_0=5757m in its environment: $out"
  out=$(logs_of milli1000)
  ! grep -q '^CUDA_DEVICE_MEMORY_LIMIT' <<<"$out" || fail "pod milli1000: a whole GPU with a memory limit: $out"
  echo "e2e-test: pod milli250 limited to 5757m, pod milli1000 (a whole GPU) not limited"
fi
"$kubectl" -n "$ns" delete pod milli250 milli1000 --wait=true --timeout=60s >/dev/null

# The pod's GPU choice (HAMi's annotations, docs/memory-shares.md "Choosing GPUs"): a share that
# may use only node mem's GPU 5 runs there, by annotation, PodResources and environment; one that
# asks a model node mem has not got stays Pending with gpushare-scheduler's GpuExcluded Event,
# which names each GPU and the annotation that excluded it.
choice_pod() { # name annotations-flow-map
  { printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  annotations: %s\nspec:\n' "$1" "$ns" "$2"
    gpu_pod_spec aliyun.com/gpu-mem 3 '  '; } | "$kubectl" apply -f - >/dev/null
}
gpu5=$(uuids "$repo/examples/inventory/8x-a10.yaml" | sed -n 6p)
choice_pod only5 "{nvidia.com/use-gpuuuid: \"GPU-00000000-0000-0000-0000-000000000000, $gpu5\", nvidia.com/nouse-gputype: T4}"
choice_pod h100 "{nvidia.com/use-gputype: H100}"
running only5
for _ in $(seq 40); do [ "$(annot only5 ALIYUN_COM_GPU_MEM_ASSIGNED)" = true ] && break; sleep 0.5; done
[ "$(annot only5 ALIYUN_COM_GPU_MEM_IDX)" = 5 ] || fail "pod only5: ALIYUN_COM_GPU_MEM_IDX=$(annot only5 ALIYUN_COM_GPU_MEM_IDX), want 5 (nvidia.com/use-gpuuuid)"
[ "$(logs_of only5 | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p')" = "$gpu5" ] || fail "pod only5 does not see GPU 5 ($gpu5): $(logs_of only5)"
node_pr mem | grep "^$ns/only5/c aliyun.com/gpu-mem " | grep -qF "$gpu5-_-" || fail "pod only5: PodResources units not on GPU 5"
msg=$(event_message h100 GpuExcluded 30)
grep -qF 'nvidia.com/use-gputype=H100 does not match "NVIDIA A10"' <<<"$msg" ||
  fail "pod h100: no GpuExcluded Event naming the annotation: '$msg'"
[ "$("$kubectl" -n "$ns" get pod h100 -o jsonpath='{.status.phase}')" = Pending ] || fail "pod h100: not Pending"
echo "e2e-test: pod only5 on GPU 5 by nvidia.com/use-gpuuuid; pod h100 Pending: ${msg:0:200}"
"$kubectl" -n "$ns" delete pod only5 h100 --wait=true --timeout=60s >/dev/null

# ---------------------------------------------------------------------------------------------
# Who uses which GPU (issue 14): each share kind's gpushare.io/allocations record names the
# device its container sees; node mem's /metrics and probes; gpushare inspect against the API.
# record pod: the pod's gpushare.io/allocations (written at the agent's next reconcile round).
record() {
  local r=""
  for _ in $(seq 90); do
    r=$(annot "$1" gpushare.io/allocations)
    [ -n "$r" ] && break
    sleep 1
  done
  [ -n "$r" ] || fail "pod $1: no gpushare.io/allocations annotation after 90 s"
  echo "$r"
}
for p in slice:ts:replica migshare:mig:mig whole:mig:whole mem3:mem:memory; do
  IFS=: read -r pod node kind <<<"$p"
  r=$(record "$pod")
  vis=$(logs_of "$pod" | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p')
  why=$(python3 - "$node" "$kind" "$vis" "$r" <<'PY'
import json, sys
node, kind, vis, rec = sys.argv[1:]
r = json.loads(rec)
devs = [d for c in r["containers"] for d in c["devices"]]
got = (devs[0].get("mig") if kind == "mig" else devs[0].get("uuid")) if devs else None
if r.get("node") != node: print(f"node {r.get('node')!r}, want {node}")
elif not devs or any(d["kind"] != kind for d in devs): print(f"kinds {[d['kind'] for d in devs]}, want {kind}")
elif got != vis.split(",")[0]: print(f"device {got}, but the container sees {vis}")
PY
) || fail "pod $pod: gpushare.io/allocations does not decode: $r"
  [ -z "$why" ] || fail "pod $pod: gpushare.io/allocations: $why ($r)"
  echo "e2e-test: pod $pod: gpushare.io/allocations: $kind on $node, the device its container sees"
done

# Node mem's agent serves /metrics on 127.0.0.1:9447 (scripts/e2e-cluster.sh, node_metrics_port;
# --metrics-auth none on loopback).
mem_metrics=http://127.0.0.1:9447
for p in healthz readyz; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$mem_metrics/$p" || true)
  [ "$code" = 200 ] || fail "node mem: /$p answered $code, want 200"
done
m=$(curl -sf "$mem_metrics/metrics") || fail "node mem: /metrics did not answer"
metric() { # name label-filter: the value of the first series of name whose labels match
  grep "^$1{" <<<"$m" | grep -F -- "$2" | head -1 | awk '{print $NF}'
}
n=$(grep -c '^gpushare_gpu_memory_bytes{.*node="mem"' <<<"$m" || true)
[ "$n" = 8 ] || fail "node mem: $n gpushare_gpu_memory_bytes series, want 8 (8 x A10)"
for s in gpushare_gpu_memory_bytes gpushare_gpu_memory_allocated_bytes gpushare_gpu_healthy \
  gpushare_container_memory_limit_bytes gpushare_node_registrations_total gpushare_build_info; do
  grep -q "^# HELP $s " <<<"$m" || fail "node mem: /metrics has no '# HELP $s'"
done
v=$(metric gpushare_container_memory_limit_bytes 'pod="mem3"')
[ "$v" = 3221225472 ] || fail "node mem: gpushare_container_memory_limit_bytes of mem3 is '$v', want 3221225472"
v=$(metric gpushare_gpu_memory_allocated_bytes "uuid=\"$gpus\"")
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 3221225472 else 1)' "${v:-0}" ||
  fail "node mem: gpushare_gpu_memory_allocated_bytes of mem3's GPU $gpus is '$v', want at least 3 GiB"
echo "e2e-test: node mem /metrics: 8 GPUs, mem3 limited to 3 GiB on $gpus (allocated there: $v bytes)"

# gpushare inspect, from the API alone: mem3's 3 GiB on its GPU, the other share kinds recorded.
out=$("$gpushare_bin/gpushare" inspect -o json) || fail "gpushare inspect failed"
why=$(INSPECT_JSON=$out python3 - "$ns" "$gpus" <<'PY'
import json, os, sys
ns, uuid = sys.argv[1:]
v = json.loads(os.environ["INSPECT_JSON"])
pods = {(n["name"], g["uuid"], p["namespace"], p["name"]): p for n in v["nodes"] for g in n["gpus"] for p in g["pods"]}
p = pods.get(("mem", uuid, ns, "mem3"))
if p is None: print(f"mem3 is not on node mem's GPU {uuid}")
elif p["memoryMiB"] != 3072: print(f"mem3 holds {p['memoryMiB']} MiB, want 3072")
else:
  for node, pod in (("ts", "slice"), ("mig", "migshare"), ("mig", "whole")):
    if not any(k[0] == node and k[2] == ns and k[3] == pod for k in pods): print(f"{pod} is not listed on node {node}")
PY
) || fail "gpushare inspect -o json does not decode: $out"
[ -z "$why" ] || fail "gpushare inspect: $why"
"$gpushare_bin/gpushare" inspect || fail "gpushare inspect (the table) failed"
echo "e2e-test: gpushare inspect: mem3 holds 3072 MiB of $gpus on mem; slice, migshare and whole listed"
# The same in golden-file form: `-o wide` (every GPU of the three nodes: each agent publishes its
# GPUs) and `-d` (per pod) for this namespace, against e2e/testdata/inspect.golden. The cluster is
# the same every run (simulated inventories, fixed addresses, deterministic placement), so any
# difference is a change; E2E_UPDATE_GOLDEN=1 rewrites the file (review the diff).
golden="$repo/e2e/testdata/inspect.golden"
got=$(for args in "-o wide" "-d"; do
  echo "\$ gpushare inspect -n $ns $args"
  # shellcheck disable=SC2086 # $args is two words on purpose
  "$gpushare_bin/gpushare" inspect -n "$ns" $args || echo "(exit $?)"
done)
if [ "${E2E_UPDATE_GOLDEN:-0}" = 1 ]; then
  mkdir -p "$(dirname "$golden")" && printf '%s\n' "$got" >"$golden"
  echo "e2e-test: rewrote $golden"
fi
diff -u "$golden" <(printf '%s\n' "$got") >&2 ||
  fail "gpushare inspect differs from $golden (above; E2E_UPDATE_GOLDEN=1 rewrites it)"
echo "e2e-test: gpushare inspect -o wide and -d match $golden"

# ---------------------------------------------------------------------------------------------
"$kubectl" -n "$ns" delete pod --all --wait=true --timeout=120s >/dev/null
# The GPU choice of time-slices and whole GPUs (docs/node-agent.md "Choosing GPUs"): the real
# kubelet takes gpushare-node's preferred allocation, which follows the pod's annotations. A
# time-slice that may use only node ts's GPU 6 sees GPU 6; a whole GPU on node mig that may not
# use GPU 1 (the NUMA-aligned default) sees GPU 2.
choice_gpu_pod() { # name node annotations-flow-map resource
  { printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  annotations: %s\nspec:\n  nodeSelector: {gpushare.e2e/node: %s}\n' "$1" "$ns" "$3" "$2"
    gpu_pod_spec "$4" 1 '  '; } | "$kubectl" apply -f - >/dev/null
}
ts6=$(uuids "$repo/examples/inventory/8x-a10.yaml" | sed -n 7p)
mig1=$(uuids "$repo/e2e/gpushare/mig-inventory.yaml" | grep ^GPU- | sed -n 2p)
mig2=$(uuids "$repo/e2e/gpushare/mig-inventory.yaml" | grep ^GPU- | sed -n 3p)
choice_gpu_pod slice6 ts "{nvidia.com/use-gpuuuid: \"$ts6\"}" nvidia.com/gpu
choice_gpu_pod notmig1 mig "{nvidia.com/nouse-gpuuuid: \"$mig1\", nvidia.com/use-gputype: h100}" nvidia.com/gpu
running slice6
running notmig1
[ "$(logs_of slice6 | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p')" = "$ts6" ] ||
  fail "pod slice6 (nvidia.com/use-gpuuuid: $ts6) sees $(logs_of slice6 | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p')"
[ "$(logs_of notmig1 | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p')" = "$mig2" ] ||
  fail "pod notmig1 (nvidia.com/nouse-gpuuuid: $mig1) sees $(logs_of notmig1 | sed -n 's/^NVIDIA_VISIBLE_DEVICES=//p'), want $mig2"
echo "e2e-test: time-slice slice6 on GPU 6 of ts by nvidia.com/use-gpuuuid; whole GPU notmig1 on GPU 2 of mig by nvidia.com/nouse-gpuuuid"
"$kubectl" -n "$ns" delete pod slice6 notmig1 --wait=true --timeout=60s >/dev/null

# Scale (issue 11 section 4): the seed manifests (scripts/e2e-lib.sh).
seed_checks
# Preemption of memory shares (issue 23), kube-scheduler with deploy/kube-scheduler-config.yaml's
# preemptVerb: one GPU freed for a 22 GiB pod of higher priority, nothing for 23 GiB.
preemption_checks

# ---------------------------------------------------------------------------------------------
# Restarts (issue 11 section 4, last point), with the 56 memory-share pods of the Knative seed
# Running on node mem and a pod on each share kind of ts and mig.

# all_allocatable: "<node> <resource> <count>" of what every node's kubelet can allocate now.
all_allocatable() { local n; for n in $E2E_NODES; do node_pr "$n" -allocatable | sed "s/^/$n /"; done; }
all_holdings() { local n; for n in $E2E_NODES; do node_pr "$n" | sed "s/^/$n /" | sort; done; }
# mem_annotations: the gpushare annotations of every pod on node mem.
mem_annotations() {
  "$kubectl" get pods -A --field-selector spec.nodeName=mem -o json | python3 -c '
import json, sys
for p in sorted(json.load(sys.stdin)["items"], key=lambda p: p["metadata"]["name"]):
    a = {k: v for k, v in sorted(p["metadata"].get("annotations", {}).items()) if k.startswith("ALIYUN_COM_GPU_MEM")}
    print(p["metadata"]["namespace"] + "/" + p["metadata"]["name"], json.dumps(a, sort_keys=True))'
}
# new_pods tag: a pod of each share kind (a time-slice on ts, a MIG share and a whole GPU on
# mig, 1 GiB on mem) admitted and Running, the memory one consistent with PodResources.
new_pods() {
  gpu_pod "$1-slice" ts nvidia.com/gpu 1
  gpu_pod "$1-mig" mig nvidia.com/mig-1g.10gb 1
  gpu_pod "$1-whole" mig nvidia.com/gpu 1
  gpu_pod "$1-mem" "" aliyun.com/gpu-mem 1
  local p
  for p in slice mig whole mem; do running "$1-$p"; done
  local per
  per=$(mem_consistent) || fail "$1: $per"
  echo "e2e-test: $1: new pods admitted on every node (time-slice, MIG, whole GPU, 1 GiB); node mem consistent: $per"
}

gpu_pod before-slice ts nvidia.com/gpu 1
gpu_pod before-mig mig nvidia.com/mig-1g.10gb 1
for p in before-slice before-mig; do running "$p"; done
# Pods the seed checks deleted may still be terminating; kubelet lists their devices until they
# are gone, and a snapshot taken then would differ from the next one for no fault of gpushare's.
settled=
for _ in $(seq 1 120); do
  [ -z "$("$kubectl" get pods -A -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{"\n"}{end}')" ] &&
    [ "$(all_holdings)" = "$(sleep 1; all_holdings)" ] && { settled=1; break; }
  sleep 1
done
[ -n "$settled" ] || fail "pods still terminating, or PodResources still changing, 2 min after the seed checks"
all_allocatable >"$state/allocatable.before"
all_holdings >"$state/holdings.before"
mem_annotations >"$state/annotations.before"
pod_snapshot >"$state/pods.before"

# 1. Every kubelet killed (SIGKILL) and started again: each re-registers every gpushare
# resource within 2 s of its device manager's socket, Running pods stay as they were, new pods
# are admitted.
killed_at=$(date +%s%N)
for n in $E2E_NODES; do kill -KILL "$(cut -d' ' -f1 "$pids/kubelet-$n.pid")"; done
for n in $E2E_NODES; do
  want=$(awk -v n="$n" '$1 == n {printf "%s%s=%s", sep, $2, $3; sep=","}' "$state/allocatable.before")
  [ -n "$want" ] || fail "node $n allocated nothing before the restart"
  node_pr "$n" -registered -after "$killed_at" -want "$want" >"$state/reregistered.$n" 2>&1 &
  echo $! >"$state/reregistered.$n.pid"
done
"$cluster" up >"$state/up-after-kubelet-kill.log" 2>&1 || { tail "$state/up-after-kubelet-kill.log"; fail "cluster up after killing the kubelets failed"; }
for n in $E2E_NODES; do
  wait "$(cat "$state/reregistered.$n.pid")" || fail "node $n: gpushare's resources not back after the kubelet restart: $(cat "$state/reregistered.$n")"
  ms=$(cat "$state/reregistered.$n")
  echo "e2e-test: kubelet of $n restarted: $(awk -v n="$n" '$1 == n {printf "%s %s ", $2, $3}' "$state/allocatable.before")re-registered ${ms} ms after its device-plugin socket appeared"
  [ "$ms" -le 2000 ] || fail "node $n: gpushare's resources took $ms ms to re-register after the kubelet restart, want at most 2000"
done
sleep 5   # what a restarted kubelet would do to its pods (kill, re-admit) it does in its first sync
untouched "$state/pods.before" "kubelet restart"
diff "$state/holdings.before" <(all_holdings) >&2 || fail "kubelet restart: PodResources allocations changed"
new_pods after-kubelet

# 2. Every gpushare-node killed (SIGKILL) and started again: allocations intact (the kubelets'
# PodResources, the pods' annotations), pods untouched, the resources registered again, new
# pods admitted.
all_holdings >"$state/holdings.before"
mem_annotations >"$state/annotations.before"
pod_snapshot >"$state/pods.before"
for n in $E2E_NODES; do kill -KILL "$(cut -d' ' -f1 "$pids/gpushare-node-$n.pid")"; done
"$cluster" up >"$state/up-after-node-kill.log" 2>&1 || { tail "$state/up-after-node-kill.log"; fail "cluster up after killing gpushare-node failed"; }
ok=""
for _ in $(seq 60); do
  diff -q "$state/allocatable.before" <(all_allocatable) >/dev/null && { ok=1; break; }
  sleep 0.5
done
[ -n "$ok" ] || { diff "$state/allocatable.before" <(all_allocatable) >&2; fail "gpushare-node restart: allocatable not back within 30 s"; }
diff "$state/holdings.before" <(all_holdings) >&2 || fail "gpushare-node restart: PodResources allocations changed"
sleep 2
diff "$state/annotations.before" <(mem_annotations) >&2 || fail "gpushare-node restart: the memory pods' annotations changed"
untouched "$state/pods.before" "gpushare-node restart"
echo "e2e-test: gpushare-node restart: allocations intact (PodResources and annotations unchanged)"
if [ -n "${lib_inode:-}" ]; then
  # The restarted agent found its library installed and wrote nothing: same file, same inode.
  [ "$(stat -c %i "$lib_installed" 2>/dev/null)" = "$lib_inode" ] ||
    fail "gpushare-node restart: $lib_installed was written again (a mapped library must never be rewritten)"
  [ "$(ls -A "$lib_root" | wc -l)" = "$lib_count" ] || fail "gpushare-node restart: $lib_root now holds $(ls -A "$lib_root")"
  echo "e2e-test: gpushare-node restart: the installed library untouched (inode $lib_inode)"
fi
new_pods after-node
"$kubectl" -n "$ns" delete pod --all --wait=true --timeout=120s >/dev/null

# 3. gpushare-scheduler killed (SIGKILL) in the middle of a 100-pod burst and started again:
# the burst ends as it would have (56 Running, 44 Pending), no pod Failed, no GPU
# over-committed, every pod's annotations its PodResources GPU.
"$kubectl" -n default scale deployment helloworld-go-00001-deployment --replicas=0 >/dev/null
gone "$mem" 180 "scaled to 0"
# The kill is timed by gpushare-scheduler's own log: after its 15th bind of the burst (of 56).
sched_log="$state/logs/gpushare-scheduler.log"
binds_before=$(grep -c 'event=bind ' "$sched_log" || true)
"$kubectl" -n default scale deployment helloworld-go-00001-deployment --replicas=100 >/dev/null
for _ in $(seq 1200); do
  [ $(( $(grep -c 'event=bind ' "$sched_log" || true) - binds_before )) -ge 15 ] && break
  sleep 0.05
done
kill -KILL "$(cut -d' ' -f1 "$pids/gpushare-scheduler.pid")"
bound=$(( $(grep -c 'event=bind ' "$sched_log" || true) - binds_before ))
[ "$bound" -lt 56 ] || fail "gpushare-scheduler was killed after the burst's last bind, not in the middle"
echo "e2e-test: gpushare-scheduler killed after $bound binds of the burst"
sleep 1
"$cluster" up >"$state/up-after-scheduler-kill.log" 2>&1 || { tail "$state/up-after-scheduler-kill.log"; fail "cluster up after killing gpushare-scheduler failed"; }
settle "$mem" 56 44 360
ok=$(mem_consistent) || fail "scheduler restart: $ok"
[ "$ok" = "gpu0=7 gpu1=7 gpu2=7 gpu3=7 gpu4=7 gpu5=7 gpu6=7 gpu7=7" ] || fail "scheduler restart: pods per GPU $ok, want 7 on each"
echo "e2e-test: gpushare-scheduler killed mid-burst: 56 Running, 44 Pending, none Failed, 7 per GPU, annotations = PodResources"

"$kubectl" -n default delete deployment helloworld-go-00001-deployment --wait=true >/dev/null
"$kubectl" -n default delete ksvc helloworld-go >/dev/null
# ---------------------------------------------------------------------------------------------
# Figures (issue 11 section 5; docs/benchmarks.md): printed and kept in $state/figures, never
# a pass/fail criterion.
figures="$state/figures"
: >"$figures"
figure() { echo "e2e-figure: $*" | tee -a "$figures"; }
"$kubectl" -n "$ns" delete pod --all --wait=true --timeout=120s >/dev/null
# The revision's pods are gone before the clock starts (deleting a Deployment does not wait for them).
gone "$mem" 180 "deleted"

# From `kubectl apply` of a Deployment of 100 pods of 1 GiB each to all 100 Running on node mem.
{ printf 'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: mem100, namespace: %s}\n' "$ns"
  printf 'spec:\n  replicas: 100\n  selector: {matchLabels: {app: mem100}}\n  template:\n'
  printf '    metadata: {labels: {app: mem100}}\n    spec:\n'
  gpu_pod_spec aliyun.com/gpu-mem 1 '      '; } >"$state/mem100.yaml"
t0=$(date +%s.%N)
"$kubectl" apply -f "$state/mem100.yaml" >/dev/null
while [ "$(phases mem100)" != "100 0 0 0" ]; do
  [ "$(cut -d' ' -f3 <<<"$(phases mem100)")" = 0 ] || fail "mem100: pods Failed: $(phases mem100)"
  awk -v t0="$t0" -v now="$(date +%s.%N)" 'BEGIN {exit !(now - t0 > 600)}' && fail "mem100: not all Running after 600 s: $(phases mem100)"
  sleep 0.2
done
apply_s=$(awk -v t0="$t0" -v now="$(date +%s.%N)" 'BEGIN {printf "%.1f", now - t0}')
figure "apply to 100 gpu-mem pods (1 GiB each) Running on node mem: $apply_s s"
per=$(mem_consistent) || fail "mem100: $per"
echo "e2e-test: mem100: pods per GPU $per"
"$kubectl" -n "$ns" delete deployment mem100 --wait=true >/dev/null
"$kubectl" -n "$ns" wait --for=delete pod -l app=mem100 --timeout=180s >/dev/null 2>&1 || true

# kube-scheduler's bind rate, one run, same cluster: 80 nvidia.com/gpu pods on ts (no extender)
# and 100 aliyun.com/gpu-mem pods of 1 GiB (through gpushare-scheduler: filter, prioritize, bind),
# each batch created by bindrate while kube-scheduler is stopped (SIGSTOP; it runs without
# leader election), timed from SIGCONT to the last bind. The kubelets are stopped meanwhile too:
# on these 2 cores, a kubelet starting the first pods' containers slows the binds of the rest.
kubelets_cont() { local n; for n in $E2E_NODES; do kill -CONT "$(cut -d' ' -f1 "$pids/kubelet-$n.pid")" 2>/dev/null || true; done; }
rate() { # name count resource selector
  local out n
  for n in $E2E_NODES; do kill -STOP "$(cut -d' ' -f1 "$pids/kubelet-$n.pid")"; done
  out=$("$bin/bindrate" -namespace "$ns" -name "$1" -count "$2" -resource "$3" ${4:+-node-selector "$4"} \
    -pause-pid "$(cut -d' ' -f1 "$pids/kube-scheduler.pid")") ||
    { kubelets_cont; fail "bindrate $1: $out"; }
  kubelets_cont
  echo "$out" | grep '^bindrate:' >&2
  "$kubectl" -n "$ns" delete pod -l "bindrate=$1" --wait=true --timeout=180s >/dev/null
  sed -n 's/^bindrate-result .* pods_per_s=\([0-9.]*\) .*/\1/p' <<<"$out"
}
# One burst lasts 0.1 to 0.2 s here, so one pair of them says more about the machine than about
# the schedulers (ratios of 0.40 to 1.17 between runs): E2E_RATE_ROUNDS pairs (default 5),
# interleaved, and the medians.
median() { sort -g | awk '{v[NR] = $1} END {printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
gpu_rates="" mem_rates=""
for round in $(seq "${E2E_RATE_ROUNDS:-5}"); do
  gpu_rates+="$(rate rate-gpu-$round 80 nvidia.com/gpu=1 gpushare.e2e/node=ts)"$'\n'
  mem_rates+="$(rate rate-mem-$round 100 aliyun.com/gpu-mem=1)"$'\n'
done
gpu_rate=$(grep . <<<"$gpu_rates" | median)
mem_rate=$(grep . <<<"$mem_rates" | median)
figure "kube-scheduler binds nvidia.com/gpu pods (no extender): $gpu_rate pods/s (median of: $(grep . <<<"$gpu_rates" | tr '\n' ' '))"
figure "kube-scheduler binds aliyun.com/gpu-mem pods (gpushare-scheduler extender): $mem_rate pods/s (median of: $(grep . <<<"$mem_rates" | tr '\n' ' '))"
figure "ratio gpu-mem / nvidia.com/gpu (medians): $(awk -v a="$mem_rate" -v b="$gpu_rate" 'BEGIN {printf "%.2f", a / b}')"
# The binds went to kube-apiserver as HTTP/2 streams of one connection (kube/http_mux.h), not
# a connection and a TLS handshake each: what gpushare-scheduler holds now is its watches and
# that one (it held 70 to 100 after each burst before).
gs_pid=$(cut -d' ' -f1 "$pids/gpushare-scheduler.pid")
api_conns=$(ss -Htnp state established '( dport = :6443 )' | grep -c "pid=$gs_pid,") || true
figure "gpushare-scheduler's connections to kube-apiserver after the bursts: $api_conns"
[ "$api_conns" -le 8 ] || fail "gpushare-scheduler holds $api_conns connections to kube-apiserver after the bind bursts (HTTP/2: its watches and one)"

"$kubectl" delete namespace "$ns" --wait=true --timeout=180s >/dev/null

# gpushare installed with its Helm chart on this same cluster (issue 12 section 4); E2E_HELM=0
# skips it.
if [ "${E2E_HELM:-1}" = 1 ]; then
  E2E_BIN="$bin" E2E_DIR="$state" "$repo/scripts/e2e-helm.sh" || fail "the Helm checks failed (scripts/e2e-helm.sh)"
fi
