#!/usr/bin/env bash
# gpushare on the e2e cluster (docs/e2e.md, issue 11 sections 3 and 4): the real kubelets,
# kube-scheduler and API server with gpushare-node and gpushare-scheduler as host processes on
# simulated GPUs. Brings the cluster up (with gpushare), checks what the kubelets advertise and
# that GPU pods run where and with what they should, then takes the cluster down.
#   E2E_KEEP=1  leave the cluster up afterwards
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
  if [ "${E2E_KEEP:-0}" != 1 ]; then "$cluster" down >/dev/null || rc=1; fi
  if [ $rc -eq 0 ]; then echo "e2e-test: PASS"; else echo "e2e-test: FAILED (rc=$rc); logs in $state/logs" >&2; fi
  exit $rc
}

for b in gpushare-node gpushare-scheduler; do
  [ -x "$gpushare_bin/$b" ] || fail "$gpushare_bin/$b missing (ninja -C build gpushare-node gpushare-scheduler)"
done
# The PodResources client and the bind-rate meter (e2e/cmd), built from the e2e module's pinned deps.
(cd "$repo/e2e" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath \
  -o "$bin/" ./cmd/podresources ./cmd/bindrate) || fail "building e2e/cmd failed"

trap cleanup EXIT
"$cluster" up
"$cluster" status >/dev/null || fail "status after up says something is stopped"

# alloc node resource: the node's allocatable of that resource ("" when it has none).
alloc() {
  "$kubectl" get node "$1" -o json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["status"]["allocatable"].get(sys.argv[1], ""))' "$2"
}
# want_alloc node resource value: waits up to 60 s for the node's allocatable to be exactly that.
want_alloc() {
  local got=""
  for _ in $(seq 120); do
    got=$(alloc "$1" "$2")
    [ "$got" = "$3" ] && { echo "e2e-test: node $1 allocatable $2 = $got"; return 0; }
    sleep 0.5
  done
  fail "node $1: allocatable $2 is '$got', want $3"
}

want_alloc ts nvidia.com/gpu 80
want_alloc mig nvidia.com/mig-1g.10gb 21
want_alloc mig nvidia.com/gpu 2
# 8 x A10 of 23028 MiB, in whole GiB: 8 x 22 = 176.
want_alloc mem aliyun.com/gpu-mem 176
want_alloc mem aliyun.com/gpu-count 8
[ -z "$(alloc mem nvidia.com/gpu)" ] || [ "$(alloc mem nvidia.com/gpu)" = 0 ] ||
  fail "node mem: its GPUs are memory-shared, yet it advertises nvidia.com/gpu $(alloc mem nvidia.com/gpu)"

"$kubectl" delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s >/dev/null
"$kubectl" create namespace "$ns" >/dev/null

# gpu_pod_spec resource count indent: the spec of a busybox pod that asks for count of the
# resource, prints its GPU environment and sleeps; every line prefixed by indent.
gpu_pod_spec() {
  sed "s/^/$3/" <<YAML
terminationGracePeriodSeconds: 1
containers:
- name: c
  image: e2e.local/busybox:1.35
  imagePullPolicy: Never
  command: ["/bin/sh", "-c", "env | grep -E '^(NVIDIA|ALIYUN|GPUSHARE|CUDA)' | sort; if [ -f /etc/ld.so.preload ]; then echo PRELOAD=\$(cat /etc/ld.so.preload); md5sum /usr/local/gpushare/lib/libgpushare-cuda.so; fi; exec sleep 3600"]
  resources:
    limits: {$1: $2}
YAML
}
# gpu_pod name node-or-empty resource count: such a pod, pinned to the node when one is given.
gpu_pod() {
  local sel=""
  [ -n "$2" ] && sel="nodeSelector: {gpushare.e2e/node: $2}"
  { printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec:\n  %s\n' "$1" "$ns" "$sel"
    gpu_pod_spec "$3" "$4" '  '; } | "$kubectl" apply -f - >/dev/null
}
running() {
  "$kubectl" -n "$ns" wait --for=jsonpath='{.status.phase}'=Running "pod/$1" --timeout=120s >/dev/null ||
    { "$kubectl" -n "$ns" describe pod "$1" | tail -15; fail "pod $1 not Running"; }
}
logs_of() {
  local out=""
  for _ in $(seq 40); do out=$("$kubectl" -n "$ns" logs "$1" 2>/dev/null || true); [ -n "$out" ] && break; sleep 0.5; done
  echo "$out"
}
uuids() { sed -n 's/^ *uuid: //p' "$@"; }
# node_pr node [flags]: e2e/cmd/podresources against that node's kubelet, inside its namespace.
node_pr() { local n=$1; shift; nsenter -t "$(cut -d' ' -f1 "$pids/node-$n.pid")" -m -- "$bin/podresources" "$@"; }
# gone app seconds what: waits until the app has no pods left (not settle: a stopped stand-in
# exits 143, and its pod is Failed until it is gone).
gone() {
  for _ in $(seq "$2"); do [ -z "$(pods_of "$1" -o name)" ] && return 0; sleep 1; done
  fail "$1: $3, pods still there after $2 s: $(phases "$1")"
}

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


