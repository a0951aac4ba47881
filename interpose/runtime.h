// runtime.h: the per-process state of libgpushare-cuda.so and the accounting primitives the
// wrappers share.
//
// Lifecycle: nothing happens at load time. The first wrapper or dlsym/cuGetProcAddress lookup
// that needs it reads the configuration once (config.h); when nothing is configured every
// wrapper is a pass-through from then on and the lookups return the driver's own pointers.
// Otherwise the region (region.h) is attached lazily, this process takes a slot, and each device
// is probed once (UUID, limit, allocation granularity) when first used.
//
// Locking: `g_lock` (process-local) protects the allocation table and the pool/context lists;
// the region has its own robust cross-process lock. Neither is held across a driver call that
// allocates or frees, and they are never nested, so a fork in another thread cannot deadlock
// the child (the child re-creates the process-local state and takes its own slot; it inherits no
// usage, since a CUDA context does not survive fork).
#pragma once

#include <pthread.h>
#include <stdint.h>

#include "interpose/alloc_table.h"
#include "interpose/config.h"
#include "interpose/hooks.h"
#include "interpose/region.h"
#include "interpose/sm_limiter.h"

namespace gpushare::interpose {

inline constexpr int kMaxOrdinals = 64;
inline constexpr int kMaxPools = 128;
inline constexpr int kMaxContexts = 128;

// ---- the real functions -----------------------------------------------------------------
// The driver's (or NVML's) function for an id, resolved once with the real dlsym from the
// library the process uses (libcuda.so.1 / libnvidia-ml.so.1), or recorded from
// cuGetProcAddress. nullptr when the library cannot be loaded.
void* RealFn(int id);
// Records the driver's pointer for a hook's ABI if none is known yet.
void RememberReal(int id, void* fn);
template <typename F>
inline F Real(int id) {
  return reinterpret_cast<F>(RealFn(id));
}
#define GPUSHARE_REAL(name) \
  (::gpushare::interpose::Real<decltype(&::name)>(::gpushare::interpose::kFn_##name))
// The real dlsym (glibc's), found with dlvsym(RTLD_NEXT, ...).
using DlsymFn = void* (*)(void*, const char*);
DlsymFn RealDlsym();
// Base address of the driver / NVML library (0 when not loaded), to recognise their pointers.
uintptr_t DriverBase();
uintptr_t NvmlBase();

// ---- configuration and state -----------------------------------------------------------------
// Reads the configuration once. Cheap after the first call.
void EnsureInit();
// True when something is enforced (reads the configuration on first use).
bool Active();
const Config& GetConfig();

// OrdinalInfo::dev when it is not a region device index (>= 0).
enum : int32_t {
  kDevNotAccounted = -1,    // nothing is enforced on this device: allocations pass through
  kDevRegionUnusable = -2,  // a limit applies but no region slot holds it: refuse (fail closed)
};

// What one device (by this process's ordinal) is, once probed.
struct OrdinalInfo {
  uint32_t probed;          // 1 when the fields below are valid (acquire)
  int32_t dev;              // region device index, or kDevNotAccounted / kDevRegionUnusable
  uint32_t sm_limit;        // 0 = none
  uint64_t granularity;     // VMM minimum granularity (the driver's large page), default 2 MiB
  uint64_t limit;           // memory limit as enforced by the region
  uint32_t memory_limited;  // 1 when allocations on it are accounted (limit may be 0: fail closed)
  uint8_t uuid[16];
};

// True when the device has a limit the region cannot hold: its allocations are refused.
inline bool RegionUnusable(const OrdinalInfo* o) {
  return o != nullptr && o->dev == kDevRegionUnusable;
}

// True when memory on this device is accounted: it has a memory limit (a region device index),
// or it must be refused because the region is unusable.
inline bool MemoryAccounted(const OrdinalInfo* o) {
  return o != nullptr && (RegionUnusable(o) || (o->dev >= 0 && o->memory_limited != 0));
}

// Probes a device ordinal (UUID, limits, region device). Thread-safe; nullptr if out of range.
const OrdinalInfo* Ordinal(int ordinal);

// The current context and its device; false when there is no current context.
bool CurrentContext(CUcontext* ctx, int* ordinal);

// ---- accounting ------------------------------------------------------------------------------
// Atomically reserves `bytes` on region device `dev` for this process. On refusal, logs why and
// returns false. Also refuses when the configuration is fail-closed or the region is unusable.
bool Reserve(int dev, uint64_t bytes, const char* api);
// Returns a reservation or a charge.
void Unreserve(int dev, uint64_t bytes);
// Charges without a limit check (memory the driver already holds: contexts, pools' growth).
void ForceCharge(int dev, uint64_t bytes);
// Container usage and limit of a device (reclaiming dead processes first).
uint64_t ContainerUsed(int dev);
// Attaches the region without taking a process slot (queries from NVML-only processes).
bool AttachRegionForQueries();

// The process-local lock and table.
void LockLocal();
void UnlockLocal();
AllocTable& Table();  // caller holds the local lock

// Footprint of a linear allocation of `bytes`: sizes under 1 MiB round up to 512 B (the driver
// packs them into shared pages), larger ones to the device's large page (granularity).
uint64_t LinearFootprint(uint64_t bytes, uint64_t granularity);

// Pools (stream-ordered allocation). Charges follow each pool's RESERVED_MEM_CURRENT.
struct PoolInfo {
  CUmemoryPool pool;
  int ordinal;
  int dev;               // region device, -1 = not accounted
  uint64_t charged;      // bytes charged for this pool: its reserved bytes as last read
  uint32_t outstanding;  // live allocations from it
  bool destroyed;
  uint64_t in_use;  // the footprints of its live allocations (an upper bound of its use)
};
// Finds or registers a pool (caller holds the local lock). `dev` is the region device its
// reservations are charged to (-1 = not accounted); probe it with Ordinal() before locking.
PoolInfo* FindPool(CUmemoryPool pool);
PoolInfo* AddPool(CUmemoryPool pool, int ordinal, int dev);
void RemovePool(PoolInfo* p);
// The pool cuMemAllocAsync draws from on an ordinal (the device's current pool), once an
// allocation showed it; nullptr when not known. Caller holds the local lock. Set from a pointer's
// own pool, by cuDeviceSetMemPool, and forgotten when a context of the process goes.
CUmemoryPool CurrentPool(int ordinal);
void SetCurrentPool(int ordinal, CUmemoryPool pool);
// Re-reads the reserved bytes of every pool of this process and adjusts the charges (growth
// the driver already holds is charged without a check). Caller must NOT hold the local lock.
void RefreshPools();
// Re-reads graph-memory reservations for one ordinal (or all when ordinal < 0).
void RefreshGraphMemory(int ordinal);
void NoteGraphMemoryPossible();
bool GraphMemoryPossible();
bool HasPools();
// The largest single growth of a pool seen on an ordinal (at least the large page), so async
// reservations cover what the driver's pool may add in one step.
uint64_t AsyncGrowthStep(int ordinal);
void NoteAsyncGrowth(int ordinal, uint64_t growth);

// Contexts: charged what they cost while they live (context_charge.h decides the figure).
// Before the driver creates a context the hook reserves its expected cost (the container's
// earlier measurement, else the configured or default figure) and reads the device's used
// memory (BeginContextProbe: false when the reservation does not fit the limit, and the hook
// answers CUDA_ERROR_OUT_OF_MEMORY without creating it); OnContextCreated reads the used memory
// again and settles the charge on the measured figure; CancelContextProbe gives the reservation
// back when the driver failed or no new context was made.
struct ContextProbe {
  int dev = -1;  // region device reserved on, -1 = nothing reserved
  uint64_t reserved = 0;
  bool taken = false;  // used_before is valid
  uint64_t used_before = 0;
  nvmlDevice_t nvml = nullptr;
};
bool BeginContextProbe(int ordinal, ContextProbe* probe, const char* api);
void CancelContextProbe(const ContextProbe& probe);
void OnContextCreated(CUcontext ctx, int ordinal, const ContextProbe& probe);
// Primary-context references taken through our hooks on an ordinal (0: the next retain creates).
int PrimaryRefs(int ordinal);
// Releases the allocations made in a context that the driver destroyed (and its overhead when
// `destroyed_context`).
void OnContextDestroyed(CUcontext ctx, bool destroyed_context);
CUcontext PrimaryContextOf(int ordinal);
// Primary-context retain counting through our hooks; returns the new count.
int PrimaryRetain(int ordinal, CUcontext ctx);
int PrimaryRelease(int ordinal);

// The SM limiter's per-process trackers, one per region device (caller holds the tracker lock).
struct LimiterSlot {
  pthread_mutex_t lock;
  SmCostTracker tracker;
  CUevent events[SmCostTracker::kMaxInflight][2];
  bool unmeasurable[SmCostTracker::kMaxInflight];  // its events could not be recorded
};
LimiterSlot* Limiter(int dev);
SmBucket* SharedBucket(int dev);
// 0 = not known yet, 1 = no SM limit anywhere (launch fast path), 2 = some device is limited.
int SmState();

// Monotonic clock in ns.
uint64_t NowNs();

// Region statistics for tests and the CLI.
Region& TheRegion();

}  // namespace gpushare::interpose
