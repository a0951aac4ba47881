#!/usr/bin/env bash
# A Kubernetes cluster on this machine, on loopback, from the upstream binaries that
# scripts/e2e-build.sh builds (docs/e2e.md):
#
#   scripts/e2e-cluster.sh up       start (or complete) the cluster; harmless when already up
#   scripts/e2e-cluster.sh down     stop everything `up` started, by PID, and unmount everything
#   scripts/e2e-cluster.sh status   what runs, where it logs; exit 0 only when all of it runs
#   scripts/e2e-cluster.sh scheduler-plain      kube-scheduler restarted with its defaults
#   scripts/e2e-cluster.sh host-gpushare-stop   gpushare's host processes stopped (Helm tests)
#   scripts/e2e-cluster.sh forget-images PREFIX  every node's containerd forgets the images whose
#                                               names start with PREFIX (a rebuilt image keeps
#                                               its tag, and IfNotPresent would run the old one)
#
# What runs: etcd, kube-apiserver (TLS, serving and advertising 127.0.0.1 only, so with
# --endpoint-reconciler-type=none: the `kubernetes` Service has no endpoints, and nothing needs
# them without kube-proxy; certificates and service-account keys made by openssl
# on first start), kube-controller-manager, kube-scheduler with the extender entry of
# deploy/kube-scheduler-config.yaml (gpushare-scheduler on 127.0.0.1:12345, started with the nodes when built; GPUSHARE_BIN),
# and one node per name in E2E_NODES (default: ts mig mem). A node is a mount namespace
# (unshare -m) that holds its own containerd (with Debian's runc) and its own kubelet: kubelet's
# device-plugin directory /var/lib/kubelet/device-plugins is fixed, so each node gets private
# bind mounts over /var/lib/kubelet, /var/lib/containerd, /run/containerd, /run/netns,
# /var/lib/cni and /var/log/{pods,containers}. Everything else (network, PIDs) is the host's.
#
# Needs root, cgroups (v1 or v2; kubelet's cgroupfs driver), the Debian packages of
# scripts/install-deps.sh and the binaries in build/e2e/bin (run scripts/e2e-build.sh first;
# `up` runs it when they are missing).
#
# Environment:
#   E2E_DIR    state, certificates and logs (default: <repo>/build/e2e/cluster)
#   E2E_BIN    the upstream binaries (default: <repo>/build/e2e/bin)
#   E2E_NODES  node names (default: "ts mig mem"; 1 to 9 names of at most 9 characters)
#   GPUSHARE_BIN  gpushare's binaries (default: <repo>/build/bin). When gpushare-node and
#              gpushare-scheduler are there, `up` also starts gpushare-scheduler on
#              127.0.0.1:12345 and one gpushare-node per node named ts, mig or mem (simulated
#              GPUs, e2e/gpushare/ and examples/); without them the cluster runs without gpushare.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${E2E_BIN:-$repo/build/e2e/bin}
dir=${E2E_DIR:-$repo/build/e2e/cluster}
kubeconfig_out="$repo/build/e2e/kubeconfig"
gpushare_bin=${GPUSHARE_BIN:-$repo/build/bin}
# The in-container library gpushare-node installs on node mem (--interposer-library).
gpushare_lib=${GPUSHARE_LIB:-$(dirname "$gpushare_bin")/lib/libgpushare-cuda.so}
read -r -a nodes <<<"${E2E_NODES:-ts mig mem}"
pki="$dir/pki"
logs="$dir/logs"
pids="$dir/pids"

etcd_client_port=22379
etcd_peer_port=22380
apiserver_port=6443
service_cidr=10.96.0.0/16
# The 'name=' prefix of every cgroup a node's kubelet makes (cgroupRoot); `down` removes them.
cgroup_prefix=gpushare-e2e-
# Node i (1-based) gets the address 10.255.0.i (kubelet's --node-ip may not be loopback; the
# address is added to `lo` as a /32, so it is local to this machine only), kubelet on
# 10.255.0.i:10250 (healthz :10248), and the pod subnet 10.244.i.0/24 on the bridge e2e-<name>.
node_ip() { echo "10.255.0.$1"; }