# ---------------------------------------------------------------------------------------------
# Scale (issue 11 section 4, with the local busybox image; the seed manifests themselves need
# the stand-in images and the registry mirror, not done yet).
"$kubectl" -n "$ns" delete pod --all --wait=true --timeout=120s >/dev/null

# The pods of "app": app=<app> in $ns, or, for a Knative revision, "<namespace>/<service>".
pods_of() {
  if [[ "$1" == */* ]]; then
    "$kubectl" -n "${1%%/*}" get pods -l "serving.knative.dev/service=${1#*/}" "${@:2}"
  else
    "$kubectl" -n "$ns" get pods -l "app=$1" "${@:2}"
  fi
}
# phases app: "<Running> <Pending> <Failed> <other>" of the app's pods.
phases() {
  pods_of "$1" -o json | python3 -c '
import json, sys
c = {"Running": 0, "Pending": 0, "Failed": 0, "other": 0}
for p in json.load(sys.stdin)["items"]:
    ph = p["status"].get("phase", "")
    c[ph if ph in c else "other"] += 1
print(c["Running"], c["Pending"], c["Failed"], c["other"])'
}
# settle app running pending seconds: waits until exactly that many pods are Running and Pending
# (and none Failed); fails with the counts after the given time.
settle() {
  local got="" t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$4" ]; do
    got=$(phases "$1")
    [ "$got" = "$2 $3 0 0" ] && { echo "e2e-test: $1: $2 Running, $3 Pending after $((SECONDS - t0)) s"; return 0; }
    [ "$(cut -d' ' -f3 <<<"$got")" = 0 ] || break
    sleep 1
  done
  pods_of "$1" --no-headers | awk '{print $3}' | sort | uniq -c >&2
  pods_of "$1" -o json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    if p["status"].get("phase") == "Failed":
        print("  failed:", p["metadata"]["name"], p["status"].get("reason"), p["status"].get("message"), file=sys.stderr)'
  fail "$1: Running/Pending/Failed/other = $got after $((SECONDS - t0)) s, want $2 $3 0 0"
}
# pending_reason app: the scheduler's message of one Pending pod.
pending_reason() {
  pods_of "$1" -o json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    if p["status"].get("phase") == "Pending":
        for c in p["status"].get("conditions", []):
            if c["type"] == "PodScheduled" and c["status"] == "False":
                print(c.get("message", "")); sys.exit(0)'
}
# holdings node resource: "<ns>/<pod> <physical GPU or MIG uuid>" per device the real kubelet
# reports for that resource (PodResources; a replica ID is <uuid>::<k>, a memory unit
# <uuid>-_-<j>).
holdings() {
  node_pr "$1" | awk -v r="$2" '$2 == r {
    split($1, a, "/"); for (i = 3; i <= NF; i++) { d = $i; sub(/::[0-9]+$/, "", d); sub(/-_-[0-9]+$/, "", d); print a[1] "/" a[2], d } }'
}

