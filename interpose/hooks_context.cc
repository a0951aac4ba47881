// Contexts: their creation and destruction, so that allocations are released with the context
// that owned them.
#include "interpose/hooks_memory.h"

using namespace gpushare::interpose;  // NOLINT

GPUSHARE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  GPUSHARE_GET_REAL(cuDevicePrimaryCtxRetain);
  ContextProbe probe;
  if (Active() && PrimaryRefs(dev) == 0 &&
      !BeginContextProbe(dev, &probe, "cuDevicePrimaryCtxRetain"))
    return CUDA_ERROR_OUT_OF_MEMORY;  // its context would not fit the limit
  CUresult r = real(pctx, dev);
  if (r == CUDA_SUCCESS && pctx != nullptr && Active() && PrimaryRetain(dev, *pctx) == 1)
    OnContextCreated(*pctx, dev, probe);
  else
    CancelContextProbe(probe);  // failed, or another thread's retain made it
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
// A cuCtxCreate: `create` calls the driver, which writes the new context to *pctx. The device's
// used memory is read around it (what the context costs).
template <typename Create>
CUresult Created(Create create, CUcontext* pctx, CUdevice dev) {
  ContextProbe probe;
  if (Active() && !BeginContextProbe(dev, &probe, "cuCtxCreate")) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = create();
  if (r == CUDA_SUCCESS && pctx != nullptr && Active())
    OnContextCreated(*pctx, dev, probe);
  else
    CancelContextProbe(probe);
  return r;
}
// `r`: the driver's answer to a cuCtxDestroy of `ctx`.
CUresult Destroyed(CUresult r, CUcontext ctx) {
  if (r == CUDA_SUCCESS && Active()) OnContextDestroyed(ctx, true);
  return r;
}
}  // namespace

GPUSHARE_HOOK(cuDevicePrimaryCtxRelease, (CUdevice dev), ReleasePrimary(real, dev))
GPUSHARE_HOOK(cuDevicePrimaryCtxRelease_v2, (CUdevice dev), ReleasePrimary(real, dev))
GPUSHARE_HOOK(cuDevicePrimaryCtxReset, (CUdevice dev), ResetPrimary(real, dev))
GPUSHARE_HOOK(cuDevicePrimaryCtxReset_v2, (CUdevice dev), ResetPrimary(real, dev))

// Unformatted: clang-format would read the parameter lists' `T* p` as products.
// clang-format off
GPUSHARE_HOOK(cuCtxCreate, (CUcontext* pctx, unsigned int flags, CUdevice dev),
              Created([&] { return real(pctx, flags, dev); }, pctx, dev))
GPUSHARE_HOOK(cuCtxCreate_v2, (CUcontext* pctx, unsigned int flags, CUdevice dev),
              Created([&] { return real(pctx, flags, dev); }, pctx, dev))
GPUSHARE_HOOK(cuCtxCreate_v3,
              (CUcontext* pctx, CUexecAffinityParam* params, int n, unsigned int flags,
               CUdevice dev),
              Created([&] { return real(pctx, params, n, flags, dev); }, pctx, dev))
GPUSHARE_HOOK(cuCtxCreate_v4,
              (CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev),
              Created([&] { return real(pctx, params, flags, dev); }, pctx, dev))
// clang-format on

GPUSHARE_HOOK(cuCtxDestroy, (CUcontext ctx), Destroyed(real(ctx), ctx))
GPUSHARE_HOOK(cuCtxDestroy_v2, (CUcontext ctx), Destroyed(real(ctx), ctx))
