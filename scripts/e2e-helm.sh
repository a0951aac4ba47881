#!/usr/bin/env bash
# gpushare installed with Helm on the e2e cluster (docs/e2e.md, issue 12 section 4), after
# scripts/e2e-test.sh on the same cluster (which calls this before taking the cluster down):
#   1. helm lint and helm template of deploy/helm/gpushare in every scheduler mode; the API
#      server accepts what they render (kubectl apply --dry-run=server); deploy/manifests/ is
#      what the chart renders; a bad value fails naming the value.
#   2. the images of `make images` pushed to the local registry (and a kube-scheduler image
#      made from the binary of scripts/e2e-build.sh, and the CUDA-double probe image).
#   3. gpushare's host processes stopped, the cluster's kube-scheduler restarted with its
#      defaults (no extender, no configuration file), `helm install` (second-scheduler mode):
#      the nodes advertise what they did, the webhook has its certificate.
#   4. the probe pod with aliyun.com/gpu-mem: "3" and one on a time-slice with evenSplit: the
#      real container's CUDA sees the limit and the allocation past it fails.
#   5. the seed workload checks again (scripts/e2e-lib.sh), memory shares placed by gpushare's
#      own scheduler.
#   6. `helm upgrade` to a new image tag with the probe pods running: they keep running, a new
#      pod gets the new library; `helm uninstall`: the pods keep running.
# Needs root, a cluster up with scripts/e2e-cluster.sh, build/e2e/bin/helm, the images of
# `make images` in buildah's storage and build/lib/libgpushare-cuda.so.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cluster="$repo/scripts/e2e-cluster.sh"
bin=${E2E_BIN:-$repo/build/e2e/bin}
kubectl="$bin/kubectl"
helm="$bin/helm"
export KUBECONFIG="$repo/build/e2e/kubeconfig"
state=${E2E_DIR:-$repo/build/e2e/cluster}
pids="$state/pids"
chart="$repo/deploy/helm/gpushare"
registry=127.0.0.1:5000
release=gpushare
gns=gpushare
ns=e2e-helm
work="$state/helm"
export E2E_NODES="ts mig mem"

fail() { echo "e2e-helm: FAIL: $*" >&2; exit 1; }
say() { echo "e2e-helm: $*"; }
# shellcheck source=scripts/e2e-lib.sh
source "$repo/scripts/e2e-lib.sh"

