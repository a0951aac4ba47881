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

// After an async allocation that was pre-reserved `reserved` bytes on t's device: follow the
// pool's reserved bytes. Returns false (after undoing the allocation) when its growth does not
// fit the limit.
template <typename FreeAsync>
bool SettleAsync(FreeAsync free_async, CUdeviceptr ptr, CUstream stream, const Target& t,
                 uint64_t reserved, CUmemoryPool known_pool) {
  PoolOfPointer pp;
  if (!PointerPool(ptr, &pp)) {
    // Not a pool pointer we can see (e.g. captured into a graph: graph memory is followed
    // separately). Nothing is charged for it here.
    Unreserve(t.dev(), reserved);
    return true;
  }
  if (known_pool != nullptr) pp.pool = known_pool;
  const OrdinalInfo* o = Ordinal(pp.ordinal);
  int dev = (o != nullptr && o->dev >= 0 && o->memory_limited != 0) ? o->dev : kDevNotAccounted;
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
  }
  AllocEntry e;
  e.key = ptr;
  e.kind = AllocKind::kAsync;
  e.dev = dev;
  e.aux = reinterpret_cast<uint64_t>(pp.pool);
  e.ctx = reinterpret_cast<uint64_t>(t.ctx);
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
  NoteAsyncGrowth(pp.ordinal, growth);
  if (growth <= reserved) {
    Unreserve(dev, reserved - growth + shrink);
    return true;
  }
  if (Reserve(dev, growth - reserved, "cuMemAllocAsync")) return true;
  // The pool grew past the limit: the driver holds that memory now, so charge it, then give
  // the allocation back and let the pool release it before refusing.
  ForceCharge(dev, growth - reserved);
  AllocEntry gone;
  LockLocal();
  if (Table().Remove(AllocKind::kAsync, ptr, &gone)) {
    PoolInfo* again = FindPool(pp.pool);  // `p` may have moved while unlocked
    if (again != nullptr && again->outstanding > 0) --again->outstanding;
  }
  UnlockLocal();
  free_async(ptr, stream);
  if (auto sync = GPUSHARE_REAL(cuStreamSynchronize)) sync(stream);
  if (auto trim = GPUSHARE_REAL(cuMemPoolTrimTo)) trim(pp.pool, 0);
  RefreshPools();
  return false;
}

template <typename Alloc, typename FreeAsync>
CUresult AllocAsync(Alloc real, FreeAsync free_async, CUdeviceptr* dptr, size_t bytes,
                    CUmemoryPool pool, CUstream stream, const char* api) {
  Target t;
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
  // Reserve what the pool may have to grow by: the request rounded to the largest growth step
  // seen on this device (the large page until one was seen). Settled on the pool's real
  // reserved bytes afterwards.
  uint64_t fp = RoundUp(LinearFootprint(bytes, t.info->granularity), AsyncGrowthStep(t.ordinal));
  if (!Reserve(t.dev(), fp, api)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = real();
  if (r != CUDA_SUCCESS) {
    Unreserve(t.dev(), fp);
    return r;
  }
  if (!SettleAsync(free_async, *dptr, stream, t, fp, pool)) {
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

template <typename Fn>
CUresult FreeAsync(Fn real, CUdeviceptr dptr, CUstream stream) {
  if (dptr == 0 || !Active()) return real(dptr, stream);
  AllocEntry e;
  bool had = Untrack(AllocKind::kAsync, dptr, &e);
  bool ipc = false;
  if (!had) ipc = Untrack(AllocKind::kIpc, dptr, &e);
  CUresult r = real(dptr, stream);
  if (had) {
    if (r == CUDA_SUCCESS) {
      // The memory returns to the pool, not to the device: the pool's charge stays until it
      // releases it (at a synchronisation, a trim, or its destruction).
      LockLocal();
      PoolInfo* p = FindPool(reinterpret_cast<CUmemoryPool>(e.aux));
      bool release_pool = false;
      uint64_t pool_charge = 0;
      int pool_dev = kDevNotAccounted;
      if (p != nullptr) {
        if (p->outstanding > 0) --p->outstanding;
        if (p->destroyed && p->outstanding == 0) {
          release_pool = true;
          pool_charge = p->charged;
          pool_dev = p->dev;
          RemovePool(p);
        }
      }
      UnlockLocal();
      Unreserve(e.dev, e.bytes);  // only set when the pool could not be read
      if (release_pool) Unreserve(pool_dev, pool_charge);
    } else {
      Track(e);
    }
  } else if (ipc) {
    FinishFree(r, true, e);
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
                    bytes, nullptr, s, "cuMemAllocAsync");
}

GPUSHARE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream s) {
  GPUSHARE_GET_REAL(cuMemAllocAsync_ptsz);
  if (!Active()) return real(dptr, bytes, s);
  return AllocAsync([&] { return real(dptr, bytes, s); }, GPUSHARE_REAL(cuMemFreeAsync_ptsz), dptr,
                    bytes, nullptr, s, "cuMemAllocAsync");
}

GPUSHARE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                                 CUstream s) {
  GPUSHARE_GET_REAL(cuMemAllocFromPoolAsync);
  if (!Active()) return real(dptr, bytes, pool, s);
  return AllocAsync([&] { return real(dptr, bytes, pool, s); }, GPUSHARE_REAL(cuMemFreeAsync), dptr,
                    bytes, pool, s, "cuMemAllocFromPoolAsync");
}

GPUSHARE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                      CUmemoryPool pool, CUstream s) {
  GPUSHARE_GET_REAL(cuMemAllocFromPoolAsync_ptsz);
  if (!Active()) return real(dptr, bytes, pool, s);
  return AllocAsync([&] { return real(dptr, bytes, pool, s); }, GPUSHARE_REAL(cuMemFreeAsync_ptsz),
                    dptr, bytes, pool, s, "cuMemAllocFromPoolAsync");
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
GPUSHARE_HOOK(cuDeviceSetMemPool, (CUdevice dev, CUmemoryPool pool), real(dev, pool))

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