log() { echo "e2e-cluster: $*"; }
die() { echo "e2e-cluster: error: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# Processes: every process `up` starts has a pid file; a pid counts only while its
# /proc/<pid>/exe is still the binary we started (pids are reused).

pid_alive() { # name -> 0 when its recorded process runs
  local f="$pids/$1.pid" exe pid now
  [ -f "$f" ] || return 1
  read -r pid exe <"$f" || return 1
  [ -n "${pid:-}" ] && [ -d "/proc/$pid" ] || return 1
  now=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  # A binary rebuilt while it runs shows as "<path> (deleted)"; it is still ours.
  [ "$now" = "$exe" ] || [ "$now" = "$exe (deleted)" ]
}

pid_of() { local pid _; read -r pid _ <"$pids/$1.pid"; echo "$pid"; }

# start_bg name log-file exe command...: runs the command in the background in its own session,
# stdin closed, output to the log file, and records its pid once the process has become `exe`
# (the command may be a wrapper such as nsenter or unshare that execs it; recording the
# wrapper's exe would make the pid look dead, and a second `up` start a second copy).
start_bg() {
  local name=$1 logf=$2 exe
  exe=$(readlink -f "$3")
  shift 3
  setsid "$@" </dev/null >>"$logf" 2>&1 &
  local pid=$! now=""
  for _ in $(seq 200); do
    now=$(readlink "/proc/$pid/exe" 2>/dev/null) || now=""
    [ "$now" = "$exe" ] && break
    # Gone, or a zombie (no exe link any more): it has exited.
    [ -d "/proc/$pid" ] && [ -n "$now" ] || break
    sleep 0.05
  done
  if [ "$now" != "$exe" ]; then
    tail -5 "$logf" >&2 || true
    if [ -n "$now" ]; then die "$name (pid $pid) is still $now after 10 s, not $exe"; fi
    die "$name exited at once; see $logf"
  fi
  echo "$pid $exe" >"$pids/$name.pid"
}

stop_pid() { # name [grace-seconds]: TERM, wait, KILL
  local name=$1 grace=${2:-10} pid
  pid_alive "$name" || { rm -f "$pids/$name.pid"; return 0; }
  pid=$(pid_of "$name")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq $((grace * 10))); do
    [ -d "/proc/$pid" ] || break
    sleep 0.1
  done
  if [ -d "/proc/$pid" ]; then
    log "$name (pid $pid) ignored SIGTERM for ${grace}s; killing"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
  fi
  rm -f "$pids/$name.pid"
}

wait_for() { # description timeout-seconds command...
  local what=$1 timeout=$2
  shift 2
  local deadline=$(($(date +%s) + timeout))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "$what not ready after ${timeout}s"
    fi
    sleep 0.5
  done
}

# wait_up name timeout command...: like wait_for, but gives up at once when the process `name`
# has exited, and shows the end of its log.
wait_up() {
  local name=$1 timeout=$2
  shift 2
  local deadline=$(($(date +%s) + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! pid_alive "$name"; then
      tail -5 "$logs/$name.log" >&2 || true
      die "$name exited; see $logs/$name.log"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || die "$name not ready after ${timeout}s; see $logs/$name.log"
    sleep 0.5
  done
}

# ---------------------------------------------------------------------------------------------
# Certificates (openssl, ECDSA P-256), made once per cluster directory.

make_cert() { # name subject san-ext-or-empty usage(server|client)
  local name=$1 subj=$2 san=$3 usage=$4 ext
  [ -f "$pki/$name.crt" ] && return 0
  ext="$pki/$name.ext"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ "$usage" = server ]; then echo "extendedKeyUsage=serverAuth"; else echo "extendedKeyUsage=clientAuth"; fi
    [ -n "$san" ] && echo "subjectAltName=$san"
  } >"$ext"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$name.key" 2>/dev/null
  openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$ext"
}

