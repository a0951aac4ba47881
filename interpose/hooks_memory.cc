// Memory wrappers: every way a CUDA program obtains device memory, and the queries that report
// it. The pattern is always the same: work out the device, reserve the footprint atomically in
// the shared region (refusing with CUDA_ERROR_OUT_OF_MEMORY before the driver is called, so
// nothing is allocated), call the driver, then either give the reservation back (the driver
// failed) or record the allocation so that its free releases exactly what was charged. Where
// the real footprint is only known afterwards (pitch, array padding, pool growth) the
// reservation is adjusted to it, and an allocation whose real footprint does not fit is freed
// again before CUDA_ERROR_OUT_OF_MEMORY is returned. docs/interposer.md has the per-API policy.
#include <string.h>

#include "interpose/base.h"
#include "interpose/log.h"
#include "interpose/runtime.h"

namespace gpushare::interpose {
namespace {

constexpr unsigned int kArraySparse = 0x40;           // CUDA_ARRAY3D_SPARSE
constexpr unsigned int kArrayDeferredMapping = 0x80;  // CUDA_ARRAY3D_DEFERRED_MAPPING

// Where an allocation is charged: the current context's device.
struct Target {
  CUcontext ctx = nullptr;
  int ordinal = -1;
  const OrdinalInfo* info = nullptr;
  bool accounted() const { return MemoryAccounted(info); }
  int dev() const { return info->dev; }
};

bool CurrentTarget(Target* t) {
  if (!Active()) return false;
  if (!CurrentContext(&t->ctx, &t->ordinal)) return false;
  t->info = Ordinal(t->ordinal);
  return t->accounted();
}

bool TargetForOrdinal(int ordinal, Target* t) {
  if (!Active()) return false;
  t->ordinal = ordinal;
  t->info = Ordinal(ordinal);
  CUcontext c = nullptr;
  int o = -1;
  if (CurrentContext(&c, &o) && o == ordinal) t->ctx = c;
  return t->accounted();
}

void Track(const AllocEntry& e) {
  LockLocal();
  bool ok = Table().Put(e);
  UnlockLocal();
  if (!ok)
    Log(kLogError, "msg=\"cannot record an allocation (out of memory for the table); it stays "
                   "charged\" bytes=%llu", static_cast<unsigned long long>(e.bytes));
}

bool Untrack(AllocKind kind, uint64_t key, AllocEntry* out) {
  LockLocal();
  bool found = Table().Remove(kind, key, out);
  UnlockLocal();
  return found;
}

// Records an allocation charged to the target's device and context.
void TrackCharged(uint64_t key, AllocKind kind, const Target& t, uint64_t bytes) {
  AllocEntry e;
  e.key = key;
  e.kind = kind;
  e.dev = t.dev();
  e.bytes = bytes;
  e.ctx = reinterpret_cast<uint64_t>(t.ctx);
  Track(e);
}

// The driver freed it (or tore the context down): release the charge. Otherwise keep tracking.
void FinishFree(CUresult r, bool had, const AllocEntry& e) {
  if (!had) return;
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_DEINITIALIZED) {
    Unreserve(e.dev, e.bytes);
  } else {
    Track(e);
  }
}

// Grows or shrinks a reservation from `have` to `need`. False when growing does not fit.
bool Adjust(int dev, uint64_t have, uint64_t need, const char* api) {
  if (need > have) return Reserve(dev, need - have, api);
  Unreserve(dev, have - need);
  return true;
}

// When there was no context to charge but the driver allocated anyway, charge the pointer's
// device after the fact (never leave an allocation uncounted).
void ChargeOrphan(CUdeviceptr ptr, uint64_t bytes) {
  auto attr = Real<CUresult (*)(void*, int, CUdeviceptr)>(kFn_cuPointerGetAttribute);
  int ordinal = -1;
  if (!Active() || attr == nullptr || attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) != CUDA_SUCCESS)
    return;
  const OrdinalInfo* o = Ordinal(ordinal);
  if (o == nullptr || o->dev < 0 || o->memory_limited == 0) return;
  uint64_t fp = LinearFootprint(bytes, o->granularity);
  ForceCharge(o->dev, fp);
  AllocEntry e;
  e.key = ptr;
  e.kind = AllocKind::kLinear;
  e.dev = o->dev;
  e.bytes = fp;
  Track(e);
}

// ---- linear ------------------------------------------------------------------------------------

