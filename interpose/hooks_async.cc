// The stream-ordered allocator: cuMemAllocAsync / cuMemFreeAsync, memory pools, the
// synchronisations at which pools release memory, and graph memory. A pool is charged for the
// bytes it holds (its reserved memory), not for each allocation.
#include "interpose/hooks_memory.h"

namespace gpushare::interpose {
namespace {

struct PoolOfPointer {
  CUmemoryPool pool = nullptr;
  int ordinal = -1;
};

bool PointerPool(CUdeviceptr p, PoolOfPointer* out) {
  auto attr = Real<CUresult (*)(void*, int, CUdeviceptr)>(kFn_cuPointerGetAttribute);
  if (attr == nullptr) return false;
  return attr(&out->pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) == CUDA_SUCCESS &&
         out->pool != nullptr &&
         attr(&out->ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == CUDA_SUCCESS;
}

// True when `stream` is being captured into a graph: its allocations are graph memory, not the
// pool's. Unknown (no entry point, an error) counts as capturing: the careful path runs.
bool Capturing(CUstream stream, bool per_thread) {
  auto f = Real<CUresult (*)(CUstream, int*)>(per_thread ? kFn_cuStreamIsCapturing_ptsz
                                                         : kFn_cuStreamIsCapturing);
  int status = 0;
  return f == nullptr || f(stream, &status) != CUDA_SUCCESS || status != 0;
}

// An async allocation on its way: where it is charged and what was set aside for it.
struct AsyncAlloc {
  Target t;
  uint64_t use = 0;             // its footprint in the pool (PoolInfo::in_use)
  uint64_t reserved = 0;        // reserved in the region beforehand (0 on the fast path)
  CUmemoryPool from = nullptr;  // its pool when known beforehand (fast path)
  bool counted = false;         // `use` already added to the pool's in_use
  bool default_pool = false;    // cuMemAllocAsync (the device's current pool)
};

// Takes back a fast-path prediction (the driver refused, or the pool could not be read).
void Uncount(CUmemoryPool pool, uint64_t use) {
  LockLocal();
  if (PoolInfo* p = FindPool(pool)) p->in_use = SatSub(p->in_use, use);
  UnlockLocal();
}

// After an async allocation: follow its pool's reserved bytes. Returns false (after undoing the
// allocation) when the pool's growth does not fit the limit.
template <typename FreeAsync>
bool SettleAsync(FreeAsync free_async, CUdeviceptr ptr, CUstream stream, AsyncAlloc& a) {
  const Target& t = a.t;
  PoolOfPointer pp;
  if (a.from != nullptr) {
    pp.pool = a.from;
    pp.ordinal = t.ordinal;
  } else if (!PointerPool(ptr, &pp)) {
    // Not a pool pointer we can see (e.g. captured into a graph: graph memory is followed
    // separately). Nothing is charged for it here.
    Unreserve(t.dev(), a.reserved);
    return true;
  }
  const OrdinalInfo* o = Ordinal(pp.ordinal);
  int dev = (o != nullptr && o->dev >= 0 && o->memory_limited != 0) ? o->dev : kDevNotAccounted;
  uint64_t reserved = a.reserved;
  if (dev != t.dev()) {
    // Allocated on another device than the current context's: give the reservation back; the
    // pool's growth on its own device is reserved below.
    Unreserve(t.dev(), reserved);
    reserved = 0;
  }
  auto get_attr = Real<CUresult (*)(CUmemoryPool, int, void*)>(kFn_cuMemPoolGetAttribute);
  uint64_t now_reserved = 0;
  bool have = get_attr != nullptr && get_attr(pp.pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                              &now_reserved) == CUDA_SUCCESS;
  LockLocal();
  PoolInfo* p = AddPool(pp.pool, pp.ordinal, dev);
  uint64_t before = p != nullptr ? p->charged : 0;
  if (p != nullptr) {
    if (have) p->charged = now_reserved;
    ++p->outstanding;
    if (!a.counted) p->in_use = SatAdd(p->in_use, a.use);
  }
  // The device's current pool, learnt from the pointer itself: later allocations skip the lookup.
  if (a.default_pool && a.from == nullptr && pp.ordinal == t.ordinal)
    SetCurrentPool(t.ordinal, pp.pool);
  AllocEntry e;
  e.key = ptr;
  e.kind = AllocKind::kAsync;
  e.dev = dev;
  e.aux = reinterpret_cast<uint64_t>(pp.pool);
  e.ctx = reinterpret_cast<uint64_t>(t.ctx);
  e.pool_use = p != nullptr ? a.use : 0;
  Table().Put(e);
  UnlockLocal();
  if (dev < 0) return true;
  if (!have || p == nullptr) {
    // Cannot read the pool: keep the reservation as the allocation's own charge.
    LockLocal();
    if (AllocEntry* te = Table().Find(AllocKind::kAsync, ptr)) te->bytes = reserved;
    UnlockLocal();
    return true;
  }
  uint64_t growth = SatSub(now_reserved, before);
  uint64_t shrink = SatSub(before, now_reserved);
  if (growth == 0 && shrink == 0 && reserved == 0) return true;  // the fast path's usual end
  NoteAsyncGrowth(pp.ordinal, growth);
  if (growth <= reserved) {
    Unreserve(dev, reserved - growth + shrink);
    return true;
  }
  if (Reserve(dev, growth - reserved, "cuMemAllocAsync")) {
    Unreserve(dev, shrink);
    return true;
  }
  // The pool grew past the limit: the driver holds that memory now, so charge it, then give
  // the allocation back and let the pool release it before refusing.
  ForceCharge(dev, growth - reserved);
  AllocEntry gone;
  LockLocal();
  if (Table().Remove(AllocKind::kAsync, ptr, &gone)) {
    PoolInfo* again = FindPool(pp.pool);  // `p` may have moved while unlocked
    if (again != nullptr) {
      if (again->outstanding > 0) --again->outstanding;
      again->in_use = SatSub(again->in_use, gone.pool_use);
    }
  }
  UnlockLocal();
  free_async(ptr, stream);
  if (auto sync = GPUSHARE_REAL(cuStreamSynchronize)) sync(stream);
  if (auto trim = GPUSHARE_REAL(cuMemPoolTrimTo)) trim(pp.pool, 0);
  RefreshPools();
  return false;
}

// The stream-ordered allocation, two ways:
//  * fast: the pool it draws from is known (an explicit pool, or the device's current pool
//    learnt from an earlier pointer), the stream is not being captured, and the pool's reserved
//    bytes less the footprints of its live allocations cover this one. Then the pool serves it
//    without growing, nothing is reserved in the region beforehand, and afterwards one read of
//    the pool's reserved bytes confirms it (one process-local lock, no region lock);
//  * careful: anything else. The request, rounded to the largest growth step seen on the device,
//    is reserved in the region first, and the pointer tells which pool it came from.
// Either way the pool's reserved bytes are read after the allocation and any growth is charged
// (or, past the limit, the allocation is undone), so a wrong guess costs a refusal, never an
// uncounted byte.
template <typename Alloc, typename FreeAsync>
CUresult AllocAsync(Alloc real, FreeAsync free_async, CUdeviceptr* dptr, size_t bytes,
                    CUmemoryPool pool, CUstream stream, bool per_thread, const char* api) {
  AsyncAlloc a;
  Target& t = a.t;
  if (Active()) NoteGraphMemoryPossible();  // captured async allocations become graph memory
  bool targeted = false;
  if (pool != nullptr && Active()) {
    LockLocal();
    PoolInfo* p = FindPool(pool);
    int ordinal = p != nullptr ? p->ordinal : -1;
    UnlockLocal();
    targeted = ordinal >= 0 ? TargetForOrdinal(ordinal, &t) : CurrentTarget(&t);
  } else {
    targeted = CurrentTarget(&t);
  }
  if (dptr == nullptr || bytes == 0 || !targeted) return real();
  a.use = LinearFootprint(bytes, t.info->granularity);
  a.default_pool = pool == nullptr;
  if (t.dev() >= 0) {
    LockLocal();
    CUmemoryPool from = pool != nullptr ? pool : CurrentPool(t.ordinal);
    PoolInfo* p = from != nullptr ? FindPool(from) : nullptr;
    if (p != nullptr && !p->destroyed && p->dev == t.dev() && p->ordinal == t.ordinal &&
        SatSub(p->charged, p->in_use) >= a.use) {
      p->in_use += a.use;  // claimed now, so that concurrent allocations see it
      a.from = from;
      a.counted = true;
    }
    UnlockLocal();
    if (a.from != nullptr && Capturing(stream, per_thread)) {
      Uncount(a.from, a.use);
      a.from = nullptr;
      a.counted = false;
    }
  }
  if (a.from == nullptr) {
    a.reserved = RoundUp(a.use, AsyncGrowthStep(t.ordinal));
    if (!Reserve(t.dev(), a.reserved, api)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult r = real();
  if (r != CUDA_SUCCESS) {
    if (a.counted) Uncount(a.from, a.use);
    Unreserve(t.dev(), a.reserved);
    return r;
  }
  if (!SettleAsync(free_async, *dptr, stream, a)) {
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

template <typename Fn>
CUresult FreeAsync(Fn real, CUdeviceptr dptr, CUstream stream) {
  if (dptr == 0 || !Active()) return real(dptr, stream);
  // One critical section before the driver's call: the entry and its pool's counts. Undone in
  // the (rare) case the driver refuses.
  AllocEntry e;
  bool ipc = false;
  bool release_pool = false;
  LockLocal();
  bool had = Table().Remove(AllocKind::kAsync, dptr, &e);
  if (had) {
    if (PoolInfo* p = FindPool(reinterpret_cast<CUmemoryPool>(e.aux))) {
      if (p->outstanding > 0) --p->outstanding;
      p->in_use = SatSub(p->in_use, e.pool_use);
      release_pool = p->destroyed && p->outstanding == 0;
    }
  } else {
    ipc = Table().Remove(AllocKind::kIpc, dptr, &e);
  }
  UnlockLocal();
  CUresult r = real(dptr, stream);
  if (ipc) {
    FinishFree(r, true, e);
    return r;
  }
  if (!had) return r;
  if (r != CUDA_SUCCESS) {
    LockLocal();
    if (PoolInfo* p = FindPool(reinterpret_cast<CUmemoryPool>(e.aux))) {
      ++p->outstanding;
      p->in_use = SatAdd(p->in_use, e.pool_use);
    }
    Table().Put(e);
    UnlockLocal();
    return r;
  }
  // The memory returns to the pool, not to the device: the pool's charge stays until it
  // releases it (at a synchronisation, a trim, or its destruction).
  if (e.bytes != 0) Unreserve(e.dev, e.bytes);  // only set when the pool could not be read
  if (release_pool) {
    // A destroyed pool goes with its last allocation, as the driver does.
    uint64_t pool_charge = 0;
    int pool_dev = kDevNotAccounted;
    LockLocal();
    PoolInfo* p = FindPool(reinterpret_cast<CUmemoryPool>(e.aux));
    if (p != nullptr && p->destroyed && p->outstanding == 0) {
      pool_charge = p->charged;
      pool_dev = p->dev;
      RemovePool(p);
    }
    UnlockLocal();
    Unreserve(pool_dev, pool_charge);
  }
  return r;
}

}  // namespace
}  // namespace gpushare::interpose

using namespace gpushare::interpose;  // NOLINT

GPUSHARE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  GPUSHARE_GET_REAL(cuMemAllocAsync);
  if (!Active()) return real(dptr, bytes, s);
  return AllocAsync([&] { return real(dptr, bytes, s); }, GPUSHARE_REAL(cuMemFreeAsync), dptr,
                    bytes, nullptr, s, false, "cuMemAllocAsync");
}

GPUSHARE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  GPUSHARE_GET_REAL(cuMemAllocAsync_ptsz);
  if (!Active()) return real(dptr, bytes, s);
  return AllocAsync([&] { return real(dptr, bytes, s); }, GPUSHARE_REAL(cuMemFreeAsync_ptsz), dptr,
                    bytes, nullptr, s, true, "cuMemAllocAsync");
}

GPUSHARE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                                 CUstream s) {
  GPUSHARE_GET_REAL(cuMemAllocFromPoolAsync);
  if (!Active()) return real(dptr, bytes, pool, s);
  return AllocAsync([&] { return real(dptr, bytes, pool, s); }, GPUSHARE_REAL(cuMemFreeAsync), dptr,
                    bytes, pool, s, false, "cuMemAllocFromPoolAsync");
}

GPUSHARE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                      CUmemoryPool pool, CUstream s) {
  GPUSHARE_GET_REAL(cuMemAllocFromPoolAsync_ptsz);
  if (!Active()) return real(dptr, bytes, pool, s);
  return AllocAsync([&] { return real(dptr, bytes, pool, s); }, GPUSHARE_REAL(cuMemFreeAsync_ptsz),
                    dptr, bytes, pool, s, true, "cuMemAllocFromPoolAsync");
}

GPUSHARE_HOOK(cuMemFreeAsync, (CUdeviceptr dptr, CUstream s), FreeAsync(real, dptr, s))
GPUSHARE_HOOK(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream s), FreeAsync(real, dptr, s))

