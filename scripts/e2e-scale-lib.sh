#!/usr/bin/env bash
# Bursts of pods on the scale harness, measured (docs/e2e.md, "Throughput"). Sourced by
# scripts/e2e-scale-smoke.sh, scripts/e2e-scale-throughput.sh and scripts/e2e-scale-hami.sh;
# expects repo, bin, kubeconfig, ns, E2E_SCALE_DIR, say and fail, and (for the bursts) the
# harness up. scripts/e2e-scale.sh sources it for e2e_tools alone (repo and bin).
#
#   e2e_tools NAME...               e2e/cmd/NAME built into $bin (Go's cache: quick when current)
#   burst NAME RESOURCE=QTY COUNT   COUNT pods asking RESOURCE=QTY created at once (bindrate,
#                                   kube-scheduler stopped while they are created), waited for
#                                   until Running; prints bindrate's line on stderr and, on
#                                   stdout, one line of key=value pairs: bindrate's figures
#                                   (pods_per_s, p50_s, p99_s, ...) and what the burst cost the
#                                   control plane (e2e/scale/metrics.py: API requests per pod
#                                   beyond the background rate of the 10 s before,
#                                   kube-scheduler's and gpushare-scheduler's latency p99s, their
#                                   CPU seconds, gpushare-scheduler's peak RSS)
#   clear_pods                      every pod of the namespace gone (force, then waited for)
#   new_scale_namespace             the namespace, and its default ServiceAccount waited for
#   skip_without_node_list FILE     exits 0, saying SKIPPED, when the trace's node list is absent
#   purge_on_exit                   the harness purged (down, state removed) when the script
#                                   ends, unless E2E_KEEP=1

skip_without_node_list() {
  [ -r "$1" ] && return 0
  say "SKIPPED: the trace's node list $1 is not here (../shared/data)"
  exit 0
}

purge_on_exit() { trap scale_purge_exit EXIT; }
scale_purge_exit() {
  local rc=$?
  [ "${E2E_KEEP:-0}" = 1 ] || "$repo/scripts/e2e-scale.sh" purge >/dev/null || rc=1
  exit $rc
}

scale_kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

new_scale_namespace() {
  scale_kubectl create namespace "$ns" --dry-run=client -o yaml | scale_kubectl apply -f - >/dev/null ||
    fail "could not create namespace $ns"
  for _ in $(seq 120); do
    scale_kubectl -n "$ns" get serviceaccount default >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  fail "namespace $ns: no default ServiceAccount after 60 s"
}

# e2e_tools NAME...: e2e/cmd/NAME built into $bin from the e2e module's pinned dependencies,
# every time: Go's build cache makes that a second when nothing changed, and it notices a change
# anywhere in the module (e2e/internal too), which a date test of main.go would not.
e2e_tools() {
  local n pkgs=()
  for n in "$@"; do pkgs+=("./cmd/$n"); done
  (cd "$repo/e2e" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath \
    -o "$bin/" "${pkgs[@]}")
}
ensure_bindrate() { e2e_tools bindrate || fail "building e2e/cmd/bindrate failed"; }

# snapshot DIR: the three components' /metrics and the schedulers' CPU ticks and peak RSS.
snapshot() {
  local d=$1 token name pid
  mkdir -p "$d"
  date +%s.%N >"$d/time.txt"
  token=$(scale_kubectl create token scale-scraper -n kube-system 2>/dev/null) || true
  scale_kubectl get --raw /metrics >"$d/apiserver.txt" 2>/dev/null || : >"$d/apiserver.txt"
  curl -sfk -m 10 ${token:+-H "Authorization: Bearer $token"} https://127.0.0.1:10259/metrics \
    >"$d/kube-scheduler.txt" || : >"$d/kube-scheduler.txt"
  curl -sf -m 10 ${token:+-H "Authorization: Bearer $token"} http://127.0.0.1:12346/metrics \
    >"$d/gpushare-scheduler.txt" || : >"$d/gpushare-scheduler.txt"
  : >"$d/procs.txt"
  for name in gpushare-scheduler kube-scheduler; do
    pid=$(cut -d' ' -f1 "$E2E_SCALE_DIR/pids/$name.pid" 2>/dev/null) || continue
    [ -r "/proc/$pid/stat" ] || continue
    # utime + stime (fields 14, 15; the command name, field 2, holds no space here), VmHWM kB.
    echo "$name $(awk '{print $14 + $15}' "/proc/$pid/stat") $(awk '$1 == "VmHWM:" {print $2}' "/proc/$pid/status")" >>"$d/procs.txt"
  done
}

burst() {
  local name=$1 res=$2 count=$3 out sched_pid m="$E2E_SCALE_DIR/metrics/$1"
  ensure_bindrate
  sched_pid=$(cut -d' ' -f1 "$E2E_SCALE_DIR/pids/kube-scheduler.pid")
  # 10 s with no burst first: the API server's background rate, taken out of the burst's count.
  snapshot "$m/idle"
  sleep 10
  snapshot "$m/before"
  out=$(KUBECONFIG="$kubeconfig" "$bin/bindrate" -namespace "$ns" -name "$name" -count "$count" \
    -resource "$res" -running -timeout 15m -pause-pid "$sched_pid") || fail "bindrate $name: $out"
  snapshot "$m/after"
  echo "$out" | grep '^bindrate:' >&2
  echo "$(sed -n 's/^bindrate-result //p' <<<"$out") $(python3 "$repo/e2e/scale/metrics.py" diff "$m/before" "$m/after" "$count" "$m/idle")"
}

# field LINE KEY: the value of KEY=value in a burst's line.
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

clear_pods() {
  scale_kubectl -n "$ns" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
  for _ in $(seq 300); do
    [ "$(scale_kubectl -n "$ns" get pods --no-headers 2>/dev/null | wc -l)" = 0 ] && return 0
    sleep 1
  done
  fail "pods of namespace $ns still there 300 s after their deletion"
}