template <typename Ptr, typename Size, typename Fn>
CUresult AllocLinear(Fn real, Ptr* dptr, Size bytes, const char* api) {
  Target t;
  if (dptr == nullptr || bytes == 0 || !CurrentTarget(&t)) {
    CUresult r = real(dptr, bytes);
    if (r == CUDA_SUCCESS && dptr != nullptr && t.info == nullptr && Active())
      ChargeOrphan(static_cast<CUdeviceptr>(*dptr), bytes);
    return r;
  }
  uint64_t fp = LinearFootprint(bytes, t.info->granularity);
  if (!Reserve(t.dev(), fp, api)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = real(dptr, bytes);
  if (r != CUDA_SUCCESS) {
    Unreserve(t.dev(), fp);
    return r;
  }
  TrackCharged(static_cast<uint64_t>(*dptr), AllocKind::kLinear, t, fp);
  return r;
}

template <typename Ptr, typename Fn>
CUresult FreeLinear(Fn real, Ptr dptr) {
  if (dptr == 0 || !Active()) return real(dptr);
  AllocEntry e;
  bool had = Untrack(AllocKind::kLinear, static_cast<uint64_t>(dptr), &e);
  if (!had) had = Untrack(AllocKind::kIpc, static_cast<uint64_t>(dptr), &e);  // pool imports
  CUresult r = real(dptr);
  FinishFree(r, had, e);
  return r;
}

template <typename Ptr, typename Size, typename Fn, typename FreeFn>
CUresult AllocPitch(Fn real, FreeFn free_fn, Ptr* dptr, Size* pitch, Size width, Size height,
                    unsigned int elem) {
  Target t;
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0 || !CurrentTarget(&t)) {
    CUresult r = real(dptr, pitch, width, height, elem);
    if (r == CUDA_SUCCESS && dptr != nullptr && pitch != nullptr && t.info == nullptr && Active())
      ChargeOrphan(static_cast<CUdeviceptr>(*dptr), SatMul(*pitch, height));
    return r;
  }
  // Reserve the likely footprint (rows padded to 512 B), then settle on the real pitch.
  uint64_t estimate = LinearFootprint(SatMul(RoundUp(width, 512), height), t.info->granularity);
  if (!Reserve(t.dev(), estimate, "cuMemAllocPitch")) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = real(dptr, pitch, width, height, elem);
  if (r != CUDA_SUCCESS) {
    Unreserve(t.dev(), estimate);
    return r;
  }
  uint64_t actual = LinearFootprint(SatMul(*pitch, height), t.info->granularity);
  if (!Adjust(t.dev(), estimate, actual, "cuMemAllocPitch")) {
    free_fn(*dptr);
    Unreserve(t.dev(), estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  TrackCharged(static_cast<uint64_t>(*dptr), AllocKind::kLinear, t, actual);
  return r;
}

// ---- arrays ------------------------------------------------------------------------------------

uint64_t ElementBytes(int format, unsigned int channels) {
  uint64_t b = 4;  // block-compressed, YUV and normalised formats: corrected after creation
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: b = 1; break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: b = 2; break;
    default: break;
  }
  return b * (channels == 0 ? 1 : channels);
}

// The footprint reserved before an array is created: its block-linear tiling bound (rows padded
// to 512 B, height to 32 rows, the whole to 64 KiB). Settled afterwards on the size
// cuArrayGetMemoryRequirements reports.
uint64_t ArrayEstimate(uint64_t w, uint64_t h, uint64_t d, int format, unsigned int channels) {
  uint64_t row = RoundUp(SatMul(w == 0 ? 1 : w, ElementBytes(format, channels)), 512);
  uint64_t n = SatMul(SatMul(row, RoundUp(h == 0 ? 1 : h, 32)), d == 0 ? 1 : d);
  return RoundUp(n, 64ull << 10);
}

// Creates an array-like object: reserve the estimate, create, settle on the driver's reported
// size, destroy and refuse when that does not fit.
template <typename Create, typename Query, typename Destroy, typename Handle>
CUresult CreateArrayLike(Create create, Query query, Destroy destroy, Handle* handle,
                         uint64_t estimate_bytes, bool no_backing, AllocKind kind, const char* api,
                         bool large_pages = false) {
  Target t;
  if (handle == nullptr || no_backing || !CurrentTarget(&t)) return create();
  uint64_t estimate = large_pages ? RoundUp(estimate_bytes, t.info->granularity)
                                  : LinearFootprint(estimate_bytes, t.info->granularity);
  if (!Reserve(t.dev(), estimate, api)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = create();
  if (r != CUDA_SUCCESS) {
    Unreserve(t.dev(), estimate);
    return r;
  }
  uint64_t actual = estimate;
  CUDA_ARRAY_MEMORY_REQUIREMENTS req;
  memset(&req, 0, sizeof(req));
  if (query != nullptr && query(&req, *handle, t.ordinal) == CUDA_SUCCESS && req.size != 0)
    actual = req.size;
  if (!Adjust(t.dev(), estimate, actual, api)) {
    destroy(*handle);
    Unreserve(t.dev(), estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  TrackCharged(reinterpret_cast<uint64_t>(*handle), kind, t, actual);
  return r;
}

template <typename Fn, typename Handle>
CUresult DestroyTracked(Fn real, Handle h, AllocKind kind) {
  if (h == nullptr || !Active()) return real(h);
  AllocEntry e;
  bool had = Untrack(kind, reinterpret_cast<uint64_t>(h), &e);
  CUresult r = real(h);
  FinishFree(r, had, e);
  return r;
}

// ---- stream-ordered allocation ---------------------------------------------------------------------

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
  int dev = (o != nullptr && o->dev >= 0 && o->memory_limited != 0) ? o->dev : -1;
  if (dev != t.dev()) {
    // Allocated on another device than the current context's: give the reservation back; the
    // pool's growth on its own device is reserved below.
    Unreserve(t.dev(), reserved);
    reserved = 0;
  }
  auto get_attr = Real<CUresult (*)(CUmemoryPool, int, void*)>(kFn_cuMemPoolGetAttribute);
  uint64_t now_reserved = 0;
  bool have = get_attr != nullptr &&
              get_attr(pp.pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now_reserved) == CUDA_SUCCESS;
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
      int pool_dev = -1;
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

// ---- queries ---------------------------------------------------------------------------------------

// Rewrites (free, total) for a limited device: total = min(limit, physical), free =
// min(total - container usage, physical free). Never negative, never an error.
bool ClampInfo(const OrdinalInfo* o, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (!MemoryAccounted(o)) return false;
  if (o->dev == -2) {
    *total_bytes = Min(*total_bytes, o->limit);
    *free_bytes = 0;
    return true;
  }
  if (HasPools()) RefreshPools();
  RefreshGraphMemory(-1);
  uint64_t used = ContainerUsed(o->dev);
  uint64_t total = Min(o->limit, *total_bytes);
  *free_bytes = Min(SatSub(total, used), *free_bytes);
  *total_bytes = total;
  return true;
}

}  // namespace
}  // namespace gpushare::interpose

using namespace gpushare::interpose;  // NOLINT

#define GPUSHARE_EXPORT extern "C" __attribute__((visibility("default")))
#define GPUSHARE_GET_REAL(name)                 \
  auto real = GPUSHARE_REAL(name);              \
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED

GPUSHARE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  GPUSHARE_GET_REAL(cuMemAlloc_v2);
  if (!Active()) return real(dptr, bytes);
  return AllocLinear(real, dptr, bytes, "cuMemAlloc");
}

GPUSHARE_EXPORT CUresult cuMemAlloc(unsigned int* dptr, unsigned int bytes) {
  GPUSHARE_GET_REAL(cuMemAlloc);
  if (!Active()) return real(dptr, bytes);
  return AllocLinear(real, dptr, bytes, "cuMemAlloc");
}

GPUSHARE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  GPUSHARE_GET_REAL(cuMemFree_v2);
  return FreeLinear(real, dptr);
}