make_pki() {
  mkdir -p "$pki"
  chmod 700 "$pki"
  if [ ! -f "$pki/ca.crt" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=gpushare-e2e-ca" -days 3650 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -out "$pki/ca.crt" 2>/dev/null
  fi
  make_cert apiserver "/CN=kube-apiserver" \
    "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" server
  make_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "" client
  make_cert admin "/O=system:masters/CN=kubernetes-admin" "" client
  make_cert controller-manager "/CN=system:kube-controller-manager" "" client
  make_cert scheduler "/CN=system:kube-scheduler" "" client
  local n
  for n in "${nodes[@]}"; do
    make_cert "node-$n" "/O=system:nodes/CN=system:node:$n" "" client
  done
  if [ ! -f "$pki/sa.key" ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
    openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  fi
}

write_kubeconfig() { # file user-cert-name
  local f=$1 c=$2
  cat >"$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpushare-e2e
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority: $pki/ca.crt
users:
- name: $c
  user:
    client-certificate: $pki/$c.crt
    client-key: $pki/$c.key
contexts:
- name: gpushare-e2e
  context:
    cluster: gpushare-e2e
    user: $c
current-context: gpushare-e2e
EOF
}

# ---------------------------------------------------------------------------------------------
# Images: nothing is pulled. The sandbox image (a static pause built here) and a busybox image
# (Debian's busybox-static) are made once and imported into every node's containerd.

pause_image=registry.k8s.io/pause:3.10
busybox_image=e2e.local/busybox:1.35
# The seed manifests' images (../shared/examples/seed-manifests/), as registry host and name:
# one stand-in (e2e/images/standin.sh on busybox) under each, served by the local registry that
# every node's containerd uses as the mirror of those hosts (vllm/vllm:latest is always pulled).
registry_addr=127.0.0.1:5000
seed_images=(
  "docker.io vllm/vllm:latest"
  "registry.cn-hangzhou.aliyuncs.com knative-sample/helloworld-go:73fbdd56"
  "registry-vpc.cn-hangzhou.aliyuncs.com hz-suoxing-test/test:helloworld-go"
)

make_images() {
  local img="$dir/images"
  mkdir -p "$img"
  if [ ! -f "$img/pause.tar" ] || [ "$repo/e2e/images/pause.c" -nt "$img/pause.tar" ]; then
    cc -O2 -static -o "$img/pause" "$repo/e2e/images/pause.c"
    strip "$img/pause"
    python3 "$repo/e2e/images/mkimage.py" --out "$img/pause.tar" --name "$pause_image" \
      --entrypoint /pause --file "$img/pause:/pause"
  fi
  if [ ! -f "$img/busybox.tar" ] || [ /bin/busybox -nt "$img/busybox.tar" ]; then
    local links=() a
    for a in $(/bin/busybox --list); do
      [ "$a" = busybox ] || links+=(--link "/bin/busybox:/bin/$a")
    done
    python3 "$repo/e2e/images/mkimage.py" --out "$img/busybox.tar" --name "$busybox_image" \
      --file /bin/busybox:/bin/busybox "${links[@]}" --dir /tmp --dir /etc --dir /proc \
      --dir /sys --dir /dev --env PATH=/bin --cmd /bin/sh
  fi
  if [ ! -f "$img/standin.tar" ] || [ /bin/busybox -nt "$img/standin.tar" ] ||
     [ "$repo/e2e/images/standin.sh" -nt "$img/standin.tar" ]; then
    local links=() a
    for a in $(/bin/busybox --list); do
      [ "$a" = busybox ] || links+=(--link "/bin/busybox:/bin/$a")
    done
    python3 "$repo/e2e/images/mkimage.py" --out "$img/standin.tar" --name e2e.local/standin:1 \
      --file /bin/busybox:/bin/busybox "${links[@]}" --file "$repo/e2e/images/standin.sh:/standin.sh" \
      --dir /tmp --dir /etc --dir /proc --dir /sys --dir /dev --env PATH=/bin --entrypoint /standin.sh
  fi
}

# The local registry (Debian's docker-registry) on $registry_addr, holding the stand-in under
# every seed image name; data in $dir/registry.
start_registry() {
  command -v docker-registry >/dev/null || { log "docker-registry not installed (scripts/install-deps.sh); no seed images"; return 0; }
  local r="$dir/registry"
  mkdir -p "$r/data"
  printf '%s\n' 'version: 0.1' 'log: {level: warn}' 'storage:' "  filesystem: {rootdirectory: $r/data}" \
    '  delete: {enabled: true}' 'http:' "  addr: $registry_addr" >"$r/config.yml"
  if ! pid_alive registry; then
    start_bg registry "$logs/registry.log" "$(command -v docker-registry)" docker-registry serve "$r/config.yml"
    wait_up registry 30 curl -sf "http://$registry_addr/v2/"
  fi
  local e as=()
  for e in "${seed_images[@]}"; do as+=(--as "${e#* }"); done
  python3 "$repo/e2e/images/push.py" --archive "$dir/images/standin.tar" --registry "$registry_addr" "${as[@]}" >/dev/null ||
    die "pushing the stand-in images to $registry_addr failed"
}

# mirror_hosts node-dir: containerd's hosts.toml for each image host the cluster pulls from:
# the local registry, never the host itself (as an air-gapped cluster's mirror). The hosts:
# the seed images', registry.k8s.io and nvcr.io (the Helm tests' kube-scheduler and CUDA base
# image), and the registry's own address (plain HTTP).
mirror_hosts() {
  local nd=$1 e h hosts=(registry.k8s.io nvcr.io "$registry_addr")
  for e in "${seed_images[@]}"; do hosts+=("${e%% *}"); done
  for h in "${hosts[@]}"; do
    mkdir -p "$nd/certs.d/$h"
    printf '%s\n' "server = \"http://$registry_addr\"" "[host.\"http://$registry_addr\"]" \
      '  capabilities = ["pull", "resolve"]' >"$nd/certs.d/$h/hosts.toml"
  done
}

# ---------------------------------------------------------------------------------------------
# Control plane.

# Pods reach the API server the way in-cluster clients do, at the `kubernetes` Service's
# ClusterIP 10.96.0.1:443 (in the serving certificate). There is no kube-proxy: one DNAT rule in
# the chain GPUSHARE-E2E sends pod traffic for that address to the API server (which listens
# on every local address, and authenticates every caller) at node 1's address.
api_dnat() {
  command -v iptables >/dev/null || die "iptables not found; run scripts/install-deps.sh"
  iptables -t nat -N GPUSHARE-E2E 2>/dev/null || true
  iptables -t nat -F GPUSHARE-E2E
  iptables -t nat -A GPUSHARE-E2E -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp --dport 443 \
    -j DNAT --to-destination "$(node_ip 1):$apiserver_port"
  iptables -t nat -C PREROUTING -j GPUSHARE-E2E 2>/dev/null || iptables -t nat -I PREROUTING -j GPUSHARE-E2E
}
api_dnat_remove() {
  command -v iptables >/dev/null || return 0
  iptables -t nat -D PREROUTING -j GPUSHARE-E2E 2>/dev/null || true
  iptables -t nat -F GPUSHARE-E2E 2>/dev/null || true
  iptables -t nat -X GPUSHARE-E2E 2>/dev/null || true
}

start_etcd() {
  pid_alive etcd && return 0
  mkdir -p "$dir/etcd"
  chmod 700 "$dir/etcd"
  start_bg etcd "$logs/etcd.log" "$bin/etcd" "$bin/etcd" --name e2e --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_client_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_client_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "e2e=http://127.0.0.1:$etcd_peer_port" \
    --listen-metrics-urls "" --log-level warn --quota-backend-bytes 4294967296
  wait_up etcd 60 curl -sf "http://127.0.0.1:$etcd_client_port/health"
}

start_apiserver() {
  pid_alive kube-apiserver && return 0
  start_bg kube-apiserver "$logs/kube-apiserver.log" "$bin/kube-apiserver" "$bin/kube-apiserver" \
    --bind-address 0.0.0.0 --advertise-address 127.0.0.1 --secure-port "$apiserver_port" \
    --enable-aggregator-routing=true \
    --etcd-servers "http://127.0.0.1:$etcd_client_port" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --requestheader-client-ca-file "$pki/ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$service_cidr" \
    --endpoint-reconciler-type none \
    --authorization-mode Node,RBAC --allow-privileged=true --profiling=false --v=1
  wait_up kube-apiserver 120 "$bin/kubectl" --kubeconfig "$kubeconfig_out" get --raw /readyz
}

# Its API client at QPS 100 (default 20), as large clusters run it: the scale harness's thousands
# of nodes each need the node lifecycle controller's writes (the not-ready taint lifted).
start_controller_manager() {
  pid_alive kube-controller-manager && return 0
  start_bg kube-controller-manager "$logs/kube-controller-manager.log" "$bin/kube-controller-manager" \
    "$bin/kube-controller-manager" \
    --kubeconfig "$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --use-service-account-credentials=true --service-cluster-ip-range "$service_cidr" \
    --kube-api-qps 100 --kube-api-burst 200 \
    --profiling=false --v=1
}

# The project's scheduler configuration, unchanged but for the kubeconfig path and leader
# election (one scheduler).
scheduler_config() {
  local src="$repo/deploy/kube-scheduler-config.yaml"
  grep -q '^  kubeconfig: /etc/kubernetes/scheduler.conf$' "$src" ||
    die "$src: no 'clientConnection.kubeconfig: /etc/kubernetes/scheduler.conf' line to point at this cluster"
  sed "s#^  kubeconfig: /etc/kubernetes/scheduler.conf\$#  kubeconfig: $dir/scheduler.kubeconfig#" "$src"
  printf 'leaderElection:\n  leaderElect: false\n'
}

start_scheduler() {
  pid_alive kube-scheduler && return 0
  scheduler_config >"$dir/kube-scheduler-config.yaml"
  run_scheduler_with_config
}

# kube-scheduler with $dir/kube-scheduler-config.yaml as written (also by scripts/e2e-scale.sh).
run_scheduler_with_config() {
  start_bg kube-scheduler "$logs/kube-scheduler.log" "$bin/kube-scheduler" "$bin/kube-scheduler" \
    --config "$dir/kube-scheduler-config.yaml" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --profiling=false --v=1
}

# For the Helm tests (scripts/e2e-helm.sh): the cluster's kube-scheduler with no configuration
# file at all (its defaults, as on a managed cluster), gpushare's own scheduler Deployment then
# places memory shares.
cmd_scheduler_plain() {
  stop_pid kube-scheduler 20
  start_bg kube-scheduler "$logs/kube-scheduler.log" "$bin/kube-scheduler" "$bin/kube-scheduler" \
    --kubeconfig "$dir/scheduler.kubeconfig" --leader-elect=false \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --profiling=false --v=1
  log "kube-scheduler restarted with its defaults (no extender)"
}

# gpushare's host processes stopped (gpushare-node first removes its sockets), for the Helm
# tests to install gpushare as pods instead.
cmd_host_gpushare_stop() {
  local n
  for n in "${nodes[@]}"; do stop_pid "gpushare-node-$n" 10; done
  stop_pid gpushare-scheduler 10
  log "gpushare host processes stopped"
}

cmd_forget_images() {
  local prefix=${1:?forget-images: which image name prefix?} n ref count
  for n in "${nodes[@]}"; do
    pid_alive "node-$n" || continue
    count=0
    while read -r ref; do
      [ -n "$ref" ] || continue
      node_ctr "$n" -n k8s.io images rm "$ref" >/dev/null && count=$((count + 1))
    done < <(node_ctr "$n" -n k8s.io images ls -q | awk -v p="$prefix" 'index($0, p) == 1')
    log "node $n: forgot $count image(s) named $prefix*"
  done
}

# ---------------------------------------------------------------------------------------------
# Nodes.

node_dir() { echo "$dir/nodes/$1"; }

# Per-node directories bind-mounted over the fixed paths inside the node's mount namespace.
node_mounts=(
  var-lib-kubelet:/var/lib/kubelet
  var-lib-containerd:/var/lib/containerd
  run-containerd:/run/containerd
  run-netns:/run/netns
  var-lib-cni:/var/lib/cni
  var-log-pods:/var/log/pods
  var-log-containers:/var/log/containers
  var-lib-gpushare:/var/lib/gpushare
)

write_node_config() { # name index
  local n=$1 i=$2 nd hard soft
  nd=$(node_dir "$n")
  mkdir -p "$nd/cni" "$nd/certs.d"
  mirror_hosts "$nd"
  local m
  for m in "${node_mounts[@]}"; do mkdir -p "$nd/${m%%:*}"; done

  # runc applies the OCI spec's rlimits with setrlimit(2); this machine's hard limit for open
  # files (ulimit -Hn) is below containerd's usual value and CAP_SYS_RESOURCE may be missing, so
  # the base spec asks for at most the hard limit we have.
  hard=$(ulimit -Hn)
  [ "$hard" = unlimited ] && hard=1048576
  soft=$(ulimit -Sn)
  [ "$soft" = unlimited ] && soft=$hard
  [ "$soft" -gt "$hard" ] && soft=$hard
  ctr oci spec | python3 -c '
import json, sys
spec = json.load(sys.stdin)
spec["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "hard": int(sys.argv[1]), "soft": int(sys.argv[2])}]
json.dump(spec, sys.stdout, indent=2)
' "$hard" "$soft" >"$nd/base-runtime-spec.json"

  cat >"$nd/containerd.toml" <<EOF
# containerd for e2e node $n (scripts/e2e-cluster.sh); paths are inside the node's mount namespace.
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # CRI gives the sandbox an oom_score_adj of -998; lowering a process's oom_score_adj needs
  # CAP_SYS_RESOURCE, which this machine withholds (runc then fails with "can't get final
  # child's PID from pipe: EOF"). Keep every container at or above containerd's own value.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      base_runtime_spec = "$nd/base-runtime-spec.json"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
  [plugins."io.containerd.grpc.v1.cri".registry]
    # Registry hosts (mirrors) per registry, one directory each: $nd/certs.d/<host>/hosts.toml.
    config_path = "$nd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni"
    max_conf_num = 1
EOF

  cat >"$nd/cni/10-e2e-$n.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "e2e-$n",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "e2e-$n",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "10.244.$i.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF

  local ip
  ip=$(node_ip "$i")
  cat >"$nd/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
healthzBindAddress: $ip
healthzPort: 10248
readOnlyPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $pki/ca.crt
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# This machine has no systemd and (maybe) cgroup v1: cgroupfs, and v1 allowed.
cgroupDriver: cgroupfs
failCgroupV1: false
# Several kubelets on one host: each keeps its pods' cgroups under its own root.
cgroupRoot: /$cgroup_prefix$n
failSwapOn: false
clusterDomain: cluster.local
maxPods: 250
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
EOF
  write_kubeconfig "$nd/kubelet.kubeconfig" "node-$n"
}

node_holder_running() { pid_alive "node-$1"; }

# ctr against a node's containerd, run inside the node's namespace: the socket path there is
# short (/run/containerd/containerd.sock; the host-side path under a deep checkout could pass
# the 108-byte limit of a unix socket address), and image unpacking sees the node's mounts.
node_ctr() {
  local n=$1
  shift
  nsenter -t "$(pid_of "node-$n")" -m -- ctr "$@"
}

# kubelet wants its cgroupRoot to exist in every hierarchy. With cgroup v1 a new cpuset cgroup
# starts with no CPUs and no memory nodes, so it inherits its parent's.
make_cgroup_root() {
  local n=$1 h cg
  if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
    mkdir -p "/sys/fs/cgroup/$cgroup_prefix$n"
    return 0
  fi
  for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [ "$(basename "$h")" = unified ] && continue
    [ -f "$h/cgroup.procs" ] || continue
    cg="$h/$cgroup_prefix$n"
    mkdir -p "$cg"
    if [ -f "$cg/cpuset.cpus" ] && [ -z "$(cat "$cg/cpuset.cpus")" ]; then
      cat "$h/cpuset.cpus" >"$cg/cpuset.cpus"
      cat "$h/cpuset.mems" >"$cg/cpuset.mems"
    fi
  done
}

start_node() { # name index
  local n=$1 i=$2 nd holder
  nd=$(node_dir "$n")
  write_node_config "$n" "$i"
  mkdir -p /var/lib/kubelet /var/lib/containerd /run/containerd /run/netns /var/lib/cni \
    /var/log/pods /var/log/containers

  if ! node_holder_running "$n"; then
    # The namespace's first process: makes the private bind mounts, then just holds the
    # namespace open until `down` kills it (the mounts go with it).
    local script="set -e"
    local m
    for m in "${node_mounts[@]}"; do
      script+="; mkdir -p '${m#*:}'; mount --bind '$nd/${m%%:*}' '${m#*:}'"
    done
    script+="; mount --make-rshared /; exec sleep infinity"
    start_bg "node-$n" "$logs/node-$n.log" "$(command -v sleep)" unshare --mount --propagation private -- sh -c "$script"
  fi
  holder=$(pid_of "node-$n")
  wait_for "mount namespace of node $n" 10 sh -c "grep -q ' /var/lib/kubelet ' /proc/$holder/mountinfo"

  if ! pid_alive "containerd-$n"; then
    start_bg "containerd-$n" "$logs/containerd-$n.log" "$(command -v containerd)" \
      nsenter -t "$holder" -m -- containerd --config "$nd/containerd.toml"
    wait_up "containerd-$n" 60 node_ctr "$n" version
  fi
  local img
  for img in pause busybox; do
    node_ctr "$n" -n k8s.io images import "$dir/images/$img.tar" >/dev/null ||
      die "importing $dir/images/$img.tar into node $n's containerd failed"
  done

  local ip
  ip=$(node_ip "$i")
  # (Not `ip ... | grep -q`: with pipefail, grep's early exit can fail the pipeline.)
  [[ "$(ip -4 -o addr show dev lo)" == *" $ip/32 "* ]] || ip addr add "$ip/32" dev lo label lo:e2e
  if ! pid_alive "kubelet-$n"; then
    make_cgroup_root "$n"
    start_bg "kubelet-$n" "$logs/kubelet-$n.log" "$bin/kubelet" \
      nsenter -t "$holder" -m -- "$bin/kubelet" --config "$nd/kubelet-config.yaml" \
      --kubeconfig "$nd/kubelet.kubeconfig" --hostname-override "$n" --node-ip "$ip" \
      --node-labels "gpushare.e2e/node=$n" --v=1
  fi
}

# Ready, as reported by the kubelet running now: a node object kept in etcd from an earlier run
# still says Ready=True until the node controller notices, so the heartbeat must be no older
# than this kubelet.
node_ready_now() {
  local n=$1 started got status beat
  started=$(date -u -d "@$(stat -c %Y "$pids/kubelet-$n.pid")" +%Y-%m-%dT%H:%M:%SZ)
  got=$("$bin/kubectl" --kubeconfig "$kubeconfig_out" get node "$n" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}') || return 1
  read -r status beat <<<"$got"
  [ "$status" = True ] && [[ ! "$beat" < "$started" ]]
}

# Everything left of a node once its kubelet is gone: the pods' processes (kubelet's cgroups),
# containerd's shims and containerd itself (the processes in the node's mount namespace), then
# the namespace's holder, the cgroups and the bridge.
stop_node() {
  local n=$1 holder="" ns="" p
  # gpushare-node first: on SIGTERM it removes its sockets from the node's device-plugin dir.
  stop_pid "gpushare-node-$n" 10
  stop_pid "kubelet-$n" 20
  if pid_alive "node-$n"; then
    holder=$(pid_of "node-$n")
    ns=$(readlink "/proc/$holder/ns/mnt")
  fi
  # Pods' processes: every process in the node's cgroups (any v1 hierarchy, or v2).
  local cg
  for cg in /sys/fs/cgroup/pids/$cgroup_prefix$n /sys/fs/cgroup/$cgroup_prefix$n; do
    [ -d "$cg" ] || continue
    for p in $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null); do
      kill -KILL "$p" 2>/dev/null || true
    done
  done
  stop_pid "containerd-$n" 20
  if [ -n "$ns" ]; then
    # containerd's shims outlive containerd; they are the remaining processes of the namespace.
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      [ "$p" = "$holder" ] && continue
      [ "$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" = "$ns" ] && kill -KILL "$p" 2>/dev/null || true
    done
  fi
  stop_pid "node-$n" 5
  # Empty cgroups, deepest first.
  for cg in /sys/fs/cgroup/*/$cgroup_prefix$n /sys/fs/cgroup/$cgroup_prefix$n; do
    [ -d "$cg" ] || continue
    for _ in 1 2 3 4 5; do
      find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$cg" ] || break
      sleep 0.5
    done
    [ -d "$cg" ] && log "warning: could not remove cgroup $cg"
  done
  ip link del "e2e-$n" 2>/dev/null || true
}

# The node addresses `up` added to lo.
remove_node_ips() {
  local a
  for a in $(ip -4 -o addr show dev lo label lo:e2e | awk '{print $4}'); do
    ip addr del "$a" dev lo 2>/dev/null || true
  done
}

# ---------------------------------------------------------------------------------------------
# gpushare as host processes (issue 11, section 3): gpushare-scheduler beside kube-scheduler,
# and one gpushare-node per node inside the node's mount namespace, so that it sees that
# node's kubelet sockets at their usual paths.

have_gpushare() { [ -x "$gpushare_bin/gpushare-node" ] && [ -x "$gpushare_bin/gpushare-scheduler" ]; }

# gpushare_node_args name: the simulated GPUs and sharing config of a node, or nothing for a
# node without GPUs.
gpushare_node_args() {
  case $1 in
    ts) echo "--inventory $repo/examples/inventory/8x-a10.yaml --config $repo/examples/config/8x-a10.yaml" ;;
    mig) echo "--inventory $repo/e2e/gpushare/mig-inventory.yaml --config $repo/e2e/gpushare/mig-config.yaml" ;;
    mem)
      echo "--inventory $repo/examples/inventory/8x-a10.yaml --config $repo/e2e/gpushare/mem-config.yaml"
      # With the library built: installed into the node's own host directory at a versioned
      # path and mounted, with a per-container state directory, into every limited container.
      if [ -f "$gpushare_lib" ]; then
        echo "--interposer-library $gpushare_lib" \
          "--interposer-host-dir $(node_dir mem)/gpushare/lib --state-dir $(node_dir mem)/gpushare/containers"
      fi
      ;;
  esac
}

start_gpushare_scheduler() {
  pid_alive gpushare-scheduler && return 0
  start_bg gpushare-scheduler "$logs/gpushare-scheduler.log" "$gpushare_bin/gpushare-scheduler" \
    "$gpushare_bin/gpushare-scheduler" --listen 127.0.0.1:12345 --kubeconfig "$kubeconfig_out"
  wait_up gpushare-scheduler 30 curl -sf -m 2 http://127.0.0.1:12345/healthz
}

start_gpushare_node() {
  local n=$1 args holder
  args=$(gpushare_node_args "$n")
  [ -n "$args" ] || return 0
  pid_alive "gpushare-node-$n" && return 0
  holder=$(pid_of "node-$n")
  # shellcheck disable=SC2086 # $args is a list of flags
  start_bg "gpushare-node-$n" "$logs/gpushare-node-$n.log" "$gpushare_bin/gpushare-node" \
    nsenter -t "$holder" -m -- "$gpushare_bin/gpushare-node" $args --node-name "$n" \
    --kubeconfig "$kubeconfig_out" --metrics-listen "127.0.0.1:$(node_metrics_port "$n")" --metrics-auth none
}

# node_metrics_port name: the host agent's /metrics port (the agents share the host's network,
# so each has its own, on loopback: 9445 for the first node of E2E_NODES, 9446 for the next...).
node_metrics_port() {
  local i
  for i in "${!nodes[@]}"; do
    [ "${nodes[$i]}" = "$1" ] && { echo $((9445 + i)); return; }
  done
  die "node_metrics_port: $1 is not one of ${nodes[*]}"
}

# ---------------------------------------------------------------------------------------------

check_host() {
  [ "$(id -u)" -eq 0 ] || die "must run as root (kubelet, containerd and mount namespaces need it)"
  local t
  for t in containerd runc ctr unshare nsenter openssl curl ip python3 cc; do
    command -v "$t" >/dev/null || die "$t not found; run scripts/install-deps.sh"
  done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] ||
    die "CNI plugins missing in /usr/lib/cni; run scripts/install-deps.sh"
  local b
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
    if [ ! -x "$bin/$b" ]; then
      log "$bin/$b missing; building (scripts/e2e-build.sh)"
      "$repo/scripts/e2e-build.sh"
      break
    fi
  done
}

print_where() {
  echo "kubeconfig: $kubeconfig_out   (export KUBECONFIG=$kubeconfig_out; $bin/kubectl get nodes)"
  echo "logs:       $logs/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,gpushare-scheduler}.log"
  local n
  for n in "${nodes[@]}"; do
    echo "node $n: logs $logs/kubelet-$n.log $logs/containerd-$n.log$([ -n "$(gpushare_node_args "$n")" ] && echo " $logs/gpushare-node-$n.log")"
    echo "  its mount namespace: nsenter -t \$(cut -d' ' -f1 $pids/node-$n.pid) -m  (kubelet and containerd at their usual paths; host side: $(node_dir "$n"))"
  done
}

cmd_up() {
  check_host
  mkdir -p "$logs" "$pids" "$dir/nodes"
  make_pki
  write_kubeconfig "$kubeconfig_out" admin
  write_kubeconfig "$dir/controller-manager.kubeconfig" controller-manager
  write_kubeconfig "$dir/scheduler.kubeconfig" scheduler
  make_images
  # Pods on different nodes reach each other through the host's routes between the bridges.
  sysctl -qw net.ipv4.ip_forward=1 || true
  api_dnat

  start_registry
  start_etcd
  start_apiserver
  start_controller_manager
  start_scheduler
  local i=1 n
  for n in "${nodes[@]}"; do
    start_node "$n" "$i"
    i=$((i + 1))
  done
  if have_gpushare; then
    start_gpushare_scheduler
    for n in "${nodes[@]}"; do start_gpushare_node "$n"; done
  else
    log "no gpushare binaries in $gpushare_bin (ninja -C build gpushare-node gpushare-scheduler); the cluster runs without gpushare"
  fi
  for n in "${nodes[@]}"; do
    wait_up "kubelet-$n" 180 node_ready_now "$n"
  done
  log "up: ${#nodes[@]} nodes Ready"
  print_where
}

# The schedulers and the controller manager in parallel, then the API server and etcd (also the
# scale harness's `down`, scripts/e2e-scale.sh).
stop_control_plane() {
  stop_pid kube-scheduler &
  stop_pid gpushare-scheduler &
  stop_pid kube-controller-manager &
  wait
  stop_pid kube-apiserver 20
  stop_pid etcd 20
}

cmd_down() {
  mkdir -p "$pids"
  # The nodes in parallel (each takes a few seconds to shut down), including nodes of an
  # earlier E2E_NODES that are still recorded.
  local n f all=("${nodes[@]}")
  for f in "$pids"/node-*.pid; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .pid)
    all+=("${n#node-}")
  done
  for n in $(printf '%s\n' "${all[@]}" | sort -u); do stop_node "$n" & done
  wait
  stop_control_plane
  stop_pid registry 10
  api_dnat_remove
  remove_node_ips
  local left
  left=$(grep -c " $dir/nodes/" /proc/self/mountinfo || true)
  [ "$left" -eq 0 ] || log "warning: $left mounts of $dir/nodes still present"
  log "down"
}

cmd_status() {
  local ok=0 name
  local extra=()
  command -v docker-registry >/dev/null && extra=(registry)
  for name in "${extra[@]}" etcd kube-apiserver kube-controller-manager kube-scheduler; do
    if pid_alive "$name"; then echo "$name: running (pid $(pid_of "$name"))"; else echo "$name: stopped"; ok=1; fi
  done
  local n
  for n in "${nodes[@]}"; do
    for name in "node-$n" "containerd-$n" "kubelet-$n"; do
      if pid_alive "$name"; then echo "$name: running (pid $(pid_of "$name"))"; else echo "$name: stopped"; ok=1; fi
    done
    if have_gpushare && [ -n "$(gpushare_node_args "$n")" ]; then
      name=gpushare-node-$n
      if pid_alive "$name"; then echo "$name: running (pid $(pid_of "$name"))"; else echo "$name: stopped"; ok=1; fi
    fi
  done
  if have_gpushare; then
    if pid_alive gpushare-scheduler; then echo "gpushare-scheduler: running (pid $(pid_of gpushare-scheduler))"; else echo "gpushare-scheduler: stopped"; ok=1; fi
  fi
  if [ $ok -eq 0 ]; then
    "$bin/kubectl" --kubeconfig "$kubeconfig_out" get nodes -o wide || ok=1
  fi
  print_where
  return $ok
}

# Sourcing the file (for tests) defines the functions only.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  scheduler-plain) cmd_scheduler_plain ;;
  host-gpushare-stop) cmd_host_gpushare_stop ;;
  forget-images) cmd_forget_images "${2:-}" ;;
  *) echo "usage: $0 up|down|status|scheduler-plain|host-gpushare-stop|forget-images PREFIX" >&2; exit 2 ;;
esac