GPUSHARE_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  GPUSHARE_GET_REAL(cuMemPoolCreate);
  if (!Active() || pool == nullptr || props == nullptr ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return real(pool, props);
  Target t;
  bool accounted = TargetForOrdinal(props->location.id, &t);
  CUmemPoolProps clamped = *props;
  if (accounted && t.dev() >= 0 && (clamped.maxSize == 0 || clamped.maxSize > t.info->limit))
    clamped.maxSize = t.info->limit;  // the pool can never usefully grow past the limit
  CUresult r = real(pool, accounted ? &clamped : props);
  if (r == CUDA_SUCCESS && accounted) {
    LockLocal();
    AddPool(*pool, props->location.id, t.dev());
    UnlockLocal();
  }
  return r;
}

GPUSHARE_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  GPUSHARE_GET_REAL(cuMemPoolDestroy);
  if (!Active()) return real(pool);
  CUresult r = real(pool);
  if (r != CUDA_SUCCESS) return r;
  LockLocal();
  PoolInfo* p = FindPool(pool);
  uint64_t charge = 0;
  int dev = -1;
  if (p != nullptr) {
    if (p->outstanding == 0) {
      charge = p->charged;
      dev = p->dev;
      RemovePool(p);
    } else {
      p->destroyed = true;  // released with its last allocation, as the driver does
    }
  }
  UnlockLocal();
  Unreserve(dev, charge);
  return r;
}

