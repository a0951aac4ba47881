#!/bin/sh
# /probe.sh: the entrypoint of the e2e CUDA probe image (gpushare-e2e/cuda-probe, docs/e2e.md).
# It drives the CUDA driver double (tests/fakes/native/cuda) through cuda-probe-dlopen the way a
# CUDA program reaches the driver, with whatever the container was given by gpushare-node
# (/etc/ld.so.preload naming libgpushare-cuda.so, /etc/gpushare/config, CUDA_DEVICE_MEMORY_LIMIT_*):
#   1. prints the GPU environment and the preload and interposer config files;
#   2. cuInit, retains device 0's primary context, prints cuMemGetInfo (total, free);
#   3. allocates PROBE_STEP_MIB (256) at a time until an allocation fails or PROBE_CAP_MIB
#      (8192) is allocated, printing each result, then cuMemGetInfo again;
#   4. prints one summary line for the test:
#        probe: total_mib=<T> free_mib=<F> allocated_mib=<A> free_after_mib=<R> step_mib=<S> next=<N>
#      T and F are cuMemGetInfo's total and free before the first allocation, A what the
#      successful allocations add up to, R cuMemGetInfo's free after the last one, N the CUresult
#      name of the allocation that failed (CUDA_ERROR_OUT_OF_MEMORY) or CAP_REACHED;
#      a probe that cannot get that far prints `probe: error step=<what> result=<CUresult name>`;
#   5. sleeps until stopped (SIGTERM ends it at once), so the pod stays Running; with
#      PROBE_HOLD=1 the probe process stays too, holding its allocations.
# `/probe.sh once` (or PROBE_ONCE=1) skips 5. and exits 0 with a summary line, 1 without.
#
# The double's device: FAKE_CUDA_CONFIG when set, else the image's /etc/fake-cuda/config (one
# device, 80 GiB) with the device's UUID set to the first UUID in NVIDIA_VISIBLE_DEVICES, as a
# real driver in a container that was given that GPU would report it (the config gpushare-node
# writes names its devices by UUID, and the interposer applies a limit only to a GPU it matches).
# POSIX sh: runs under dash (Debian's /bin/sh) and busybox ash.
set -u
probe=${PROBE_BIN:-/usr/local/bin/cuda-probe-dlopen}
step_mib=${PROBE_STEP_MIB:-256}
cap_mib=${PROBE_CAP_MIB:-8192}
timeout_s=${PROBE_TIMEOUT_S:-60}
once=${PROBE_ONCE:-0}
[ "${1:-}" = once ] && once=1
# PROBE_HOLD=1: after the summary the probe process stays, holding what it allocated, until the
# pod stops (the node's /metrics then shows the container's use); it is then never timed out.
hold=${PROBE_HOLD:-0}
[ "$once" = 1 ] && hold=0
[ "$hold" = 1 ] && timeout_s=${PROBE_TIMEOUT_S:-0}
trap '' PIPE

cu_name() {
  case $1 in
    0) echo CUDA_SUCCESS ;;
    1) echo CUDA_ERROR_INVALID_VALUE ;;
    2) echo CUDA_ERROR_OUT_OF_MEMORY ;;
    3) echo CUDA_ERROR_NOT_INITIALIZED ;;
    4) echo CUDA_ERROR_DEINITIALIZED ;;
    100) echo CUDA_ERROR_NO_DEVICE ;;
    101) echo CUDA_ERROR_INVALID_DEVICE ;;
    201) echo CUDA_ERROR_INVALID_CONTEXT ;;
    801) echo CUDA_ERROR_NOT_SUPPORTED ;;
    999) echo CUDA_ERROR_UNKNOWN ;;
    '') echo NO_ANSWER ;;
    *) echo "CUresult_$1" ;;
  esac
}

# --- 1. what the container was given
echo "probe: environment"
env | grep -E '^(CUDA_|NVIDIA_|LD_PRELOAD=|LD_LIBRARY_PATH=|GPUSHARE_|ALIYUN_COM_GPU|FAKE_CUDA_)' | sort | sed 's/^/probe:   /'
for f in /etc/ld.so.preload /etc/gpushare/config; do
  if [ -r "$f" ]; then
    echo "probe: $f:"
    sed 's/^/probe:   /' "$f"
  else
    echo "probe: $f: absent"
  fi