[ -x "$helm" ] || fail "$helm missing (scripts/e2e-build.sh builds it)"
[ -f "$repo/build/lib/libgpushare-cuda.so" ] || fail "build/lib/libgpushare-cuda.so missing (ninja -C build gpushare-cuda)"
mkdir -p "$work"
kver=$("$kubectl" version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')
version=$(sed -n 's/^project(gpushare VERSION \([0-9.]*\) .*/\1/p' "$repo/CMakeLists.txt")
tag_b="$version-e2e.2"
say "helm $("$helm" version --short), cluster $kver, images $version then $tag_b"

# What an earlier run on this cluster left (etcd outlives `down`), gone first.
"$helm" uninstall "$release" -n "$gns" --ignore-not-found --wait --timeout 3m >/dev/null 2>&1 || true
"$helm" uninstall nvidia-device-plugin -n nvidia-device-plugin --ignore-not-found --wait >/dev/null 2>&1 || true
"$kubectl" delete namespace "$ns" nvidia-device-plugin --ignore-not-found --wait=true --timeout=180s >/dev/null
"$kubectl" delete pod gpu-mem-test --ignore-not-found --wait=true >/dev/null
# gpushare's images are rebuilt under the same tags: the nodes must not keep running the ones an
# earlier run pulled (IfNotPresent), so they forget them and pull again.
"$cluster" forget-images "$registry/gpushare/" >&2

# ---------------------------------------------------------------------------------------------
# 1. Lint, template, the API server's dry run.
new_namespace "$gns"
for mode in second-scheduler extender none; do
  "$helm" lint --strict "$chart" --kube-version "$kver" --set "scheduler.mode=$mode" >"$work/lint-$mode.txt" 2>&1 ||
    { cat "$work/lint-$mode.txt" >&2; fail "helm lint --strict (scheduler.mode=$mode)"; }
  "$helm" template "$release" "$chart" -n "$gns" --kube-version "$kver" --set "scheduler.mode=$mode" \
    >"$work/$mode.yaml" 2>"$work/template-$mode.err" ||
    { cat "$work/template-$mode.err" >&2; fail "helm template (scheduler.mode=$mode)"; }
  "$kubectl" apply --dry-run=server -f "$work/$mode.yaml" >"$work/dry-run-$mode.txt" 2>&1 ||
    { cat "$work/dry-run-$mode.txt" >&2; fail "the API server refused what the chart renders (scheduler.mode=$mode)"; }
  say "scheduler.mode=$mode: lint clean, $(grep -c '^kind:' "$work/$mode.yaml") objects accepted by the API server (dry run)"
done
# The plain manifests are the chart's output, never edited by hand.
"$repo/scripts/render-manifests.sh" --check || fail "deploy/manifests/ is not what the chart renders (scripts/render-manifests.sh)"
# Bad values fail naming the value.
for bad in "scheduler.mode=extendr:scheduler.mode: must be second-scheduler, extender or none" \
           "config.default=nope:config.default: \"nope\" is not a key of config.map" \
           "scheduler.webhook.failurePolicy=Sometimes:scheduler.webhook.failurePolicy: must be Fail or Ignore"; do
  out=$("$helm" template x "$chart" --kube-version "$kver" --set "${bad%%:*}" 2>&1) && fail "--set ${bad%%:*} rendered"
  grep -qF "${bad#*:}" <<<"$out" || fail "--set ${bad%%:*}: '$out' does not say '${bad#*:}'"
done
say "bad values refused, each naming the value"

# ---------------------------------------------------------------------------------------------
# The README's install commands run as written (scripts/readme-block.py extracts each marked
# block), with: kubectl, helm and buildah this harness's (shell functions below), REGISTRY the
# local registry, NODE the node `mem`, TAG the upgrade's tag; `helm install` and `helm upgrade`
# get the simulated GPUs' values appended (e2e/gpushare/helm-values.yaml: an inventory file per
# node instead of NVML, the named configs ts, mig, mem); `buildah push` to the plain-HTTP
# registry gets --tls-verify=false.
kubectl() { "$kubectl_bin" "$@"; }
helm() {
  case $1 in
    install | upgrade)
      "$helm_bin" "$@" -f "$repo/e2e/gpushare/helm-values.yaml" \
        --set-file "config.map.ts=$repo/e2e/gpushare/ts-config.yaml" \
        --set-file "config.map.mig=$repo/e2e/gpushare/mig-config.yaml" \
        --set-file "config.map.mem=$repo/e2e/gpushare/mem-config.yaml" ;;
    *) "$helm_bin" "$@" ;;
  esac
}
buildah() {
  if [ "$1" = push ]; then command buildah push --quiet --tls-verify=false "${@:2}" >/dev/null; else command buildah "$@"; fi
}
kubectl_bin=$kubectl
helm_bin=$helm
export REGISTRY=$registry NODE=mem TAG=$tag_b
# readme name: runs the README block, printing it and what it printed; fails naming the block.
readme() {
  local code
  code=$(python3 "$repo/scripts/readme-block.py" "$repo/README.md" "$1") || fail "README: no block $1"
  say "README block '$1':"
  sed 's/^/  $ /' <<<"$code"
  (cd "$repo" && set -e && eval "$code") >"$work/readme-$1.txt" 2>&1 ||
    { sed 's/^/  | /' "$work/readme-$1.txt" >&2; fail "README block '$1' failed"; }
  sed 's/^/  | /' "$work/readme-$1.txt" | tail -20
}

# ---------------------------------------------------------------------------------------------
# 2. Images into the local registry: the README's (make images, buildah push), then the upgrade's
# node image: the same image with the library of this machine's build (other bytes, so another
# versioned directory on the hosts) and its own version label.
readme images
lib_a=$(command buildah run "$(command buildah from --pull-never --quiet "docker.io/gpushare/gpushare-node:$version")" -- \
  md5sum /usr/lib/gpushare/libgpushare-cuda.so | cut -d' ' -f1)
command buildah rm --all >/dev/null
ctr=$(command buildah from --pull-never --quiet "docker.io/gpushare/gpushare-node:$version")
command buildah copy --quiet "$ctr" "$repo/build/lib/libgpushare-cuda.so" /usr/lib/gpushare/libgpushare-cuda.so >/dev/null
command buildah config --label "org.opencontainers.image.version=$tag_b" "$ctr"
command buildah commit --quiet "$ctr" "localhost/gpushare-e2e/gpushare-node:$tag_b" >/dev/null
command buildah rm "$ctr" >/dev/null
buildah push "localhost/gpushare-e2e/gpushare-node:$tag_b" "docker://$registry/gpushare/gpushare-node:$tag_b" ||
  fail "pushing gpushare-node:$tag_b failed"