GPUSHARE_EXPORT CUresult cuMemFree(unsigned int dptr) {
  GPUSHARE_GET_REAL(cuMemFree);
  return FreeLinear(real, dptr);
}

GPUSHARE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                            size_t height, unsigned int elem) {
  GPUSHARE_GET_REAL(cuMemAllocPitch_v2);
  if (!Active()) return real(dptr, pitch, width, height, elem);
  auto free_fn = GPUSHARE_REAL(cuMemFree_v2);
  return AllocPitch(real, free_fn, dptr, pitch, width, height, elem);
}

GPUSHARE_EXPORT CUresult cuMemAllocPitch(unsigned int* dptr, unsigned int* pitch,
                                         unsigned int width, unsigned int height,
                                         unsigned int elem) {
  GPUSHARE_GET_REAL(cuMemAllocPitch);
  if (!Active()) return real(dptr, pitch, width, height, elem);
  auto free_fn = GPUSHARE_REAL(cuMemFree);
  return AllocPitch(real, free_fn, dptr, pitch, width, height, elem);
}

GPUSHARE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  GPUSHARE_GET_REAL(cuMemAllocManaged);
  if (!Active() || GetConfig().managed == ManagedPolicy::kIgnore) return real(dptr, bytes, flags);
  return AllocLinear([&](CUdeviceptr* p, size_t n) { return real(p, n, flags); }, dptr, bytes,
                     "cuMemAllocManaged");
}

