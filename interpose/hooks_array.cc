// CUDA arrays and mipmapped arrays: reserved on a block-linear estimate, settled on the size
// the driver reports for the created array.
#include "interpose/hooks_memory.h"

namespace gpushare::interpose {
namespace {

constexpr unsigned int kArraySparse = 0x40;           // CUDA_ARRAY3D_SPARSE
constexpr unsigned int kArrayDeferredMapping = 0x80;  // CUDA_ARRAY3D_DEFERRED_MAPPING

// The footprint reserved before an array is created: its block-linear tiling bound (rows padded
// to 512 B, height to 32 rows, the whole to 64 KiB). Settled afterwards on the size
// cuArrayGetMemoryRequirements reports.
uint64_t ArrayEstimate(uint64_t w, uint64_t h, uint64_t d, int format, unsigned int channels) {
  uint64_t row = RoundUp(SatMul(w == 0 ? 1 : w, ArrayElementBytes(format, channels)), 512);
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

// cuArrayCreate / cuArray3DCreate in both ABIs (the descriptor types differ, the policy not).
template <typename Fn, typename Desc>
CUresult CreateArray(Fn real, CUarray* handle, const Desc* desc, uint64_t depth, unsigned int flags,
                     const char* api) {
  if (!Active() || desc == nullptr) return real(handle, desc);
  return CreateArrayLike(
      [&] { return real(handle, desc); },
      Real<CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUarray, CUdevice)>(
          kFn_cuArrayGetMemoryRequirements),
      GPUSHARE_REAL(cuArrayDestroy), handle,
      ArrayEstimate(desc->Width, desc->Height, depth, desc->Format, desc->NumChannels),
      (flags & (kArraySparse | kArrayDeferredMapping)) != 0, AllocKind::kArray, api);
}

}  // namespace
}  // namespace gpushare::interpose

using namespace gpushare::interpose;  // NOLINT

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
  return CreateArray(real, handle, desc, desc != nullptr ? desc->Depth : 1,
                     desc != nullptr ? desc->Flags : 0, "cuArray3DCreate");
}

GPUSHARE_EXPORT CUresult cuArray3DCreate(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  GPUSHARE_GET_REAL(cuArray3DCreate);
  return CreateArray(real, handle, desc, desc != nullptr ? desc->Depth : 1,
                     desc != nullptr ? desc->Flags : 0, "cuArray3DCreate");
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
  return CreateArrayLike(
      [&] { return real(handle, desc, levels); },
      Real<CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUmipmappedArray, CUdevice)>(
          kFn_cuMipmappedArrayGetMemoryRequirements),
      GPUSHARE_REAL(cuMipmappedArrayDestroy), handle, estimate,
      (desc->Flags & (kArraySparse | kArrayDeferredMapping)) != 0, AllocKind::kMipmapped,
      "cuMipmappedArrayCreate", true);
}

GPUSHARE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) {
  GPUSHARE_GET_REAL(cuMipmappedArrayDestroy);
  return DestroyTracked(real, h, AllocKind::kMipmapped);
}