buildah push "docker.io/gpushare/gpushare-scheduler:$version" "docker://$registry/gpushare/gpushare-scheduler:$tag_b" ||
  fail "pushing gpushare-scheduler:$tag_b failed"
lib_b=$(md5sum "$repo/build/lib/libgpushare-cuda.so" | cut -d' ' -f1)
[ "$lib_a" != "$lib_b" ] || fail "the upgrade's library has the same bytes as the image's ($lib_a)"
# kube-scheduler (the chart's default registry.k8s.io/kube-scheduler:<cluster version>, which the
# nodes pull through the local mirror): the binary scripts/e2e-build.sh built.
python3 "$repo/e2e/images/mkimage.py" --out "$work/kube-scheduler.tar" --name "registry.k8s.io/kube-scheduler:$kver" \
  --file "$bin/kube-scheduler:/usr/local/bin/kube-scheduler" --dir /tmp --env PATH=/usr/local/bin \
  --entrypoint /usr/local/bin/kube-scheduler
python3 "$repo/e2e/images/push.py" --archive "$work/kube-scheduler.tar" --registry "$registry" \
  --as "kube-scheduler:$kver" >/dev/null || fail "pushing kube-scheduler:$kver failed"
# The CUDA probe (driver double, probe, an nvidia-smi stand-in), also as the README test pod's
# CUDA image (nvcr.io's, through the mirror).
probe_image=$(E2E_REGISTRY=$registry "$repo/scripts/e2e-probe-image.sh" --push | tail -1) || fail "the CUDA probe image failed"
buildah push "localhost/$probe_image" "docker://$registry/nvidia/cuda:12.4.1-base-ubuntu22.04" ||
  fail "pushing the probe as nvidia/cuda:12.4.1-base-ubuntu22.04 failed"
say "in $registry: gpushare-node and gpushare-scheduler $version and $tag_b, kube-scheduler:$kver, $probe_image"

# ---------------------------------------------------------------------------------------------
# 3. gpushare moves into pods; the cluster's kube-scheduler loses its extender.
"$kubectl" delete namespace e2e-gpushare --ignore-not-found --wait=true --timeout=180s >/dev/null
"$cluster" host-gpushare-stop
"$cluster" scheduler-plain
grep -q -- '--config' "/proc/$(cut -d' ' -f1 "$pids/kube-scheduler.pid")/cmdline" &&
  fail "the cluster's kube-scheduler still runs with a configuration file"
for n in $E2E_NODES; do
  d="$state/nodes/$n/var-lib-gpushare/e2e"
  mkdir -p "$d"
  case $n in
    ts | mem) cp "$repo/examples/inventory/8x-a10.yaml" "$d/inventory.yaml" ;;
    mig) cp "$repo/e2e/gpushare/mig-inventory.yaml" "$d/inventory.yaml" ;;
  esac
  "$kubectl" label node "$n" "nvidia.com/device-plugin.config=$n" gpushare.io/gpu=true --overwrite >/dev/null
done
# Migrating: a stand-in release named as NVIDIA's chart names its DaemonSet, removed by the
# README's commands.
nv="$work/nvidia-device-plugin"
mkdir -p "$nv/templates"
printf 'apiVersion: v2\nname: nvidia-device-plugin\nversion: 0.17.0\n' >"$nv/Chart.yaml"
cat >"$nv/templates/ds.yaml" <<'YAML'
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-device-plugin
  labels: {app.kubernetes.io/name: nvidia-device-plugin}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: nvidia-device-plugin}}
  template:
    metadata: {labels: {app.kubernetes.io/name: nvidia-device-plugin}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: stand-in, image: e2e.local/busybox:1.35, imagePullPolicy: Never, command: [sleep, "3600"]}
YAML
"$helm_bin" install nvidia-device-plugin "$nv" --namespace nvidia-device-plugin --create-namespace --wait --timeout 2m >/dev/null ||
  fail "installing the stand-in nvidia-device-plugin release failed"
readme migrate
grep -q nvidia-device-plugin "$work/readme-migrate.txt" || fail "README migrate: the listing did not show NVIDIA's DaemonSet"
[ -z "$("$kubectl" get daemonsets -A -l app.kubernetes.io/name=nvidia-device-plugin -o name)" ] ||
  fail "README migrate: NVIDIA's DaemonSet still there"
