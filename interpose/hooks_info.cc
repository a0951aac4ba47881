// The memory queries: cuMemGetInfo and cuDeviceTotalMem report the container's limit and use on
// a limited device.
#include "interpose/hooks_memory.h"

namespace gpushare::interpose {
namespace {

// Rewrites (free, total) for a limited device: total = min(limit, physical), free =
// min(total - container usage, physical free). Never negative, never an error.
bool ClampInfo(const OrdinalInfo* o, uint64_t* free_bytes, uint64_t* total_bytes) {
  if (!MemoryAccounted(o)) return false;
  if (RegionUnusable(o)) {
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

// cuMemGetInfo in both ABIs, after the driver answered `r`: the current context's device
// clamped (and, for the 32-bit ABI, saturated to what the type holds).
template <typename Size>
CUresult MemGetInfo(CUresult r, Size* free_bytes, Size* total_bytes) {
  if (r != CUDA_SUCCESS || free_bytes == nullptr || total_bytes == nullptr || !Active()) return r;
  CUcontext ctx = nullptr;
  int ordinal = -1;
  if (!CurrentContext(&ctx, &ordinal)) return r;
  uint64_t f = *free_bytes, t = *total_bytes;
  if (ClampInfo(Ordinal(ordinal), &f, &t)) {
    constexpr uint64_t kMax = static_cast<Size>(~Size{0});
    *free_bytes = static_cast<Size>(Min(f, kMax));
    *total_bytes = static_cast<Size>(Min(t, kMax));
  }
  return r;
}

}  // namespace
}  // namespace gpushare::interpose

using namespace gpushare::interpose;  // NOLINT

GPUSHARE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  GPUSHARE_GET_REAL(cuMemGetInfo_v2);
  return MemGetInfo(real(free_bytes, total_bytes), free_bytes, total_bytes);
}

GPUSHARE_EXPORT CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) {
  GPUSHARE_GET_REAL(cuMemGetInfo);
  return MemGetInfo(real(free_bytes, total_bytes), free_bytes, total_bytes);
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