namespace {
// `r`: the driver's answer to a call that may have given pool memory back.
CUresult PoolsRefreshed(CUresult r) {
  if (r == CUDA_SUCCESS && Active() && HasPools()) RefreshPools();
  return r;
}

// A pool handed out by the driver: remember which device it belongs to.
CUresult LearnPool(CUresult r, CUmemoryPool* pool, CUdevice dev) {
  if (r == CUDA_SUCCESS && pool != nullptr && Active()) {
    Target t;
    bool accounted = TargetForOrdinal(dev, &t);
    LockLocal();
    AddPool(*pool, dev, accounted ? t.dev() : kDevNotAccounted);
    UnlockLocal();
  }
  return r;
}

// `r`: the driver's answer to a synchronisation, after which pools and graphs may have given
// memory back.
CUresult Synced(CUresult r) {
  if (Active()) {
    if (HasPools()) RefreshPools();
    RefreshGraphMemory(-1);
  }
  return r;
}
}  // namespace

GPUSHARE_HOOK(cuMemPoolTrimTo, (CUmemoryPool pool, size_t keep), PoolsRefreshed(real(pool, keep)))

// Unformatted: clang-format would read `CUmemoryPool* pool` as a product.
// clang-format off
GPUSHARE_HOOK(cuDeviceGetDefaultMemPool, (CUmemoryPool* pool, CUdevice dev),
              LearnPool(real(pool, dev), pool, dev))