done

# --- the double's device
if [ -z "${FAKE_CUDA_CONFIG:-}" ]; then
  conf=${TMPDIR:-/tmp}/fake-cuda.$$.conf
  cat "${PROBE_BASE_CONFIG:-/etc/fake-cuda/config}" >"$conf" 2>/dev/null || : >"$conf"
  uuid=${NVIDIA_VISIBLE_DEVICES:-}
  uuid=${uuid%%,*}
  case $uuid in
    GPU-*|MIG-*) echo "device.0.uuid=$uuid" >>"$conf" ;;
  esac
  export FAKE_CUDA_CONFIG="$conf"
fi
echo "probe: driver double config $FAKE_CUDA_CONFIG:"
sed 's/^/probe:   /' "$FAKE_CUDA_CONFIG"

# --- 2. to 4. one probe process, one command at a time (allocations stay held until it exits)
work=$(mktemp -d "${TMPDIR:-/tmp}/probe.XXXXXX") || exit 1
mkfifo "$work/in" "$work/out" || exit 1
# The probe never runs longer than timeout_s: killed, its pipe ends and every read below returns.
timeout -s KILL "$timeout_s" "$probe" - <"$work/in" >"$work/out" &
pid=$!
exec 3>"$work/in" 4<"$work/out"

rc='' vals=''
# cmd <probe command>: sends it, sets rc (the CUresult number, empty when no answer) and vals.
cmd() {
  rc='' vals=''
  echo "$*" >&3 2>/dev/null || return 1
  IFS= read -r reply <&4 || return 1
  set -- $reply
  [ $# -ge 2 ] || return 0
  rc=$2
  shift 2
  vals=$*
}

summary=''
fail() {  # fail <step>
  summary="probe: error step=$1 result=$(cu_name "$rc")"
}
mib() { echo $(( $1 / 1048576 )); }

if ! cmd init || [ "$rc" != 0 ]; then
  fail cuInit
elif ! cmd ctx 0 || [ "$rc" != 0 ]; then
  fail cuDevicePrimaryCtxRetain
elif ! cmd meminfo || [ "$rc" != 0 ]; then
  fail cuMemGetInfo
else
  set -- $vals
  free_mib=$(mib "$1") total_mib=$(mib "$2")
  echo "probe: cuMemGetInfo total_mib=$total_mib free_mib=$free_mib"
  allocated=0 n=0 next=CAP_REACHED
  while [ $(( allocated + step_mib )) -le "$cap_mib" ]; do
    n=$(( n + 1 ))
    cmd alloc $(( step_mib * 1048576 ))
    name=$(cu_name "$rc")
    if [ "$rc" = 0 ]; then
      allocated=$(( allocated + step_mib ))
      echo "probe: alloc $n of $step_mib MiB: $name (allocated_mib=$allocated)"
    else
      echo "probe: alloc $n of $step_mib MiB: $name"
      next=$name
      break
    fi
  done
  [ "$next" = CAP_REACHED ] && echo "probe: cap of $cap_mib MiB reached"
  if cmd meminfo && [ "$rc" = 0 ]; then
    set -- $vals
    after_mib=$(mib "$1")
    echo "probe: cuMemGetInfo total_mib=$(mib "$2") free_mib=$after_mib"
    summary="probe: total_mib=$total_mib free_mib=$free_mib allocated_mib=$allocated free_after_mib=$after_mib step_mib=$step_mib next=$next"
  else
    fail cuMemGetInfo
  fi
fi
if [ "$hold" != 1 ]; then
  exec 3>&- 4<&-
  wait "$pid" 2>/dev/null
fi
rm -rf "$work"
[ -n "${conf:-}" ] && rm -f "$conf"
echo "$summary"

if [ "$once" = 1 ]; then
  case $summary in "probe: total_mib="*) exit 0 ;; *) exit 1 ;; esac
fi
# --- 5. stay Running until stopped: SIGTERM (kubelet stopping the pod) ends it at once.
sleeper=''
trap '[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null; [ "$hold" = 1 ] && kill "$pid" 2>/dev/null; exit 0' TERM INT
sleep infinity &
sleeper=$!
wait "$sleeper"
