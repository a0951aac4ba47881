// Contexts: their creation and destruction, so that allocations are released with the context
// that owned them.
#include "interpose/hooks_memory.h"

using namespace gpushare::interpose;  // NOLINT

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

#define GPUSHARE_CTX_CREATE_BODY(call, pctx, dev)                                                \
  CUresult r = call;                                                                             \
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
