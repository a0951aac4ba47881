#!/usr/bin/env bash
# Shared by scripts/e2e-test.sh (gpushare as host processes) and scripts/e2e-helm.sh (gpushare
# installed with Helm): the helpers that look at pods, nodes and kubelet PodResources, and the
# seed workload checks (seed_checks). Sourced; expects repo, bin, kubectl, ns, pids, fail.

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


# new_namespace name: creates the namespace (kept when it exists) and waits up to 60 s for its
# default ServiceAccount: the controller manager makes it a moment after the namespace, and the
# API server refuses pods ("serviceaccount default not found") until then.
new_namespace() {
  "$kubectl" create namespace "$1" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null ||
    fail "could not create namespace $1"
  for _ in $(seq 120); do
    "$kubectl" -n "$1" get serviceaccount default >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  fail "namespace $1: no default ServiceAccount after 60 s (is kube-controller-manager running?)"
}

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


# The pods of "app": app=<app> in $ns, or, for a Knative revision, "<namespace>/<service>".
pods_of() {
  if [[ "$1" == */* ]]; then
    "$kubectl" -n "${1%%/*}" get pods -l "serving.knative.dev/service=${1#*/}" "${@:2}"
  else
    "$kubectl" -n "$ns" get pods -l "app=$1" "${@:2}"
  fi
}
# phases app: "<Running> <Pending> <Failed> <other>" of the app's pods. A pod being deleted
# counts as "other" whatever its phase: since Kubernetes 1.27 the kubelet gives a deleted pod
# (a preemption victim, a scaled-down replica) the terminal phase Failed while it goes, which is
# not a pod that failed.
phases() {
  pods_of "$1" -o json | python3 -c '
import json, sys
c = {"Running": 0, "Pending": 0, "Failed": 0, "other": 0}
for p in json.load(sys.stdin)["items"]:
    ph = p["status"].get("phase", "")
    if p["metadata"].get("deletionTimestamp"):
        ph = "other"
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
    if p["status"].get("phase") == "Failed" and not p["metadata"].get("deletionTimestamp"):
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
# kubelet's PodResources gives it (and ACK's scheduler.framework.gpushare.allocation naming that
# GPU and each container's units, assigned "true"), and no GPU holds more GiB than it has (22), counted by
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
    # The annotations of ACK later scheduler, as ACK-era tooling reads them: each container with a share, by
    # its index in spec.containers, on its GPU with its units.
    want = {str(i): {str(idx): int(c.get("resources", {}).get("limits", {}).get("aliyun.com/gpu-mem", "0"))}
            for i, c in enumerate(p["spec"]["containers"])
            if int(c.get("resources", {}).get("limits", {}).get("aliyun.com/gpu-mem", "0")) > 0}
    try:
        ack = json.loads(a.get("scheduler.framework.gpushare.allocation", "null"))
    except ValueError:
        ack = "unreadable"
    if ack != want or a.get("scheduler.framework.gpushare.assigned") != "true":
        bad.append("%s: scheduler.framework.gpushare.allocation=%s assigned=%s, want %s" % (key, ack, a.get("scheduler.framework.gpushare.assigned"), json.dumps(want)))
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

# seed_checks: the seed manifests, unchanged, on the cluster as it is now (whichever way gpushare
# runs): time-slices, a dedicated GPU through Knative, and 100 memory-share pods through Knative,
# left Running (56) and Pending (44) for the caller. Sets seed and mem.
seed_checks() {
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
  # The scale-up timed from outside (e2e/cmd/podwatch, when built): when the watch saw each pod
  # created and bound, so the last bind against the last creation (issue 25: every placeable
  # pod bound within 2 s of the creation of the last one; kubelets' container starts not counted).
  local watch="$state/podwatch-$$.out" wpid=""
  if [ -x "$bin/podwatch" ]; then
    "$bin/podwatch" -namespace default -selector serving.knative.dev/service=helloworld-go \
      -name "$mem" -count 100 -bound 56 -timeout 300s >"$watch" 2>&1 &
    wpid=$!
    for _ in $(seq 60); do grep -q '^podwatch: watching' "$watch" && break; sleep 0.5; done
    grep -q '^podwatch: watching' "$watch" || fail "podwatch did not start: $(cat "$watch")"
  fi
  "$kubectl" apply -f "$seed/knative-gpu-mem-sharing.yaml" >/dev/null || fail "kubectl apply -f knative-gpu-mem-sharing.yaml failed"
  "$kubectl" -n default get ksvc helloworld-go -o json | python3 "$repo/e2e/images/revision.py" --replicas 100 |
    "$kubectl" apply -f - >/dev/null || fail "creating the revision Deployment of knative-gpu-mem-sharing.yaml failed"
  settle "$mem" 56 44 300
  if [ -n "$wpid" ]; then
    wait "$wpid" || fail "podwatch: $(cat "$watch")"
    grep -q '^podwatch-result .* bound=56 ' "$watch" || fail "podwatch: $(cat "$watch")"
    echo "e2e-test: $(grep '^podwatch: ' "$watch" | tail -1 | sed 's/^podwatch: //')"
    rm -f "$watch"
  fi
  reason=$(pending_reason "$mem")
  echo "e2e-test: $mem: a Pending pod: $reason"
  # gpushare-scheduler's filter: "no GPU has 3 GiB free for container c (free/total GiB per GPU ...)".
  grep -q 'no GPU has 3 GiB free' <<<"$reason" || fail "$mem: Pending for '$reason', not for the extender's reason (no GPU has 3 GiB free)"
  ok=$(mem_consistent) || fail "$mem: $ok"
  echo "e2e-test: $mem: every Running pod's ALIYUN_COM_GPU_MEM_IDX is its PodResources GPU; pods per GPU: $ok"
  [ "$ok" = "gpu0=7 gpu1=7 gpu2=7 gpu3=7 gpu4=7 gpu5=7 gpu6=7 gpu7=7" ] || fail "$mem: pods per GPU $ok, want 7 on each"
}

# seed_gpus: "<pod> <GPU index>" of every Running pod of the memory-share seed ($mem) that is not
# being deleted, from its ALIYUN_COM_GPU_MEM_IDX, sorted.
seed_gpus() {
  pods_of "$mem" -o json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    if p["status"].get("phase") != "Running" or p["metadata"].get("deletionTimestamp"): continue
    print(p["metadata"]["name"], p["metadata"].get("annotations", {}).get("ALIYUN_COM_GPU_MEM_IDX", "?"))' | sort
}
# serving_pod name gib: a pod of PriorityClass gpushare-e2e-serving (above the seed's 0) asking
# for gib of aliyun.com/gpu-mem, in $ns.
serving_pod() {
  { printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec:\n' "$1" "$ns"
    printf '  priorityClassName: gpushare-e2e-serving\n'
    gpu_pod_spec aliyun.com/gpu-mem "$2" '  '; } | "$kubectl" apply -f - >/dev/null
}
gpu_of() { "$kubectl" -n "$ns" get pod "$1" -o jsonpath='{.metadata.annotations.ALIYUN_COM_GPU_MEM_IDX}'; }
# evicted before after: the seed pods of `before` missing from `after` (files of seed_gpus),
# "<pod> <GPU>" each.
evicted() { awk 'NR == FNR {now[$1] = 1; next} !($1 in now)' "$2" "$1"; }
# not_helpful pod words: waits (90 s) for gpushare-scheduler's PreemptionNotHelpful Event on the
# pod, checks that it says `words`, and that the pod is Pending.
# event_message pod reason seconds: the message of the pod's first Event with that reason, waited
# for up to `seconds` ("" when none came).
event_message() {
  local msg=""
  for _ in $(seq $(($3 * 2))); do
    msg=$("$kubectl" -n "$ns" get events --field-selector "involvedObject.name=$1,reason=$2" \
      -o jsonpath='{.items[0].message}' 2>/dev/null || true)
    [ -n "$msg" ] && break
    sleep 0.5
  done
  echo "$msg"
}
not_helpful() {
  local msg
  msg=$(event_message "$1" PreemptionNotHelpful 90)
  [ -n "$msg" ] || fail "$1: no PreemptionNotHelpful Event from gpushare-scheduler within 90 s"
  grep -qF "$2" <<<"$msg" || fail "$1: PreemptionNotHelpful says '$msg', want '$2'"
  [ "$("$kubectl" -n "$ns" get pod "$1" -o jsonpath='{.status.phase}')" = Pending ] || fail "$1: not Pending"
  echo "e2e-test: $1: Pending, PreemptionNotHelpful: ${msg:0:240}"
}

# preemption_checks [budgets]: with the memory-share seed at 56 Running (7 x 3 GiB on each 22 GiB
# GPU of node mem, priority 0) and 44 Pending, pods of a higher PriorityClass (issue 23):
#   - 22 GiB: kube-scheduler's preemption, asking gpushare-scheduler's preempt verb, evicts exactly
#     the 7 pods of one GPU and the pod runs on that GPU; the victims' replacements stay Pending;
#   - 23 GiB (more than any GPU): nothing evicted, Pending, PreemptionNotHelpful;
#   - with `budgets`: a PodDisruptionBudget (maxUnavailable 0) over the seed pods of every GPU but
#     one: the next 22 GiB pod takes that GPU; with every seed pod covered, none (nothing evicted).
# Leaves the seed at 56 Running and 44 Pending again.
preemption_checks() {
  printf 'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: gpushare-e2e-serving}\nvalue: 1000\n' |
    "$kubectl" apply -f - >/dev/null
  local work=$state/preemption before after gone g
  mkdir -p "$work"
  seed_gpus >"$work/before"
  [ "$(wc -l <"$work/before")" = 56 ] || fail "preemption: $(wc -l <"$work/before") seed pods Running, want 56"

  serving_pod preempt-22 22
  running preempt-22
  g=$(gpu_of preempt-22)
  seed_gpus >"$work/after"
  evicted "$work/before" "$work/after" >"$work/gone"
  gone=$(awk '{print $2}' "$work/gone" | sort | uniq -c | awk '{printf "%s on GPU %s ", $1, $2}')
  [ "$(wc -l <"$work/gone")" = 7 ] && [ "$(awk '{print $2}' "$work/gone" | sort -u)" = "$g" ] ||
    fail "preemption: preempt-22 (GPU $g) evicted $(wc -l <"$work/gone") pods: ${gone:-none}; want the 7 of GPU $g"
  [ "$(wc -l <"$work/after")" = 49 ] || fail "preemption: $(wc -l <"$work/after") seed pods Running after it, want 49"
  settle "$mem" 49 51 120
  ok=$(mem_consistent) || fail "preemption: $ok"
  echo "e2e-test: preempt-22 (priority 1000, 22 GiB): evicted the 7 pods of GPU $g and runs there; the replacements Pending; node mem: $ok"

  serving_pod preempt-23 23
  not_helpful preempt-23 "no GPU would have room"
  seed_gpus >"$work/after23"
  cmp -s "$work/after" "$work/after23" || fail "preemption: preempt-23 evicted: $(evicted "$work/after" "$work/after23" | tr '\n' ' ')"
  echo "e2e-test: preempt-23 (more than any GPU): nothing evicted"
  "$kubectl" -n "$ns" delete pod preempt-23 --wait=true >/dev/null

  if [ "${1:-}" = budgets ]; then
    local u
    u=$(awk -v g="$g" '$2 != g {print $2; exit}' "$work/after")
    # shellcheck disable=SC2046  # one argument per pod name
    "$kubectl" -n default label pod $(awk -v u="$u" '$2 != u {print $1}' "$work/after") \
      gpushare.e2e/guard=true --overwrite >/dev/null
    printf 'apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: guard, namespace: default}\nspec:\n  maxUnavailable: 0\n  selector: {matchLabels: {gpushare.e2e/guard: "true"}}\n' |
      "$kubectl" apply -f - >/dev/null
    for _ in $(seq 60); do
      [ -n "$("$kubectl" -n default get pdb guard -o jsonpath='{.status.observedGeneration}')" ] && break
      sleep 1
    done
    serving_pod preempt-pdb 22
    running preempt-pdb
    seed_gpus >"$work/after-pdb"
    evicted "$work/after" "$work/after-pdb" >"$work/gone-pdb"
    [ "$(gpu_of preempt-pdb)" = "$u" ] && [ "$(wc -l <"$work/gone-pdb")" = 7 ] &&
      [ "$(awk '{print $2}' "$work/gone-pdb" | sort -u)" = "$u" ] ||
      fail "preemption: with the budget over every GPU but $u, preempt-pdb went to GPU $(gpu_of preempt-pdb) evicting $(awk '{print $1 "@" $2}' "$work/gone-pdb" | tr '\n' ' ')"
    echo "e2e-test: preempt-pdb: the budget covers every GPU but $u: evicted the 7 pods of GPU $u, runs there"
    # Every Running seed pod covered now: nothing may go.
    # Pods evicted a moment ago may vanish between kubectl's list and its patch ("NotFound"):
    # the others are labelled all the same, so the label is retried until one pass meets none.
    local labelled=0
    for _ in $(seq 30); do
      "$kubectl" -n default label pod -l serving.knative.dev/service=helloworld-go \
        gpushare.e2e/guard=true --overwrite >/dev/null 2>&1 && { labelled=1; break; }
      sleep 1
    done
    [ "$labelled" = 1 ] || fail "preemption: could not label every helloworld-go pod gpushare.e2e/guard=true in 30 s"
    serving_pod preempt-none 22
    not_helpful preempt-none "PodDisruptionBudget"
    seed_gpus >"$work/after-none"
    cmp -s "$work/after-pdb" "$work/after-none" || fail "preemption: preempt-none evicted: $(evicted "$work/after-pdb" "$work/after-none" | tr '\n' ' ')"
    echo "e2e-test: preempt-none: every seed pod covered by the budget: nothing evicted"
    "$kubectl" -n "$ns" delete pod preempt-pdb preempt-none --wait=true >/dev/null
    "$kubectl" -n default delete pdb guard >/dev/null
  fi
  "$kubectl" -n "$ns" delete pod preempt-22 --wait=true >/dev/null
  "$kubectl" delete priorityclass gpushare-e2e-serving >/dev/null
  settle "$mem" 56 44 180
}