namespace {
// cuArrayCreate / cuArray3DCreate in both ABIs (the descriptor types differ, the policy not).
template <typename Fn, typename Desc>
CUresult CreateArray(Fn real, CUarray* handle, const Desc* desc, uint64_t depth, unsigned int flags,
                     const char* api) {
  if (!Active() || desc == nullptr) return real(handle, desc);
  return CreateArrayLike([&] { return real(handle, desc); },
                         Real<CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUarray, CUdevice)>(
                             kFn_cuArrayGetMemoryRequirements),
                         GPUSHARE_REAL(cuArrayDestroy), handle,
                         ArrayEstimate(desc->Width, desc->Height, depth, desc->Format, desc->NumChannels),
                         (flags & (kArraySparse | kArrayDeferredMapping)) != 0, AllocKind::kArray, api);
}
}  // namespace

GPUSHARE_EXPORT CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  GPUSHARE_GET_REAL(cuArrayCreate_v2);
  return CreateArray(real, handle, desc, 1, 0, "cuArrayCreate");
}

GPUSHARE_EXPORT CUresult cuArrayCreate(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  GPUSHARE_GET_REAL(cuArrayCreate);
  return CreateArray(real, handle, desc, 1, 0, "cuArrayCreate");
}

GPUSHARE_EXPORT CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  GPUSHARE_GET_REAL(cuArray3DCreate_v2);
  return CreateArray(real, handle, desc, desc != nullptr ? desc->Depth : 1, desc != nullptr ? desc->Flags : 0,
                     "cuArray3DCreate");
}

GPUSHARE_EXPORT CUresult cuArray3DCreate(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  GPUSHARE_GET_REAL(cuArray3DCreate);
  return CreateArray(real, handle, desc, desc != nullptr ? desc->Depth : 1, desc != nullptr ? desc->Flags : 0,
                     "cuArray3DCreate");
}

GPUSHARE_EXPORT CUresult cuArrayDestroy(CUarray h) {
  GPUSHARE_GET_REAL(cuArrayDestroy);
  return DestroyTracked(real, h, AllocKind::kArray);
}

GPUSHARE_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* handle,
                                                const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                unsigned int levels) {
  GPUSHARE_GET_REAL(cuMipmappedArrayCreate);
  if (!Active() || desc == nullptr) return real(handle, desc, levels);
  uint64_t estimate = 0;  // all levels in one allocation of large pages
  for (unsigned int l = 0; l < (levels == 0 ? 1 : levels) && l < 64; ++l) {
    uint64_t w = desc->Width >> l, h = desc->Height >> l, d = desc->Depth >> l;
    estimate = SatAdd(estimate, ArrayEstimate(w == 0 ? 1 : w, h == 0 ? 1 : h, d == 0 ? 1 : d,
                                              desc->Format, desc->NumChannels));
  }
  return CreateArrayLike([&] { return real(handle, desc, levels); },
                         Real<CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUmipmappedArray, CUdevice)>(
                             kFn_cuMipmappedArrayGetMemoryRequirements),
                         GPUSHARE_REAL(cuMipmappedArrayDestroy), handle, estimate,
                         (desc->Flags & (kArraySparse | kArrayDeferredMapping)) != 0,
                         AllocKind::kMipmapped, "cuMipmappedArrayCreate", true);
}

GPUSHARE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) {
  GPUSHARE_GET_REAL(cuMipmappedArrayDestroy);
  return DestroyTracked(real, h, AllocKind::kMipmapped);
}

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

GPUSHARE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
  GPUSHARE_GET_REAL(cuMemFreeAsync);
  return FreeAsync(real, dptr, s);
}

