#!/usr/bin/env bash
# Smoke test of the e2e cluster (docs/e2e.md): brings it up, checks that every node is Ready
# with its own kubelet sockets, runs a plain pod on each node with the real runtime (containerd
# + runc) and checks what the container was given, then takes the cluster down.
#   E2E_KEEP=1  leave the cluster up afterwards (for looking around)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cluster="$repo/scripts/e2e-cluster.sh"
kubectl="${E2E_BIN:-$repo/build/e2e/bin}/kubectl"
export KUBECONFIG="$repo/build/e2e/kubeconfig"
state=${E2E_DIR:-$repo/build/e2e/cluster}
pids="$state/pids"
read -r -a nodes <<<"${E2E_NODES:-ts mig mem}"
ns=e2e-smoke

fail() { echo "e2e-smoke: FAIL: $*" >&2; exit 1; }
# shellcheck source=scripts/e2e-lib.sh
source "$repo/scripts/e2e-lib.sh"
cleanup() {
  local rc=$?
  if [ "${E2E_KEEP:-0}" != 1 ]; then
    "$cluster" down || rc=1
    # Nothing of the cluster may stay mounted or running.
    if grep -q " $state/" /proc/self/mountinfo; then
      echo "e2e-smoke: FAIL: mounts of $state left after down" >&2; rc=1
    fi
    if ls "$pids"/*.pid >/dev/null 2>&1; then
      echo "e2e-smoke: FAIL: pid files left after down: $(ls "$pids")" >&2; rc=1
    fi
  fi
  if [ $rc -eq 0 ]; then echo "e2e-smoke: PASS"; else echo "e2e-smoke: FAILED (rc=$rc); logs in $state/logs" >&2; fi
  exit $rc
}
trap cleanup EXIT

# busybox_pod name node shell-command: a pod of the local busybox image on that node, running
# the command with $NODE set to the node's name (downward API).
busybox_pod() {
  local cmd=${3//\\/\\\\}
  cmd=${cmd//\"/\\\"}
  cat <<EOF | "$kubectl" apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $ns
spec:
  nodeSelector:
    gpushare.e2e/node: $2
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: e2e.local/busybox:1.35
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "$cmd"]
    env:
    - name: NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
EOF
}

start=$(date +%s)
"$cluster" up
echo "e2e-smoke: cluster up in $(( $(date +%s) - start )) s"
# A second `up` must be harmless: nothing restarted.
before=$(cat "$pids"/*.pid | sort)
"$cluster" up >/dev/null
[ "$before" = "$(cat "$pids"/*.pid | sort)" ] || fail "a second 'up' restarted components"
"$cluster" status >/dev/null || fail "status after up says something is stopped"

ready=$("$kubectl" get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
echo "$ready"
for n in "${nodes[@]}"; do
  grep -qx "$n=True" <<<"$ready" || fail "node $n not Ready"
  # Each kubelet's device-plugin socket exists in its own namespace only.
  holder=$(cut -d' ' -f1 "$pids/node-$n.pid")
  [ -S "/proc/$holder/root/var/lib/kubelet/device-plugins/kubelet.sock" ] ||
    fail "node $n: no kubelet.sock in its /var/lib/kubelet/device-plugins"
  [ -S "/proc/$holder/root/var/lib/kubelet/pod-resources/kubelet.sock" ] ||
    fail "node $n: no PodResources socket in its /var/lib/kubelet/pod-resources"
done
[ ! -S /var/lib/kubelet/device-plugins/kubelet.sock ] || fail "a kubelet socket leaked into the host's /var/lib/kubelet/device-plugins"

# A namespace left by an earlier run that failed (the cluster keeps its state) is removed first:
# its pods would count restarts from that run.
"$kubectl" delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s >/dev/null
new_namespace "$ns"
for n in "${nodes[@]}"; do
  busybox_pod "plain-$n" "$n" 'echo nofile=$(ulimit -n)/$(ulimit -Hn) node=$NODE; exec sleep 3600'
done
start=$(date +%s)
for n in "${nodes[@]}"; do
  "$kubectl" -n "$ns" wait --for=jsonpath='{.status.phase}'=Running "pod/plain-$n" --timeout=180s >/dev/null ||
    { "$kubectl" -n "$ns" describe pod "plain-$n" | tail -20; fail "pod plain-$n not Running"; }
done
echo "e2e-smoke: ${#nodes[@]} pods Running in $(( $(date +%s) - start )) s"
"$kubectl" -n "$ns" get pods -o wide
hard=$(ulimit -Hn)
for n in "${nodes[@]}"; do
  out=""
  for _ in $(seq 20); do out=$("$kubectl" -n "$ns" logs "plain-$n" 2>/dev/null || true); [ -n "$out" ] && break; sleep 0.5; done
  echo "plain-$n: $out"
  grep -q "node=$n\$" <<<"$out" || fail "pod plain-$n: unexpected output '$out'"
  got=$(sed -n 's/.*nofile=[0-9]*\/\([0-9]*\).*/\1/p' <<<"$out")
  [ -n "$got" ] && [ "$got" -le "$hard" ] || fail "pod plain-$n: open-file hard limit '$got' above the host's $hard"
done

# Pod networking: the host and a pod on another node reach a pod's port (CNI bridge per node,
# host-routed between them). busybox's own wget crashes (Debian's static build), hence nc.
busybox_pod web "${nodes[0]}" 'mkdir -p /tmp/www && echo hello-from-$NODE >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www'
"$kubectl" -n "$ns" wait --for=condition=Ready pod/web --timeout=120s >/dev/null || fail "pod web not Ready"
ip=$("$kubectl" -n "$ns" get pod web -o jsonpath='{.status.podIP}')
got=$(curl -sf -m 10 "http://$ip:8080/") || fail "host cannot reach pod web at $ip:8080"
[ "$got" = "hello-from-${nodes[0]}" ] || fail "pod web answered '$got'"
if [ ${#nodes[@]} -gt 1 ]; then
  got=$("$kubectl" -n "$ns" exec "plain-${nodes[-1]}" -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 10 $ip 8080 | tail -1") ||
    fail "pod plain-${nodes[-1]} cannot reach pod web at $ip:8080"
  [ "$got" = "hello-from-${nodes[0]}" ] || fail "pod web answered '$got' to node ${nodes[-1]}"
fi
echo "e2e-smoke: pod web on ${nodes[0]} ($ip) reached from the host and from node ${nodes[-1]}"

# A kubelet that died is started again by `up`, and nothing else is; its pods keep running
# (containerd and the shims are untouched).
victim=kubelet-${nodes[-1]}
read -r vpid _ <"$pids/$victim.pid"
others() { grep -H . "$pids"/*.pid | grep -v "/$victim.pid:" | sort; }
before=$(others)
kill -KILL "$vpid"
for _ in $(seq 50); do [ -d "/proc/$vpid" ] || break; sleep 0.1; done
if "$cluster" status >/dev/null; then fail "status says all runs with $victim killed"; fi
"$cluster" up >/dev/null || fail "up after killing $victim failed"
[ "$before" = "$(others)" ] || fail "up after killing $victim restarted other components"
read -r npid _ <"$pids/$victim.pid"
[ "$npid" != "$vpid" ] || fail "$victim not restarted"
echo "e2e-smoke: $victim killed and started again by up (pid $vpid -> $npid)"
phase=$("$kubectl" -n "$ns" get pod "plain-${nodes[-1]}" -o jsonpath='{.status.phase} {.status.containerStatuses[0].restartCount}')
[ "$phase" = "Running 0" ] || fail "pod plain-${nodes[-1]} after its kubelet restarted: '$phase', want 'Running 0'"

"$kubectl" delete namespace "$ns" --wait=true --timeout=120s >/dev/null