"$kubectl" delete namespace nvidia-device-plugin --wait=false >/dev/null

t0=$SECONDS
readme install
say "helm install: ready in $((SECONDS - t0)) s"
grep -q 'kubectl label node <gpu-node> nvidia.com/device-plugin.config' "$work/readme-install.txt" || fail "helm install printed no NOTES"
want_alloc ts nvidia.com/gpu 80
want_alloc mig nvidia.com/mig-1g.10gb 21
want_alloc mig nvidia.com/gpu 2
want_alloc mem aliyun.com/gpu-mem 176
want_alloc mem aliyun.com/gpu-count 8
readme check
grep -q 'aliyun.com/gpu-mem: *176' "$work/readme-check.txt" || fail "README check: node mem's Allocatable does not show aliyun.com/gpu-mem 176"
webhook=$("$kubectl" get mutatingwebhookconfiguration -l "app.kubernetes.io/instance=$release" -o name)
ca=""
for _ in $(seq 60); do
  ca=$("$kubectl" get "$webhook" -o jsonpath='{.webhooks[0].clientConfig.caBundle}')
  [ -n "$ca" ] && break
  sleep 1
done
[ -n "$ca" ] || fail "$webhook: no caBundle after 60 s (gpushare-scheduler makes the certificate)"
say "$webhook: caBundle set by gpushare-scheduler ($(base64 -d <<<"$ca" | grep -c 'BEGIN CERTIFICATE') CA certificate(s))"

# ---------------------------------------------------------------------------------------------
# 4. The README's test pod and its choice of sharing per node.
new_namespace "$ns"
# The README's test pod: nvidia-smi in a CUDA base image (here the probe image under that name,
# whose nvidia-smi stand-in answers memory.total from cuMemGetInfo) says 3072 MiB.
readme test-pod
grep -qx '3072 MiB' "$work/readme-test-pod.txt" || fail "README test pod: nvidia-smi did not say 3072 MiB"
"$kubectl" delete pod gpu-mem-test --wait=false >/dev/null
# The README's choice of sharing: node mem relabelled to the chart's memory-shares config (other
# bytes than its own config `mem`): the agent reloads it without a restart.
agent_mem=$("$kubectl" -n "$gns" get pods -l app.kubernetes.io/component=node --field-selector spec.nodeName=mem -o name)
restarts=$("$kubectl" -n "$gns" get "$agent_mem" -o jsonpath='{.status.containerStatuses[0].restartCount}')
# reloads: how many reloads the agent's log shows (grep -c reads it all: with pipefail, grep -q
# leaving early would fail the pipeline with kubectl's SIGPIPE once the log is long).
reloads() { "$kubectl" -n "$gns" logs "$agent_mem" 2>/dev/null | grep -c 'event=reload_accepted' || true; }
readme choose
for _ in $(seq 90); do
  [ "$(reloads)" -gt 0 ] && break
  sleep 1
done
[ "$(reloads)" -gt 0 ] || fail "README choose: node mem's agent did not reload after the label change (90 s)"
[ "$("$kubectl" -n "$gns" get "$agent_mem" -o jsonpath='{.status.containerStatuses[0].restartCount}')" = "$restarts" ] ||
  fail "README choose: the agent restarted instead of reloading"
want_alloc mem aliyun.com/gpu-mem 176
say "node mem relabelled memory-shares: reloaded in place, still 176 aliyun.com/gpu-mem"
# Migrating from HAMi (issue 26): a stand-in release named as HAMi's chart installs it, removed
# by the README's commands, which then turn on the rewrite of HAMi's pod spec; HAMi's test pod,
# unchanged, gets 3000 MiB as 3 GiB, its compute share, and gpushare's scheduler.
hami="$work/hami"
mkdir -p "$hami/templates"
printf 'apiVersion: v2\nname: hami\nversion: 2.10.0\n' >"$hami/Chart.yaml"
cat >"$hami/templates/ds.yaml" <<'YAML'
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: hami-device-plugin
  labels: {app.kubernetes.io/name: hami}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: hami}}
  template:
    metadata: {labels: {app.kubernetes.io/name: hami}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: stand-in, image: e2e.local/busybox:1.35, imagePullPolicy: Never, command: [sleep, "3600"]}
