// Linear device memory: cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged and cuMemFree, in both
// ABIs. The footprint is reserved before the driver is called and recorded by pointer.
#include "interpose/hooks_memory.h"

namespace gpushare::interpose {
namespace {

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

}  // namespace
}  // namespace gpushare::interpose

using namespace gpushare::interpose;  // NOLINT

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