GPUSHARE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
  GPUSHARE_GET_REAL(cuMemFreeAsync_ptsz);
  return FreeAsync(real, dptr, s);
}

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

GPUSHARE_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  GPUSHARE_GET_REAL(cuMemPoolTrimTo);
  CUresult r = real(pool, keep);
  if (r == CUDA_SUCCESS && Active() && HasPools()) RefreshPools();
  return r;
}

namespace {
// A pool handed out by the driver: remember which device it belongs to.
CUresult LearnPool(CUresult r, CUmemoryPool* pool, CUdevice dev) {
  if (r == CUDA_SUCCESS && pool != nullptr && Active()) {
    Target t;
    bool accounted = TargetForOrdinal(dev, &t);
    LockLocal();
    AddPool(*pool, dev, accounted ? t.dev() : -1);
    UnlockLocal();
  }
  return r;
}
}  // namespace

GPUSHARE_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  GPUSHARE_GET_REAL(cuDeviceGetDefaultMemPool);
  return LearnPool(real(pool, dev), pool, dev);
}

GPUSHARE_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  GPUSHARE_GET_REAL(cuDeviceGetMemPool);
  return LearnPool(real(pool, dev), pool, dev);
}

GPUSHARE_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  GPUSHARE_GET_REAL(cuDeviceSetMemPool);
  return real(dev, pool);
}

GPUSHARE_EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr* out, CUmemoryPool pool,
                                                CUmemPoolPtrExportData* data) {
  GPUSHARE_GET_REAL(cuMemPoolImportPointer);
  CUresult r = real(out, pool, data);
  if (r != CUDA_SUCCESS || out == nullptr || !Active() ||
      GetConfig().ipc_imports != ImportPolicy::kCount)
    return r;
  Target t;
  auto range = Real<CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr)>(kFn_cuMemGetAddressRange_v2);
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!CurrentTarget(&t) || range == nullptr || range(&base, &size, *out) != CUDA_SUCCESS) return r;
  uint64_t fp = LinearFootprint(size, t.info->granularity);
  ForceCharge(t.dev(), fp);  // the exporter already holds it; counted here by policy
  TrackCharged(*out, AllocKind::kIpc, t, fp);
  return r;
}

#define GPUSHARE_SYNC_BODY(call)                          \
  CUresult r = call;                                      \
  if (Active()) {                                         \
    if (HasPools()) RefreshPools();                       \
    RefreshGraphMemory(-1);                               \
  }                                                       \
  return r

GPUSHARE_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  GPUSHARE_GET_REAL(cuStreamSynchronize);
  GPUSHARE_SYNC_BODY(real(s));
}
GPUSHARE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) {
  GPUSHARE_GET_REAL(cuStreamSynchronize_ptsz);
  GPUSHARE_SYNC_BODY(real(s));
}
GPUSHARE_EXPORT CUresult cuCtxSynchronize(void) {
  GPUSHARE_GET_REAL(cuCtxSynchronize);
  GPUSHARE_SYNC_BODY(real());
}
GPUSHARE_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  GPUSHARE_GET_REAL(cuCtxSynchronize_v2);
  GPUSHARE_SYNC_BODY(real(ctx));
}
GPUSHARE_EXPORT CUresult cuEventSynchronize(CUevent e) {
  GPUSHARE_GET_REAL(cuEventSynchronize);
  GPUSHARE_SYNC_BODY(real(e));
}

// ---- virtual memory management ---------------------------------------------------------------------

namespace {

// Releases a VMM handle's physical memory charge once it is both released and unmapped, as the
// driver frees it. Caller holds the local lock; returns the bytes to unreserve.
uint64_t MaybeFreeHandleLocked(AllocEntry* h, int* dev) {
  if (h->refs != 0 || h->maps != 0) return 0;
  AllocEntry gone;
  *dev = h->dev;
  Table().Remove(AllocKind::kVmmHandle, h->key, &gone);
  return gone.bytes;
}

}  // namespace

GPUSHARE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  GPUSHARE_GET_REAL(cuMemCreate);
  Target t;
  // The device comes from the properties, not from a current context (worker threads of
  // PyTorch's expandable segments have none: HAMi-core PR #172).
  if (!Active() || handle == nullptr || prop == nullptr || size == 0 ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !TargetForOrdinal(prop->location.id, &t))
    return real(handle, size, prop, flags);
  uint64_t fp = RoundUp(size, t.info->granularity);
  if (!Reserve(t.dev(), fp, "cuMemCreate")) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = real(handle, size, prop, flags);
  if (r != CUDA_SUCCESS) {
    Unreserve(t.dev(), fp);
    return r;
  }
  AllocEntry e;
  e.key = *handle;
  e.kind = AllocKind::kVmmHandle;
  e.dev = t.dev();
  e.bytes = fp;
  e.refs = 1;
  Track(e);
  return r;
}