YAML
"$helm_bin" install hami "$hami" --namespace kube-system --wait --timeout 2m >/dev/null ||
  fail "installing the stand-in hami release failed"
readme hami-migrate
grep -q '^hami' "$work/readme-hami-migrate.txt" || fail "README hami-migrate: the listing did not show HAMi's release"
[ -z "$("$kubectl" get daemonsets -A -l app.kubernetes.io/name=hami -o name)" ] ||
  fail "README hami-migrate: HAMi's DaemonSet still there"
"$kubectl" -n "$gns" get deployment "$release-scheduler" -o jsonpath='{.spec.template.spec.containers[*].args}' |
  grep -q -- '--hami-resources' || fail "README hami-migrate: gpushare-scheduler runs without --hami-resources"
readme hami-pod
grep -qx '3072 MiB' "$work/readme-hami-pod.txt" || fail "README hami-pod: nvidia-smi did not say 3072 MiB"
grep -q '"aliyun.com/gpu-mem":"3"' "$work/readme-hami-pod.txt" && grep -q '"nvidia.com/gpucores":"30"' "$work/readme-hami-pod.txt" ||
  fail "README hami-pod: the pod's limits are not gpushare's: $(tail -1 "$work/readme-hami-pod.txt")"
[ "$("$kubectl" get pod hami-test -o jsonpath='{.spec.schedulerName}')" = gpushare-scheduler ] ||
  fail "hami-test: schedulerName not gpushare-scheduler"
hami_asked=$("$kubectl" get pod hami-test -o jsonpath='{.metadata.annotations.gpushare\.io/hami-resources}')
grep -q '"nvidia.com/gpumem":"3000"' <<<"$hami_asked" || fail "hami-test: gpushare.io/hami-resources is '$hami_asked'"
say "HAMi's pod, unchanged: 3072 MiB, limits $(tail -1 "$work/readme-hami-pod.txt"), asked $hami_asked"
"$kubectl" delete pod hami-test --wait=false >/dev/null

# ---------------------------------------------------------------------------------------------
# 5. The seed workloads, memory shares placed by gpushare's own scheduler (before the probes,
# which would hold a time-slice and 3 GiB).
seed_checks
# Preemption through the chart's own kube-scheduler (issue 23), PodDisruptionBudgets included.
preemption_checks budgets
sn=$("$kubectl" -n default get pods -l serving.knative.dev/service=helloworld-go -o jsonpath='{.items[*].spec.schedulerName}' | tr ' ' '\n' | sort -u)
[ "$sn" = gpushare-scheduler ] || fail "$mem: schedulerNames '$sn', want gpushare-scheduler on every pod"
"$kubectl" -n default delete deployment helloworld-go-00001-deployment --wait=true >/dev/null
"$kubectl" -n default delete ksvc helloworld-go >/dev/null
gone "$mem" 180 "deleted"

# ---------------------------------------------------------------------------------------------
# 6. The probe: CUDA (the driver double) inside the real container, with the library the node
# agent installed, preloaded by the kubelet's mounts.
probe_pod() { # name resource count [node]
  { printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nspec:\n' "$1" "$ns"
    [ -n "${4:-}" ] && printf '  nodeSelector: {gpushare.e2e/node: %s}\n' "$4"
    printf '  terminationGracePeriodSeconds: 1\n  containers:\n  - name: probe\n    image: %s\n' "$probe_image"
    [ -n "${probe_hold:-}" ] && printf '    env: [{name: PROBE_HOLD, value: "1"}]\n'
    printf '    resources:\n      limits: {%s: "%s"}\n' "$2" "$3"; } | "$kubectl" apply -f - >/dev/null
}
# probe_result pod: the probe's summary line (waits for it).
probe_result() {
  local out=""
  for _ in $(seq 120); do
    out=$("$kubectl" -n "$ns" logs "$1" 2>/dev/null | grep '^probe: total_mib=' || true)
    [ -n "$out" ] && break
    sleep 1
  done
  [ -n "$out" ] || { "$kubectl" -n "$ns" describe pod "$1" | tail -20 >&2; "$kubectl" -n "$ns" logs "$1" >&2 || true; fail "$1: no probe summary after 120 s"; }
  echo "$out"
}
# want_probe pod total-mib: the limit is the total CUDA reports, allocations reached it (less the
# context charge) and the next one was refused with CUDA_ERROR_OUT_OF_MEMORY.
want_probe() {
  local r
  r=$(probe_result "$1")
  say "$1: $r"
  grep -q "total_mib=$2 " <<<"$r" || fail "$1: '$r', want total_mib=$2"
  grep -q 'next=CUDA_ERROR_OUT_OF_MEMORY' <<<"$r" || fail "$1: '$r', want the allocation past the limit refused with CUDA_ERROR_OUT_OF_MEMORY"
}
# probe-mem3's probe process stays, holding what it allocated (the node's /metrics checks below).
probe_hold=1 probe_pod probe-mem3 aliyun.com/gpu-mem 3
probe_pod probe-slice nvidia.com/gpu 1 ts
running probe-mem3
running probe-slice
[ "$("$kubectl" -n "$ns" get pod probe-mem3 -o jsonpath='{.spec.schedulerName}')" = gpushare-scheduler ] ||
  fail "probe-mem3: schedulerName not set to gpushare-scheduler by the webhook"
