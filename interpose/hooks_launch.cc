// Launch wrappers: kernels, cooperative kernels, graph launches. Without an SM limit each one is
// a load, a compare and a tail call into the driver. With one, launches pass the shared gate of
// sm_limiter.h and are bracketed by two CUDA events that measure their GPU time.
// Every launch also notes its time for gpushare-node's "seconds since the last kernel launch"
// (RegionDevice::last_launch_s): a thread reads the coarse clock and compares it with its own
// next-note deadline; at most once a second per thread it looks up the current device and stores
// the time (a relaxed store, no lock), so a launch-heavy process pays a clock read per launch.
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "interpose/base.h"
#include "interpose/log.h"
#include "interpose/runtime.h"

namespace gpushare::interpose {
namespace {

constexpr int64_t kToleranceNs = 20'000'000;               // burst the gate allows (wall time)
constexpr int64_t kMaxSleepNs = 50'000'000;                // re-check the gate at least this often
constexpr uint64_t kLaunchNoteIntervalNs = 1'000'000'000;  // per thread

thread_local uint64_t t_next_launch_note_ns = 0;

// Stores the time of this launch into the region device of the current context (see the top).
void NoteLaunchSlow(uint64_t now_ns) {
  t_next_launch_note_ns = now_ns + kLaunchNoteIntervalNs;
  RegionFile* file = TheRegion().file();
  if (file == nullptr) return;
  CUcontext ctx = nullptr;
  int ordinal = -1;
  if (!CurrentContext(&ctx, &ordinal)) return;
  const OrdinalInfo* o = Ordinal(ordinal);
  if (o == nullptr || o->dev < 0 || o->dev >= kMaxDevices) return;
  StoreRelaxed(&file->devices[o->dev].last_launch_s, now_ns / 1'000'000'000);
}

inline void NoteLaunch() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  uint64_t now =
      static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
  if (now >= t_next_launch_note_ns) NoteLaunchSlow(now);
}

void SleepNs(int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int64_t MeasuredNs(CUevent start, CUevent end) {
  using ElapsedFn = CUresult (*)(float*, CUevent, CUevent);
  ElapsedFn elapsed = Real<ElapsedFn>(kFn_cuEventElapsedTime_v2);
  if (elapsed == nullptr) elapsed = Real<ElapsedFn>(kFn_cuEventElapsedTime);
  float ms = 0;
  if (elapsed == nullptr || elapsed(&ms, start, end) != CUDA_SUCCESS) return -1;
  return static_cast<int64_t>(static_cast<double>(ms) * 1e6);
}

// Applies the measurements of completed launches, oldest first. With `block`, waits for the
// oldest one. Caller holds ls->lock.
void Drain(LimiterSlot* ls, SmBucket* bucket, const SmGateParams& params, bool block) {
  auto query = Real<CUresult (*)(CUevent)>(kFn_cuEventQuery);
  auto sync = GPUSHARE_REAL(cuEventSynchronize);
  while (ls->tracker.inflight() > 0) {
    int pos = ls->tracker.OldestPosition();
    CUevent start = ls->events[pos][0];
    CUevent end = ls->events[pos][1];
    if (ls->unmeasurable[pos] || query == nullptr) {
      ls->unmeasurable[pos] = false;
      SmGateCorrect(bucket, params, -ls->tracker.DropOldest());
      continue;
    }
    CUresult q = query(end);
    if (q == CUDA_ERROR_NOT_READY && block && sync != nullptr) q = sync(end);
    if (q == CUDA_ERROR_NOT_READY) return;
    int64_t ns = q == CUDA_SUCCESS ? MeasuredNs(start, end) : -1;
    if (ns < 0) {
      SmGateCorrect(bucket, params, -ls->tracker.DropOldest());
    } else {
      SmGateCorrect(bucket, params, ls->tracker.CompleteOldest(ns));
    }
    block = false;
  }
}

bool EnsureEvents(LimiterSlot* ls, int pos) {
  auto create = Real<CUresult (*)(CUevent*, unsigned int)>(kFn_cuEventCreate);
  if (create == nullptr) return false;
  for (int i = 0; i < 2; ++i) {
    if (ls->events[pos][i] == nullptr &&
        create(&ls->events[pos][i], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
      ls->events[pos][i] = nullptr;
      return false;
    }
  }
  return true;
}

template <typename Launch>
CUresult LimitedLaunch(CUstream stream, uint64_t key, bool per_thread, Launch launch) {
  CUcontext ctx = nullptr;
  int ordinal = -1;
  if (!CurrentContext(&ctx, &ordinal)) return launch();
  const OrdinalInfo* o = Ordinal(ordinal);
  if (o == nullptr || o->dev < 0 || o->sm_limit == 0) return launch();
  // Work captured into a graph does not run now: its graph launch is limited instead.
  auto capturing = Real<CUresult (*)(CUstream, int*)>(per_thread ? kFn_cuStreamIsCapturing_ptsz
                                                                 : kFn_cuStreamIsCapturing);
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (capturing != nullptr && capturing(stream, &status) == CUDA_SUCCESS &&
      status != CU_STREAM_CAPTURE_STATUS_NONE)
    return launch();
  SmBucket* bucket = SharedBucket(o->dev);
  LimiterSlot* ls = Limiter(o->dev);
  if (bucket == nullptr || ls == nullptr) return launch();
  SmGateParams params;
  params.limit_pct = o->sm_limit;
  params.tolerance_ns = kToleranceNs;

  pthread_mutex_lock(&ls->lock);
  Drain(ls, bucket, params, false);
  bool known = false;
  int64_t cost = ls->tracker.Estimate(key, &known);
  // A cost nobody has measured yet runs alone; a full ring waits for its oldest launch.
  while (ls->tracker.inflight() > 0 &&
         (!known || ls->tracker.full() || !ls->tracker.OldestKnown())) {
    Drain(ls, bucket, params, true);
    cost = ls->tracker.Estimate(key, &known);
  }
  pthread_mutex_unlock(&ls->lock);

  uint64_t waited = 0;
  for (;;) {
    int64_t wait = SmGateAdmit(bucket, params, static_cast<int64_t>(NowNs()), cost);
    if (wait == 0) break;
    int64_t s = wait < kMaxSleepNs ? wait : kMaxSleepNs;
    SleepNs(s);
    waited += static_cast<uint64_t>(s);
  }
  if (waited != 0) FetchAdd(&bucket->waited_ns, waited);

  pthread_mutex_lock(&ls->lock);
  while (ls->tracker.full()) Drain(ls, bucket, params, true);
  int pos = ls->tracker.Push(key, cost, known);
  auto record = Real<CUresult (*)(CUevent, CUstream)>(per_thread ? kFn_cuEventRecord_ptsz
                                                                 : kFn_cuEventRecord);
  bool ok = record != nullptr && EnsureEvents(ls, pos) &&
            record(ls->events[pos][0], stream) == CUDA_SUCCESS;
  CUresult r = launch();
  ok = ok && record(ls->events[pos][1], stream) == CUDA_SUCCESS;
  ls->unmeasurable[pos] = !ok;
  pthread_mutex_unlock(&ls->lock);
  return r;
}

void AfterGraphLaunch() {
  if (!GraphMemoryPossible()) return;
  CUcontext ctx = nullptr;
  int ordinal = -1;
  if (CurrentContext(&ctx, &ordinal)) RefreshGraphMemory(ordinal);
}

// Graph launches: limited like kernels (keyed by the executable graph), and followed by a look
// at the graph memory pool once graph allocations are possible.
template <typename Fn>
CUresult GraphLaunch(Fn real, CUgraphExec exec, CUstream s, bool per_thread) {
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  NoteLaunch();
  if (SmState() != 2 && !GraphMemoryPossible()) return real(exec, s);
  CUresult r = SmState() == 2 ? LimitedLaunch(s, reinterpret_cast<uint64_t>(exec), per_thread,
                                              [&]() { return real(exec, s); })
                              : real(exec, s);
  if (r == CUDA_SUCCESS) AfterGraphLaunch();
  return r;
}

}  // namespace
}  // namespace gpushare::interpose

using namespace gpushare::interpose;  // NOLINT

#define GPUSHARE_LAUNCH_BODY(name, stream, key, per_thread, ...)            \
  auto real = GPUSHARE_REAL(name);                                          \
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;                   \
  NoteLaunch();                                                             \
  if (SmState() != 2) return real(__VA_ARGS__);                             \
  return LimitedLaunch(stream, reinterpret_cast<uint64_t>(key), per_thread, \
                       [&]() { return real(__VA_ARGS__); })

extern "C" {

__attribute__((visibility("default"))) CUresult cuLaunchKernel(
    CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
    unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void** params, void** extra) {
  GPUSHARE_LAUNCH_BODY(cuLaunchKernel, s, f, false, f, gx, gy, gz, bx, by, bz, shm, s, params,
                       extra);
}

__attribute__((visibility("default"))) CUresult cuLaunchKernel_ptsz(
    CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
    unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void** params, void** extra) {
  GPUSHARE_LAUNCH_BODY(cuLaunchKernel_ptsz, s, f, true, f, gx, gy, gz, bx, by, bz, shm, s, params,
                       extra);
}

__attribute__((visibility("default"))) CUresult cuLaunchKernelEx(const CUlaunchConfig* config,
                                                                 CUfunction f, void** params,
                                                                 void** extra) {
  GPUSHARE_LAUNCH_BODY(cuLaunchKernelEx, config != nullptr ? config->hStream : nullptr, f, false,
                       config, f, params, extra);
}

__attribute__((visibility("default"))) CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config,
                                                                      CUfunction f, void** params,
                                                                      void** extra) {
  GPUSHARE_LAUNCH_BODY(cuLaunchKernelEx_ptsz, config != nullptr ? config->hStream : nullptr, f,
                       true, config, f, params, extra);
}

__attribute__((visibility("default"))) CUresult cuLaunchCooperativeKernel(
    CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
    unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void** params) {
  GPUSHARE_LAUNCH_BODY(cuLaunchCooperativeKernel, s, f, false, f, gx, gy, gz, bx, by, bz, shm, s,
                       params);
}

__attribute__((visibility("default"))) CUresult cuLaunchCooperativeKernel_ptsz(
    CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
    unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void** params) {
  GPUSHARE_LAUNCH_BODY(cuLaunchCooperativeKernel_ptsz, s, f, true, f, gx, gy, gz, bx, by, bz, shm,
                       s, params);
}

__attribute__((visibility("default"))) CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
  return GraphLaunch(GPUSHARE_REAL(cuGraphLaunch), exec, s, false);
}

__attribute__((visibility("default"))) CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
  return GraphLaunch(GPUSHARE_REAL(cuGraphLaunch_ptsz), exec, s, true);
}

}  // extern "C"