GPUSHARE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  GPUSHARE_GET_REAL(cuMemRelease);
  CUresult r = real(handle);
  if (r != CUDA_SUCCESS || !Active()) return r;
  LockLocal();
  uint64_t bytes = 0;
  int dev = -1;
  if (AllocEntry* h = Table().Find(AllocKind::kVmmHandle, handle)) {
    if (h->refs > 0) --h->refs;
    bytes = MaybeFreeHandleLocked(h, &dev);
  }
  UnlockLocal();
  Unreserve(dev, bytes);
  return r;
}

GPUSHARE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                  CUmemGenericAllocationHandle handle, unsigned long long flags) {
  GPUSHARE_GET_REAL(cuMemMap);
  CUresult r = real(ptr, size, offset, handle, flags);
  if (r != CUDA_SUCCESS || !Active()) return r;
  int charge_dev = -1;
  uint64_t charge = 0;
  LockLocal();
  if (AllocEntry* h = Table().Find(AllocKind::kVmmHandle, handle)) {
    ++h->maps;
    if (h->aux == 1 && h->bytes == 0 && h->dev >= 0) {  // counted import: charged at first map
      h->bytes = size;
      charge = size;
      charge_dev = h->dev;
    }
    AllocEntry m;
    m.key = ptr;
    m.kind = AllocKind::kVmmMapping;
    m.aux = handle;
    m.bytes = size;
    Table().Put(m);
  }
  UnlockLocal();
  ForceCharge(charge_dev, charge);
  return r;
}

GPUSHARE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  GPUSHARE_GET_REAL(cuMemUnmap);
  CUresult r = real(ptr, size);
  if (r != CUDA_SUCCESS || !Active()) return r;
  uint64_t release[kMaxDevices] = {};
  LockLocal();
  // The range may cover several consecutive mappings.
  CUdeviceptr at = ptr;
  CUdeviceptr end = ptr + size;
  while (at < end) {
    AllocEntry m;
    if (!Table().Remove(AllocKind::kVmmMapping, at, &m) || m.bytes == 0) break;
    if (AllocEntry* h = Table().Find(AllocKind::kVmmHandle, m.aux)) {
      if (h->maps > 0) --h->maps;
      int dev = -1;
      uint64_t bytes = MaybeFreeHandleLocked(h, &dev);
      if (dev >= 0 && dev < kMaxDevices) release[dev] = SatAdd(release[dev], bytes);
    }
    at += m.bytes;
  }
  UnlockLocal();
  for (int d = 0; d < kMaxDevices; ++d) Unreserve(d, release[d]);
  return r;
}

GPUSHARE_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  GPUSHARE_GET_REAL(cuMemRetainAllocationHandle);
  CUresult r = real(handle, addr);
  if (r != CUDA_SUCCESS || handle == nullptr || !Active()) return r;
  LockLocal();
  if (AllocEntry* h = Table().Find(AllocKind::kVmmHandle, *handle)) ++h->refs;
  UnlockLocal();
  return r;
}

GPUSHARE_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                        void* os_handle, int type) {
  GPUSHARE_GET_REAL(cuMemImportFromShareableHandle);
  CUresult r = real(handle, os_handle, type);
  if (r != CUDA_SUCCESS || handle == nullptr || !Active()) return r;
  // Track the handle so its refs/maps stay right; charge it only under ipc_imports=count
  // (the exporter's container already counts it), at its first mapping (its size is known then).
  AllocEntry e;
  e.key = *handle;
  e.kind = AllocKind::kVmmHandle;
  e.refs = 1;
  e.dev = -1;
  if (GetConfig().ipc_imports == ImportPolicy::kCount) {
    auto props = Real<CUresult (*)(CUmemAllocationProp*, CUmemGenericAllocationHandle)>(
        kFn_cuMemGetAllocationPropertiesFromHandle);
    CUmemAllocationProp p;
    memset(&p, 0, sizeof(p));
    Target t;
    if (props != nullptr && props(&p, *handle) == CUDA_SUCCESS &&
        p.location.type == CU_MEM_LOCATION_TYPE_DEVICE && TargetForOrdinal(p.location.id, &t) &&
        t.dev() >= 0) {
      e.dev = t.dev();
      e.aux = 1;  // counted import
    }
  }
  Track(e);
  return r;
}

