// Virtual memory management: cuMemCreate / cuMemRelease, cuMemMap / cuMemUnmap, retained and
// imported handles. A handle's physical memory is charged from its creation until it is both
// released and unmapped.
#include "interpose/hooks_memory.h"

namespace gpushare::interpose {
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
}  // namespace gpushare::interpose

using namespace gpushare::interpose;  // NOLINT

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

GPUSHARE_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                     void* addr) {
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
