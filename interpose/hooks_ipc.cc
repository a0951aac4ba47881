// Memory from other processes: CUDA IPC handles and external memory, charged by policy
// (ipc_imports, external_memory).
#include "interpose/hooks_memory.h"

namespace gpushare::interpose {
namespace {

template <typename Fn>
CUresult OpenIpc(Fn real, CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  CUresult r = real(pdptr, handle, flags);
  if (r != CUDA_SUCCESS || pdptr == nullptr || !Active() ||
      GetConfig().ipc_imports != ImportPolicy::kCount)
    return r;
  Target t;
  uint64_t fp = 0;
  if (!ImportedFootprint(*pdptr, &t, &fp)) return r;
  if (!Reserve(t.dev(), fp, "cuIpcOpenMemHandle")) {
    if (auto close_fn = GPUSHARE_REAL(cuIpcCloseMemHandle)) close_fn(*pdptr);
    *pdptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  TrackCharged(*pdptr, AllocKind::kIpc, t, fp);
  return r;
}

}  // namespace
}  // namespace gpushare::interpose

using namespace gpushare::interpose;  // NOLINT

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