// ---- IPC and external memory -------------------------------------------------------------------------

namespace {

template <typename Fn>
CUresult OpenIpc(Fn real, CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  CUresult r = real(pdptr, handle, flags);
  if (r != CUDA_SUCCESS || pdptr == nullptr || !Active() ||
      GetConfig().ipc_imports != ImportPolicy::kCount)
    return r;
  Target t;
  auto range = Real<CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr)>(kFn_cuMemGetAddressRange_v2);
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!CurrentTarget(&t) || range == nullptr || range(&base, &size, *pdptr) != CUDA_SUCCESS) return r;
  uint64_t fp = LinearFootprint(size, t.info->granularity);
  if (!Reserve(t.dev(), fp, "cuIpcOpenMemHandle")) {
    if (auto close_fn = GPUSHARE_REAL(cuIpcCloseMemHandle)) close_fn(*pdptr);
    *pdptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  TrackCharged(*pdptr, AllocKind::kIpc, t, fp);
  return r;
}

}  // namespace

GPUSHARE_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                            unsigned int flags) {
  GPUSHARE_GET_REAL(cuIpcOpenMemHandle);
  return OpenIpc(real, pdptr, handle, flags);
}

GPUSHARE_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                               unsigned int flags) {
  GPUSHARE_GET_REAL(cuIpcOpenMemHandle_v2);
  return OpenIpc(real, pdptr, handle, flags);
}

GPUSHARE_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  GPUSHARE_GET_REAL(cuIpcCloseMemHandle);
  if (!Active()) return real(dptr);
  AllocEntry e;
  bool had = Untrack(AllocKind::kIpc, dptr, &e);
  CUresult r = real(dptr);
  FinishFree(r, had, e);
  return r;
}

GPUSHARE_EXPORT CUresult cuImportExternalMemory(CUexternalMemory* out,
                                                const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* desc) {
  GPUSHARE_GET_REAL(cuImportExternalMemory);
  Target t;
  if (!Active() || out == nullptr || desc == nullptr ||
      GetConfig().external_memory != ImportPolicy::kCount || !CurrentTarget(&t))
    return real(out, desc);
  uint64_t fp = LinearFootprint(desc->size, t.info->granularity);
  if (!Reserve(t.dev(), fp, "cuImportExternalMemory")) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = real(out, desc);
  if (r != CUDA_SUCCESS) {
    Unreserve(t.dev(), fp);
    return r;
  }
  TrackCharged(reinterpret_cast<uint64_t>(*out), AllocKind::kExternal, t, fp);
  return r;
}

GPUSHARE_EXPORT CUresult cuDestroyExternalMemory(CUexternalMemory ext) {
  GPUSHARE_GET_REAL(cuDestroyExternalMemory);
  return DestroyTracked(real, ext, AllocKind::kExternal);
}

// ---- contexts --------------------------------------------------------------------------------------

GPUSHARE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  GPUSHARE_GET_REAL(cuDevicePrimaryCtxRetain);
  CUresult r = real(pctx, dev);
  if (r == CUDA_SUCCESS && pctx != nullptr && Active() && PrimaryRetain(dev, *pctx) == 1)
    OnContextCreated(*pctx, dev, true);
  return r;
}

namespace {
template <typename Fn>
CUresult ReleasePrimary(Fn real, CUdevice dev) {
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS && Active()) {
    CUcontext ctx = PrimaryContextOf(dev);
    if (PrimaryRelease(dev) == 0 && ctx != nullptr) OnContextDestroyed(ctx, true);
  }
  return r;
}
template <typename Fn>
CUresult ResetPrimary(Fn real, CUdevice dev) {
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS && Active()) {
    CUcontext ctx = PrimaryContextOf(dev);
    // Every allocation of the primary context is gone; the context itself stays retained.
    if (ctx != nullptr) OnContextDestroyed(ctx, false);
  }
  return r;
}
}  // namespace