[ "$("$kubectl" -n "$ns" get pod probe-slice -o jsonpath='{.spec.schedulerName}')" = default-scheduler ] ||
  fail "probe-slice (no memory share) was sent to another scheduler"
want_probe probe-mem3 3072
want_probe probe-slice 2302
# Bad requests refused at admission by the webhook, the field named (issue 26): a model no GPU of
# the cluster has, a fraction that is neither 1..999 nor whole GPUs.
deny_create() { # name words annotations resources
  local out
  if out=$({ printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\n  annotations: %s\nspec:\n  containers:\n  - name: c\n    image: e2e.local/busybox:1.35\n    resources:\n      limits: %s\n' "$1" "$ns" "$3" "$4"; } |
    "$kubectl" create -f - 2>&1); then
    fail "$1: created, want the webhook to refuse it: $out"
  fi
  grep -qF "$2" <<<"$out" || fail "$1: refused with '$out', want '$2'"
  say "$1: refused at admission: ${out:0:220}"
}
deny_create bad-model 'metadata.annotations[nvidia.com/use-gputype]: "V100" matches no GPU model of the cluster (NVIDIA A10' \
  "{nvidia.com/use-gputype: V100}" "{aliyun.com/gpu-mem: 3}"
# A whole GPU's choice reaches the webhook by its annotation alone (matchConditions) and is
# checked the same way.
deny_create whole-bad-model 'metadata.annotations[nvidia.com/use-gputype]: "V100" matches no GPU model of the cluster (' \
  "{nvidia.com/use-gputype: V100}" "{nvidia.com/gpu: 1}"
deny_create bad-milli 'alibabacloud.com/gpu-milli 1500 is neither a fraction of one GPU' "{}" "{alibabacloud.com/gpu-milli: 1500}"
deny_create bad-core 'aliyun.com/gpu-core.percentage 150 is above 100' "{}" "{aliyun.com/gpu-mem: 3, aliyun.com/gpu-core.percentage: 150}"
deny_create core-alone 'aliyun.com/gpu-core.percentage needs a memory share' "{}" "{aliyun.com/gpu-core.percentage: 30}"

# A compute share (issue 26): ACK's aliyun.com/gpu-core.percentage beside a memory share is the
# container's SM limit, in the config gpushare-node mounts, in its environment and in the
# library's region (node /metrics, below). Placement keeps each GPU's shares at or below 100 %:
# eight 60 % pods (HAMi's nvidia.com/gpucores) take node mem's eight GPUs, a ninth stays Pending
# and says why.
{ printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: probe-core, namespace: %s}\nspec:\n' "$ns"
  printf '  terminationGracePeriodSeconds: 1\n  containers:\n  - name: probe\n    image: %s\n' "$probe_image"
  printf '    env: [{name: PROBE_HOLD, value: "1"}]\n'
  printf '    resources:\n      limits: {aliyun.com/gpu-mem: "3", aliyun.com/gpu-core.percentage: "30"}\n'; } |
  "$kubectl" apply -f - >/dev/null