# mem_consistent: every Running pod on node mem that holds aliyun.com/gpu-mem (any namespace)
# has the annotations of one GPU, ALIYUN_COM_GPU_MEM_IDX equal to the GPU of the units the real
# kubelet's PodResources gives it, and no GPU holds more GiB than it has (22), counted by
# PodResources and by the annotations alike. Prints "gpu<i>=<pods> ..." and returns 0, or the
# disagreements and returns 1. The confirmations may trail the last pod's start by a reconcile
# (50 ms after Allocate, 10 s at most): retries for 30 s.
mem_consistent() {
  local res=""
  for _ in $(seq 30); do
    res=$( { holdings mem aliyun.com/gpu-mem; echo ---; "$kubectl" get pods -A --field-selector spec.nodeName=mem -o json; } | python3 -c '
import json, sys
text = sys.stdin.read()
held, _, pods = text.partition("---\n")
inv = [l.split()[1] for l in open(sys.argv[1]) if l.strip().startswith("uuid:")]
size = 22
where, units = {}, {}
for line in held.splitlines():
    pod, gpu = line.split()
    where.setdefault(pod, set()).add(gpu)
    units[pod] = units.get(pod, 0) + 1
bad, per, gib_held, gib_annot = [], {}, {}, {}
for p in json.loads(pods)["items"]:
    if p["status"].get("phase") != "Running": continue
    key = p["metadata"]["namespace"] + "/" + p["metadata"]["name"]
    if key not in where: continue
    a = p["metadata"].get("annotations", {})
    g = where[key]
    if len(g) != 1: bad.append("%s: PodResources GPUs %s" % (key, sorted(g))); continue
    idx = inv.index(g.pop())
    per[idx] = per.get(idx, 0) + 1
    gib_held[idx] = gib_held.get(idx, 0) + units[key]
    if a.get("ALIYUN_COM_GPU_MEM_IDX") != str(idx) or a.get("ALIYUN_COM_GPU_MEM_ASSIGNED") != "true":
        bad.append("%s: annotation IDX=%s ASSIGNED=%s, PodResources GPU %d" % (key, a.get("ALIYUN_COM_GPU_MEM_IDX"), a.get("ALIYUN_COM_GPU_MEM_ASSIGNED"), idx))
    try:
        ai = int(a.get("ALIYUN_COM_GPU_MEM_IDX", "-1"))
        gib_annot[ai] = gib_annot.get(ai, 0) + int(a.get("ALIYUN_COM_GPU_MEM_POD", "0"))
    except ValueError:
        bad.append("%s: annotations %s" % (key, a))
for name, m in (("PodResources", gib_held), ("annotations", gib_annot)):
    for i, gib in sorted(m.items()):
        if gib > size: bad.append("GPU %d over-committed by %s: %d GiB of %d" % (i, name, gib, size))
if bad: print("BAD " + "; ".join(bad[:5]) + (" (+%d more)" % (len(bad) - 5) if len(bad) > 5 else ""))
else: print("OK " + " ".join("gpu%d=%d" % kv for kv in sorted(per.items())))
' "$repo/examples/inventory/8x-a10.yaml")
    [[ "$res" == OK* ]] && { echo "${res#OK }"; return 0; }
    sleep 1
  done
  echo "annotations disagree with PodResources: ${res#BAD }"
  return 1
}

# Time-slices: the seed manifest time-sliced-vllm-gpt2.yaml exactly as it is (its image
# vllm/vllm:latest is always pulled: from the local registry, the mirror of docker.io), node ts
# alone (mig's whole GPUs are nvidia.com/gpu too: the other platform's meaning), scaled to 81:
# 80 Running, 10 per physical GPU, the 81st Pending for want of nvidia.com/gpu.
"$kubectl" cordon mig >/dev/null   # cleanup uncordons it
seed=${E2E_SEED_MANIFESTS:-$repo/../shared/examples/seed-manifests}
[ -f "$seed/time-sliced-vllm-gpt2.yaml" ] || seed=/work/shared/examples/seed-manifests
[ -f "$seed/time-sliced-vllm-gpt2.yaml" ] || fail "seed manifests not found (E2E_SEED_MANIFESTS)"
"$kubectl" -n "$ns" apply -f "$seed/time-sliced-vllm-gpt2.yaml" >/dev/null
settle vllm-gpt2 1 0 120
pod=$("$kubectl" -n "$ns" get pods -l app=vllm-gpt2 -o jsonpath='{.items[0].metadata.name}')
ip=$("$kubectl" -n "$ns" get pod "$pod" -o jsonpath='{.status.podIP}')
got=""
for _ in $(seq 20); do got=$(curl -sf -m 5 "http://$ip:8000/" || true); [ -n "$got" ] && break; sleep 0.5; done
grep -qE '^NVIDIA_VISIBLE_DEVICES=GPU-' <<<"$got" || fail "vllm-gpt2: the stand-in on $ip:8000 answered '$got', want its NVIDIA_VISIBLE_DEVICES"
echo "e2e-test: vllm-gpt2 (seed manifest, image pulled through the mirror) serves on :8000: $got"
"$kubectl" -n "$ns" scale deployment vllm-gpt2 --replicas=81 >/dev/null
settle vllm-gpt2 80 1 240
reason=$(pending_reason vllm-gpt2)
echo "e2e-test: vllm-gpt2: the Pending pod: $reason"
grep -q 'Insufficient nvidia.com/gpu' <<<"$reason" || fail "vllm-gpt2: the 81st pod is Pending for '$reason', want Insufficient nvidia.com/gpu"
per_gpu=$(holdings ts nvidia.com/gpu | awk '{print $2}' | sort | uniq -c | awk '{print $1}' | sort -u | tr '\n' ' ')
[ "$per_gpu" = "10 " ] || fail "vllm-gpt2: pods per physical GPU (PodResources of ts): '$per_gpu', want 10 on each"
[ "$(holdings ts nvidia.com/gpu | awk '{print $2}' | sort -u | wc -l)" = 8 ] || fail "vllm-gpt2: not all 8 GPUs of ts in use"
echo "e2e-test: vllm-gpt2: 10 pods on each of the 8 GPUs of ts (PodResources)"
"$kubectl" -n "$ns" delete deployment vllm-gpt2 --wait=true >/dev/null
"$kubectl" uncordon mig >/dev/null

# Knative: Knative Serving's own CRDs (config/core/300-resources of knative.dev/serving, from
# the module proxy at a pinned version) accept both Knative seeds as they are. Knative's
# controllers are not here: e2e/images/revision.py writes the Deployment a revision would get
# (user-container + a GPU-less queue-proxy).
kn_version=${E2E_KNATIVE_VERSION:-v0.51.0}
kn_dir=$(cd "$repo/e2e" && GOTOOLCHAIN=local go mod download -json "knative.dev/serving@$kn_version" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') ||
  fail "knative.dev/serving@$kn_version: go mod download failed"
for f in "$kn_dir"/config/core/300-resources/*.yaml; do
  "$kubectl" apply -f "$f" >/dev/null || fail "applying Knative's CRD $f failed"
done
"$kubectl" wait --for=condition=Established crd/services.serving.knative.dev --timeout=60s >/dev/null ||
  fail "Knative's Service CRD not Established"
echo "e2e-test: Knative $kn_version CRDs applied"
# The dedicated GPU: the platform where nvidia.com/gpu is a whole GPU (node mig; ts cordoned,
# its nvidia.com/gpu are time-slices).
"$kubectl" cordon ts >/dev/null   # cleanup uncordons it
"$kubectl" -n "$ns" apply -f "$seed/knative-dedicated-gpu.yaml" >/dev/null || fail "kubectl apply -f knative-dedicated-gpu.yaml failed"
"$kubectl" -n "$ns" get ksvc helloworld-go -o json | python3 "$repo/e2e/images/revision.py" | "$kubectl" apply -f - >/dev/null ||
  fail "creating the revision Deployment of knative-dedicated-gpu.yaml failed"
settle helloworld-go 1 0 120
pod=$("$kubectl" -n "$ns" get pods -l app=helloworld-go -o jsonpath='{.items[0].metadata.name}')
[ "$("$kubectl" -n "$ns" get pod "$pod" -o jsonpath='{.spec.nodeName}')" = mig ] || fail "knative-dedicated-gpu: pod $pod not on node mig"
dev=""
for _ in $(seq 40); do
  dev=$("$kubectl" -n "$ns" logs "$pod" -c user-container 2>/dev/null | sed -n 's/^standin: env: NVIDIA_VISIBLE_DEVICES=//p')
  [ -n "$dev" ] && break; sleep 0.5
done
[ -n "$dev" ] || fail "knative-dedicated-gpu: the user-container's log names no NVIDIA_VISIBLE_DEVICES"
held=$(node_pr mig | awk -v p="$ns/$pod/user-container" '$1 == p && $2 == "nvidia.com/gpu" {print $3}')
[ "$held" = "$dev" ] || fail "knative-dedicated-gpu: the container says GPU '$dev', kubelet's PodResources '$held'"
grep -qxF "$dev" <(uuids "$repo/e2e/gpushare/mig-inventory.yaml" | grep '^GPU-' | tail -n +2) ||
  fail "knative-dedicated-gpu: $dev is not one of mig's whole GPUs"
echo "e2e-test: knative-dedicated-gpu: whole GPU $dev (log of user-container and PodResources agree)"
"$kubectl" -n "$ns" delete deployment helloworld-go-00001-deployment --wait=true >/dev/null
"$kubectl" -n "$ns" delete ksvc helloworld-go >/dev/null
"$kubectl" uncordon ts >/dev/null

# Memory shares: knative-gpu-mem-sharing.yaml as it is, its revision's Deployment scaled to 100
# (its maxScale): 3 GiB each against 8 x 22 GiB: 7 per GPU = 56 Running, 44 Pending with the
# extender's reason (kube-scheduler alone would admit 176 / 3 = 58 on the node total), none
# Failed (UnexpectedAdmissionError), and each Running pod's ALIYUN_COM_GPU_MEM_IDX the GPU of the
# units PodResources gives it.
mem=default/helloworld-go
"$kubectl" apply -f "$seed/knative-gpu-mem-sharing.yaml" >/dev/null || fail "kubectl apply -f knative-gpu-mem-sharing.yaml failed"
"$kubectl" -n default get ksvc helloworld-go -o json | python3 "$repo/e2e/images/revision.py" --replicas 100 |
  "$kubectl" apply -f - >/dev/null || fail "creating the revision Deployment of knative-gpu-mem-sharing.yaml failed"
settle "$mem" 56 44 300
reason=$(pending_reason "$mem")
echo "e2e-test: $mem: a Pending pod: $reason"
# gpushare-scheduler's filter: "no GPU has 3 GiB free for container c (free/total GiB per GPU ...)".
grep -q 'no GPU has 3 GiB free' <<<"$reason" || fail "$mem: Pending for '$reason', not for the extender's reason (no GPU has 3 GiB free)"
ok=$(mem_consistent) || fail "$mem: $ok"
echo "e2e-test: $mem: every Running pod's ALIYUN_COM_GPU_MEM_IDX is its PodResources GPU; pods per GPU: $ok"
[ "$ok" = "gpu0=7 gpu1=7 gpu2=7 gpu3=7 gpu4=7 gpu5=7 gpu6=7 gpu7=7" ] || fail "$mem: pods per GPU $ok, want 7 on each"

# ---------------------------------------------------------------------------------------------
# Restarts (issue 11 section 4, last point), with the 56 memory-share pods of the Knative seed
# Running on node mem and a pod on each share kind of ts and mig.

# pod_snapshot: "<ns>/<name> <uid> <node> <container>=<id>/<restarts> ..." of every Running pod.
pod_snapshot() {
  "$kubectl" get pods -A -o json | python3 -c '
import json, sys
for p in sorted(json.load(sys.stdin)["items"], key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):
    if p["status"].get("phase") != "Running": continue
    cs = " ".join("%s=%s/%s" % (c["name"], c.get("containerID", ""), c.get("restartCount", 0))
                  for c in sorted(p["status"].get("containerStatuses", []), key=lambda c: c["name"]))
    print(p["metadata"]["namespace"] + "/" + p["metadata"]["name"], p["metadata"]["uid"], p["spec"].get("nodeName", ""), cs)'
}
# untouched before-file: every pod Running in the snapshot is still Running, same uid and node,
# same containers, not restarted; and no pod anywhere Failed.
untouched() {
  local now
  now=$(pod_snapshot)
  diff "$1" <(awk 'NR == FNR {want[$1] = 1; next} $1 in want' "$1" - <<<"$now") >&2 ||
    fail "$2: Running pods changed (diff above: < before, > after)"
  local failed
  failed=$("$kubectl" get pods -A --field-selector status.phase=Failed -o name)
  [ -z "$failed" ] || fail "$2: pods Failed: $failed"
  echo "e2e-test: $2: $(wc -l <"$1") Running pods untouched (uid, node, container IDs, restart counts), none Failed"
}
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
gpu_rate=$(rate rate-gpu 80 nvidia.com/gpu=1 gpushare.e2e/node=ts)
mem_rate=$(rate rate-mem 100 aliyun.com/gpu-mem=1)
figure "kube-scheduler binds nvidia.com/gpu pods (no extender): $gpu_rate pods/s"
figure "kube-scheduler binds aliyun.com/gpu-mem pods (gpushare-scheduler extender): $mem_rate pods/s"
figure "ratio gpu-mem / nvidia.com/gpu: $(awk -v a="$mem_rate" -v b="$gpu_rate" 'BEGIN {printf "%.2f", a / b}')"

"$kubectl" delete namespace "$ns" --wait=true --timeout=180s >/dev/null