GPUSHARE_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  GPUSHARE_GET_REAL(cuDevicePrimaryCtxRelease);
  return ReleasePrimary(real, dev);
}
GPUSHARE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  GPUSHARE_GET_REAL(cuDevicePrimaryCtxRelease_v2);
  return ReleasePrimary(real, dev);
}
GPUSHARE_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  GPUSHARE_GET_REAL(cuDevicePrimaryCtxReset);
  return ResetPrimary(real, dev);
}
GPUSHARE_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  GPUSHARE_GET_REAL(cuDevicePrimaryCtxReset_v2);
  return ResetPrimary(real, dev);
}

#define GPUSHARE_CTX_CREATE_BODY(call, pctx, dev)                                   \
  CUresult r = call;                                                                \
  if (r == CUDA_SUCCESS && (pctx) != nullptr && Active()) OnContextCreated(*(pctx), dev, false); \
  return r

GPUSHARE_EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  GPUSHARE_GET_REAL(cuCtxCreate);
  GPUSHARE_CTX_CREATE_BODY(real(pctx, flags, dev), pctx, dev);
}
GPUSHARE_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  GPUSHARE_GET_REAL(cuCtxCreate_v2);
  GPUSHARE_CTX_CREATE_BODY(real(pctx, flags, dev), pctx, dev);
}
GPUSHARE_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int n,
                                        unsigned int flags, CUdevice dev) {
  GPUSHARE_GET_REAL(cuCtxCreate_v3);
  GPUSHARE_CTX_CREATE_BODY(real(pctx, params, n, flags, dev), pctx, dev);
}
GPUSHARE_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params,
                                        unsigned int flags, CUdevice dev) {
  GPUSHARE_GET_REAL(cuCtxCreate_v4);
  GPUSHARE_CTX_CREATE_BODY(real(pctx, params, flags, dev), pctx, dev);
}

GPUSHARE_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  GPUSHARE_GET_REAL(cuCtxDestroy);
  CUresult r = real(ctx);
  if (r == CUDA_SUCCESS && Active()) OnContextDestroyed(ctx, true);
  return r;
}
GPUSHARE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  GPUSHARE_GET_REAL(cuCtxDestroy_v2);
  CUresult r = real(ctx);
  if (r == CUDA_SUCCESS && Active()) OnContextDestroyed(ctx, true);
  return r;
}

// ---- graph memory ----------------------------------------------------------------------------------

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

// ---- queries ---------------------------------------------------------------------------------------

GPUSHARE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  GPUSHARE_GET_REAL(cuMemGetInfo_v2);
  CUresult r = real(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS || free_bytes == nullptr || total_bytes == nullptr || !Active()) return r;
  CUcontext ctx = nullptr;
  int ordinal = -1;
  if (!CurrentContext(&ctx, &ordinal)) return r;
  uint64_t f = *free_bytes, t = *total_bytes;
  if (ClampInfo(Ordinal(ordinal), &f, &t)) {
    *free_bytes = static_cast<size_t>(f);
    *total_bytes = static_cast<size_t>(t);
  }
  return r;
}

GPUSHARE_EXPORT CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) {
  GPUSHARE_GET_REAL(cuMemGetInfo);
  CUresult r = real(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS || free_bytes == nullptr || total_bytes == nullptr || !Active()) return r;
  CUcontext ctx = nullptr;
  int ordinal = -1;
  if (!CurrentContext(&ctx, &ordinal)) return r;
  uint64_t f = *free_bytes, t = *total_bytes;
  if (ClampInfo(Ordinal(ordinal), &f, &t)) {
    *free_bytes = static_cast<unsigned int>(Min(f, 0xffffffffu));
    *total_bytes = static_cast<unsigned int>(Min(t, 0xffffffffu));
  }
  return r;
}

GPUSHARE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  GPUSHARE_GET_REAL(cuDeviceTotalMem_v2);
  CUresult r = real(bytes, dev);
  if (r != CUDA_SUCCESS || bytes == nullptr || !Active()) return r;
  const OrdinalInfo* o = Ordinal(dev);
  if (MemoryAccounted(o)) *bytes = static_cast<size_t>(Min(*bytes, o->limit));
  return r;
}

GPUSHARE_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  GPUSHARE_GET_REAL(cuDeviceTotalMem);
  CUresult r = real(bytes, dev);
  if (r != CUDA_SUCCESS || bytes == nullptr || !Active()) return r;
  const OrdinalInfo* o = Ordinal(dev);
  if (MemoryAccounted(o)) *bytes = static_cast<unsigned int>(Min(*bytes, o->limit));
  return r;
}