running probe-core
want_probe probe-core 3072
core_cfg=$("$kubectl" -n "$ns" exec probe-core -- cat /etc/gpushare/config)
grep -qx 'device.0.sm_limit=30' <<<"$core_cfg" || fail "probe-core: /etc/gpushare/config has no device.0.sm_limit=30: $(tr '\n' ' ' <<<"$core_cfg")"
core_env=$("$kubectl" -n "$ns" exec probe-core -- printenv CUDA_DEVICE_SM_LIMIT_0 || true)
[ "$core_env" = 30 ] || fail "probe-core: CUDA_DEVICE_SM_LIMIT_0 is '$core_env', want 30"
say "probe-core: 3 GiB and an SM limit of 30 % (device.0.sm_limit=30, CUDA_DEVICE_SM_LIMIT_0=30)"
for i in $(seq 1 9); do
  { printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: core-%s, namespace: %s, labels: {app: core}}\nspec:\n' "$i" "$ns"
    printf '  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: e2e.local/busybox:1.35\n'
    printf '    imagePullPolicy: Never\n    command: [sleep, "3600"]\n'
    printf '    resources:\n      limits: {aliyun.com/gpu-mem: "1", nvidia.com/gpucores: "60"}\n'; } |
    "$kubectl" apply -f - >/dev/null
done
for _ in $(seq 120); do
  [ "$("$kubectl" -n "$ns" get pods -l app=core -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c .)" -ge 8 ] && break
  sleep 1
done
core_gpus=$("$kubectl" -n "$ns" get pods -l app=core -o jsonpath='{range .items[*]}{.metadata.annotations.ALIYUN_COM_GPU_MEM_IDX}{"\n"}{end}' | grep . | sort -u | wc -l)
[ "$core_gpus" = 8 ] || fail "the 60 % pods: on $core_gpus GPUs, want one on each of node mem's 8: $(phases core)"
why=""
for _ in $(seq 60); do
  unbound=$("$kubectl" -n "$ns" get pods -l app=core -o jsonpath='{range .items[*]}{.metadata.name}={.spec.nodeName}{"\n"}{end}' | sed -n 's/=$//p')
  [ -n "$unbound" ] && why=$("$kubectl" -n "$ns" get events --field-selector "involvedObject.name=$unbound,reason=FailedScheduling" -o jsonpath='{.items[*].message}')
  grep -q "compute share left" <<<"$why" && break
  sleep 1
done
[ "$(wc -w <<<"$unbound")" = 1 ] || fail "the 60 % pods: '$unbound' unbound, want exactly one"
grep -q "no GPU here has the pod's compute share left" <<<"$why" || fail "$unbound: Pending without the compute reason: '$why'"
say "compute shares: eight 60 % pods on node mem's eight GPUs, $unbound Pending: ${why:0:200}"
"$kubectl" -n "$ns" delete pods -l app=core --wait=true --timeout=120s >/dev/null

# Both daemons' /metrics (issue 14), read as Prometheus would: with a ServiceAccount token that
# the chart's <fullname>-metrics-reader ClusterRole is bound to; without a token, 401.
"$kubectl" -n "$gns" create serviceaccount e2e-scraper --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
"$kubectl" create clusterrolebinding e2e-scraper --clusterrole="$release-metrics-reader" \
  --serviceaccount="$gns:e2e-scraper" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
token=$("$kubectl" -n "$gns" create token e2e-scraper) || fail "no token for the e2e-scraper ServiceAccount"
scrape() { # url: /metrics with the token (retried while the RBAC binding propagates)
  local out=""
  for _ in $(seq 20); do
    out=$(curl -sf -H "Authorization: Bearer $token" "$1") && break
    sleep 1
  done
  [ -n "$out" ] || fail "$1 with the scraper's token: $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "$1")"
  echo "$out"
}
node_ip=$("$kubectl" -n "$gns" get pods -l app.kubernetes.io/component=node --field-selector spec.nodeName=mem -o jsonpath='{.items[0].status.podIP}')
[ -n "$node_ip" ] || fail "no gpushare-node pod on node mem"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$node_ip:9445/metrics" || true)
[ "$code" = 401 ] || fail "node mem: /metrics without a token answered $code, want 401"
m=$(scrape "http://$node_ip:9445/metrics")
r=$(probe_result probe-mem3)
allocated=$(sed -n 's/.* allocated_mib=\([0-9]*\) .*/\1/p' <<<"$r")
used=$(grep '^gpushare_container_memory_used_bytes{' <<<"$m" | grep -F 'pod="probe-mem3"' | head -1 | awk '{print $NF}')
limit=$(grep '^gpushare_container_memory_limit_bytes{' <<<"$m" | grep -F 'pod="probe-mem3"' | head -1 | awk '{print $NF}')
[ "$limit" = 3221225472 ] || fail "node mem: gpushare_container_memory_limit_bytes of probe-mem3 is '$limit', want 3221225472"
python3 -c 'import sys; u, a = float(sys.argv[1]), int(sys.argv[2]) * 1048576; sys.exit(0 if a <= u <= 3221225472 else 1)' "${used:-0}" "${allocated:-0}" ||
  fail "node mem: gpushare_container_memory_used_bytes of probe-mem3 is '$used', want between its ${allocated} MiB and 3 GiB"