GPUSHARE_HOOK(cuDeviceGetMemPool, (CUmemoryPool* pool, CUdevice dev),
              LearnPool(real(pool, dev), pool, dev))
// clang-format on
namespace {
// `r`: the driver's answer to cuDeviceSetMemPool: cuMemAllocAsync on `dev` draws from `pool` now.
CUresult PoolSet(CUresult r, CUdevice dev, CUmemoryPool pool) {
  if (r == CUDA_SUCCESS && Active()) {
    LockLocal();
    SetCurrentPool(dev, FindPool(pool) != nullptr ? pool : nullptr);  // unknown: learn it again
    UnlockLocal();
  }
  return r;
}
}  // namespace
GPUSHARE_HOOK(cuDeviceSetMemPool, (CUdevice dev, CUmemoryPool pool),
              PoolSet(real(dev, pool), dev, pool))

GPUSHARE_EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr* out, CUmemoryPool pool,
                                                CUmemPoolPtrExportData* data) {
  GPUSHARE_GET_REAL(cuMemPoolImportPointer);
  CUresult r = real(out, pool, data);
  if (r != CUDA_SUCCESS || out == nullptr || !Active() ||
      GetConfig().ipc_imports != ImportPolicy::kCount)
    return r;
  Target t;
  uint64_t fp = 0;
  if (!ImportedFootprint(*out, &t, &fp)) return r;
  ForceCharge(t.dev(), fp);  // the exporter already holds it; counted here by policy
  TrackCharged(*out, AllocKind::kIpc, t, fp);
  return r;
}

GPUSHARE_HOOK(cuStreamSynchronize, (CUstream s), Synced(real(s)))
GPUSHARE_HOOK(cuStreamSynchronize_ptsz, (CUstream s), Synced(real(s)))
GPUSHARE_HOOK(cuCtxSynchronize, (void), Synced(real()))
GPUSHARE_HOOK(cuCtxSynchronize_v2, (CUcontext ctx), Synced(real(ctx)))
GPUSHARE_HOOK(cuEventSynchronize, (CUevent e), Synced(real(e)))

// ---- graph memory
// ----------------------------------------------------------------------------------

GPUSHARE_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph,
                                                const CUgraphNode* deps, size_t ndeps,
                                                CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  GPUSHARE_GET_REAL(cuGraphAddMemAllocNode);
  if (Active()) NoteGraphMemoryPossible();
  return real(node, graph, deps, ndeps, params);
}

GPUSHARE_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  GPUSHARE_GET_REAL(cuDeviceGraphMemTrim);
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS && Active()) RefreshGraphMemory(dev);
  return r;
}