say "node mem /metrics: probe-mem3 uses $used bytes of its 3 GiB (the probe allocated $allocated MiB)"
ratio=$(grep '^gpushare_container_compute_limit_ratio{' <<<"$m" | grep -F 'pod="probe-core"' | head -1 | awk '{print $NF}')
[ "$ratio" = 0.3 ] || fail "node mem: gpushare_container_compute_limit_ratio of probe-core is '$ratio', want 0.3 (its compute share, from the library's region)"
say "node mem /metrics: probe-core's compute limit ratio 0.3"
sched_ip=$("$kubectl" -n "$gns" get pods -l app.kubernetes.io/component=scheduler -o jsonpath='{.items[0].status.podIP}')
sm=$(scrape "http://$sched_ip:12346/metrics")
for s in gpushare_scheduler_filter_duration_seconds gpushare_scheduler_bind_duration_seconds \
  gpushare_scheduler_gpu_memory_allocated_bytes gpushare_scheduler_filter_rejections_total; do
  grep -q "^# HELP $s " <<<"$sm" || fail "gpushare-scheduler: /metrics has no '# HELP $s'"
done
n=$(grep -c "^gpushare_scheduler_gpu_memory_bytes{.*node=\"mem\"" <<<"$sm" || true)
[ "$n" = 8 ] || fail "gpushare-scheduler: $n gpushare_scheduler_gpu_memory_bytes series of node mem, want 8"
say "gpushare-scheduler /metrics: latency histograms, 8 GPUs of node mem"
# The library each probe maps: what the image carries, from one versioned host directory.
lib_in() { "$kubectl" -n "$ns" exec "$1" -- md5sum /usr/local/gpushare/lib/libgpushare-cuda.so | cut -d' ' -f1; }
[ "$(lib_in probe-mem3)" = "$lib_a" ] || fail "probe-mem3 maps a library other than image $version's"
pod_snapshot | grep "^$ns/" >"$work/pods.before"

# ---------------------------------------------------------------------------------------------
# 7. Upgrade with the probes running, then uninstall.
t0=$SECONDS
readme upgrade
"$kubectl" -n "$gns" rollout status "daemonset/$release-node" --timeout=180s >/dev/null ||
  fail "the node DaemonSet did not roll out $tag_b"
say "helm upgrade to $tag_b: rolled out in $((SECONDS - t0)) s"
untouched "$work/pods.before" "helm upgrade"
want_probe probe-mem3 3072
probe_pod probe-mem3b aliyun.com/gpu-mem 3
running probe-mem3b
want_probe probe-mem3b 3072
[ "$(lib_in probe-mem3b)" = "$lib_b" ] || fail "probe-mem3b (after the upgrade) maps a library other than $tag_b's"
[ "$(lib_in probe-mem3)" = "$lib_a" ] || fail "probe-mem3 no longer maps $version's library"
libdirs=$(ls "$state/nodes/mem/var-lib-gpushare/lib" | grep -v '^\.' | tr '\n' ' ')
[ "$(wc -w <<<"$libdirs")" -eq 2 ] || fail "node mem's library directory holds '$libdirs', want the two versions in use"
say "upgrade: probe-mem3 keeps $version's library, probe-mem3b gets $tag_b's; on node mem: $libdirs"
pod_snapshot | grep "^$ns/" >"$work/pods.before"
readme uninstall
for _ in $(seq 60); do
  [ -z "$("$kubectl" -n "$gns" get pods -o name)" ] && break
  sleep 1
done
[ -z "$("$kubectl" -n "$gns" get pods -o name)" ] || fail "gpushare's pods still there after uninstall"
[ -z "$("$kubectl" get mutatingwebhookconfiguration -l "app.kubernetes.io/instance=$release" -o name)" ] ||
  fail "the webhook configuration is still there after uninstall"
sleep 5
untouched "$work/pods.before" "helm uninstall"
say "helm uninstall: gpushare gone, the probe pods still Running as they were"
"$kubectl" delete namespace "$ns" --wait=true --timeout=180s >/dev/null
say "PASS"
