// hooks.h: every driver and NVML function libgpushare-cuda.so replaces, and the driver functions
// it calls itself.
//
// A hook is identified by the driver's *exported* symbol name, which names one ABI:
// `cuMemAlloc` is the 32-bit CUDA 2.0 ABI, `cuMemAlloc_v2` the current one, `cuLaunchKernel_ptsz`
// the per-thread-default-stream variant. The library exports a wrapper under each of these names
// (so programs linked with -lcuda bind to it), returns it from dlsym(handle, name) when the
// pointer came from the driver, and from cuGetProcAddress when the request selects that ABI
// (entry_points.h). Each wrapper forwards to the driver's function of the same ABI. Nothing is
// returned for an ABI this list does not name: those callers get the driver's own pointer.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "interpose/cuda_abi.h"
#include "interpose/nvml_abi.h"

// Exported wrappers (C ABI). X(name) for each. The lists keep one API area per line, so
// clang-format leaves them alone.
// clang-format off
#define GPUSHARE_CUDA_HOOKS(X)                                                                    \
  X(cuGetProcAddress) X(cuGetProcAddress_v2)                                                    \
  X(cuMemAlloc) X(cuMemAlloc_v2) X(cuMemAllocPitch) X(cuMemAllocPitch_v2) X(cuMemFree)           \
  X(cuMemFree_v2) X(cuMemAllocManaged) X(cuMemGetInfo) X(cuMemGetInfo_v2) X(cuDeviceTotalMem)    \
  X(cuDeviceTotalMem_v2) X(cuArrayCreate) X(cuArrayCreate_v2) X(cuArray3DCreate)                 \
  X(cuArray3DCreate_v2) X(cuArrayDestroy) X(cuMipmappedArrayCreate) X(cuMipmappedArrayDestroy)    \
  X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemAllocFromPoolAsync)                          \
  X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) X(cuMemPoolCreate)     \
  X(cuMemPoolDestroy) X(cuMemPoolTrimTo) X(cuDeviceGetDefaultMemPool) X(cuDeviceGetMemPool)      \
  X(cuDeviceSetMemPool) X(cuMemPoolImportPointer) X(cuStreamSynchronize)                         \
  X(cuStreamSynchronize_ptsz) X(cuCtxSynchronize) X(cuCtxSynchronize_v2) X(cuEventSynchronize)   \
  X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemRetainAllocationHandle)        \
  X(cuMemImportFromShareableHandle) X(cuIpcOpenMemHandle) X(cuIpcOpenMemHandle_v2)               \
  X(cuIpcCloseMemHandle) X(cuImportExternalMemory) X(cuDestroyExternalMemory)                    \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxRelease_v2)       \
  X(cuDevicePrimaryCtxReset) X(cuDevicePrimaryCtxReset_v2) X(cuCtxCreate) X(cuCtxCreate_v2)      \
  X(cuCtxCreate_v3) X(cuCtxCreate_v4) X(cuCtxDestroy) X(cuCtxDestroy_v2) X(cuLaunchKernel)       \
  X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz)                            \
  X(cuLaunchCooperativeKernel) X(cuLaunchCooperativeKernel_ptsz) X(cuGraphLaunch)                \
  X(cuGraphLaunch_ptsz) X(cuGraphAddMemAllocNode) X(cuDeviceGraphMemTrim)

#define GPUSHARE_NVML_HOOKS(X) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)

namespace gpushare::interpose {

using namespace gpushare::cuda;  // NOLINT: the ABI names are the vocabulary of these files
using nvml::nvmlDevice_t;
using nvml::nvmlMemory_t;
using nvml::nvmlMemory_v2_t;
using nvml::nvmlReturn_t;

struct CUexecAffinityParam;
struct CUctxCreateParams;
struct CUmemPoolPtrExportData;

// Driver functions the library calls but does not replace. X(name, pointer type).
#define GPUSHARE_CUDA_INTERNAL(X)                                                                 \
  X(cuCtxGetCurrent, CUresult (*)(CUcontext*))                                                   \
  X(cuCtxGetDevice, CUresult (*)(CUdevice*))                                                     \
  X(cuDeviceGetUuid, CUresult (*)(CUuuid*, CUdevice))                                            \
  X(cuDeviceGetUuid_v2, CUresult (*)(CUuuid*, CUdevice))                                         \
  X(cuMemGetAllocationGranularity, CUresult (*)(size_t*, const CUmemAllocationProp*, int))       \
  X(cuPointerGetAttribute, CUresult (*)(void*, int, CUdeviceptr))                                \
  X(cuMemPoolGetAttribute, CUresult (*)(CUmemoryPool, int, void*))                               \
  X(cuArrayGetMemoryRequirements, CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUarray, CUdevice)) \
  X(cuMipmappedArrayGetMemoryRequirements,                                                       \
    CUresult (*)(CUDA_ARRAY_MEMORY_REQUIREMENTS*, CUmipmappedArray, CUdevice))                   \
  X(cuMemGetAddressRange_v2, CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr))                   \
  X(cuMemGetAllocationPropertiesFromHandle,                                                      \
    CUresult (*)(CUmemAllocationProp*, CUmemGenericAllocationHandle))                            \
  X(cuDeviceGetGraphMemAttribute, CUresult (*)(CUdevice, int, void*))                            \
  X(cuEventCreate, CUresult (*)(CUevent*, unsigned int))                                         \
  X(cuEventRecord, CUresult (*)(CUevent, CUstream))                                              \
  X(cuEventRecord_ptsz, CUresult (*)(CUevent, CUstream))                                         \
  X(cuEventQuery, CUresult (*)(CUevent))                                                         \
  X(cuEventElapsedTime, CUresult (*)(float*, CUevent, CUevent))                                  \
  X(cuEventElapsedTime_v2, CUresult (*)(float*, CUevent, CUevent))                               \
  X(cuStreamIsCapturing, CUresult (*)(CUstream, int*))                                           \
  X(cuStreamIsCapturing_ptsz, CUresult (*)(CUstream, int*))

#define GPUSHARE_NVML_INTERNAL(X)                                                                 \
  X(nvmlDeviceGetUUID, nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int))                      \
  X(nvmlDeviceGetIndex, nvmlReturn_t (*)(nvmlDevice_t, unsigned int*))                           \
  X(nvmlInit_v2, nvmlReturn_t (*)(void))                                                         \
  X(nvmlDeviceGetHandleByUUID, nvmlReturn_t (*)(const char*, nvmlDevice_t*))
// clang-format on

enum FnId : int {
#define GPUSHARE_ID(name) kFn_##name,
#define GPUSHARE_ID2(name, type) kFn_##name,
  GPUSHARE_CUDA_HOOKS(GPUSHARE_ID) kFirstNvmlHook,
  kNvmlHookBase = kFirstNvmlHook - 1,
  GPUSHARE_NVML_HOOKS(GPUSHARE_ID) kHookCount,
  kInternalBase = kHookCount - 1,
  GPUSHARE_CUDA_INTERNAL(GPUSHARE_ID2) kFirstNvmlInternal,
  kNvmlInternalBase = kFirstNvmlInternal - 1,
  GPUSHARE_NVML_INTERNAL(GPUSHARE_ID2) kFnCount
#undef GPUSHARE_ID
#undef GPUSHARE_ID2
};

// The exported name of a function id, and its wrapper (hooks only; nullptr for internal ones).
const char* FnName(int id);
void* HookWrapper(int id);
// The hook whose exported name is `name`, or -1.
int HookByName(const char* name);
bool IsNvmlFn(int id);

}  // namespace gpushare::interpose

// The wrappers' prototypes, with the driver's ABI for each exported name.
extern "C" {
using gpushare::cuda::CUresult;
namespace gc = gpushare::cuda;
namespace gi = gpushare::interpose;
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, gc::cuuint64_t flags);
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, gc::cuuint64_t flags,
                             gc::CUdriverProcAddressQueryResult* symbolStatus);
CUresult cuMemAlloc(unsigned int* dptr, unsigned int bytesize);
CUresult cuMemAlloc_v2(gc::CUdeviceptr* dptr, size_t bytesize);
CUresult cuMemAllocPitch(unsigned int* dptr, unsigned int* pPitch, unsigned int WidthInBytes,
                         unsigned int Height, unsigned int ElementSizeBytes);
CUresult cuMemAllocPitch_v2(gc::CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                            size_t Height, unsigned int ElementSizeBytes);
CUresult cuMemFree(unsigned int dptr);
CUresult cuMemFree_v2(gc::CUdeviceptr dptr);
CUresult cuMemAllocManaged(gc::CUdeviceptr* dptr, size_t bytesize, unsigned int flags);
CUresult cuMemGetInfo(unsigned int* free, unsigned int* total);
CUresult cuMemGetInfo_v2(size_t* free, size_t* total);
CUresult cuDeviceTotalMem(unsigned int* bytes, gc::CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t* bytes, gc::CUdevice dev);
CUresult cuArrayCreate(gc::CUarray* pHandle, const gc::CUDA_ARRAY_DESCRIPTOR_v1* desc);
CUresult cuArrayCreate_v2(gc::CUarray* pHandle, const gc::CUDA_ARRAY_DESCRIPTOR* desc);
CUresult cuArray3DCreate(gc::CUarray* pHandle, const gc::CUDA_ARRAY3D_DESCRIPTOR_v1* desc);
CUresult cuArray3DCreate_v2(gc::CUarray* pHandle, const gc::CUDA_ARRAY3D_DESCRIPTOR* desc);
CUresult cuArrayDestroy(gc::CUarray hArray);
CUresult cuMipmappedArrayCreate(gc::CUmipmappedArray* pHandle,
                                const gc::CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int numMipmapLevels);
CUresult cuMipmappedArrayDestroy(gc::CUmipmappedArray hMipmappedArray);
CUresult cuMemAllocAsync(gc::CUdeviceptr* dptr, size_t bytesize, gc::CUstream hStream);
CUresult cuMemAllocAsync_ptsz(gc::CUdeviceptr* dptr, size_t bytesize, gc::CUstream hStream);
CUresult cuMemAllocFromPoolAsync(gc::CUdeviceptr* dptr, size_t bytesize, gc::CUmemoryPool pool,
                                 gc::CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(gc::CUdeviceptr* dptr, size_t bytesize, gc::CUmemoryPool pool,
                                      gc::CUstream hStream);
CUresult cuMemFreeAsync(gc::CUdeviceptr dptr, gc::CUstream hStream);
CUresult cuMemFreeAsync_ptsz(gc::CUdeviceptr dptr, gc::CUstream hStream);
CUresult cuMemPoolCreate(gc::CUmemoryPool* pool, const gc::CUmemPoolProps* poolProps);
CUresult cuMemPoolDestroy(gc::CUmemoryPool pool);
CUresult cuMemPoolTrimTo(gc::CUmemoryPool pool, size_t minBytesToKeep);
CUresult cuDeviceGetDefaultMemPool(gc::CUmemoryPool* pool_out, gc::CUdevice dev);
CUresult cuDeviceGetMemPool(gc::CUmemoryPool* pool, gc::CUdevice dev);
CUresult cuDeviceSetMemPool(gc::CUdevice dev, gc::CUmemoryPool pool);
CUresult cuMemPoolImportPointer(gc::CUdeviceptr* ptr_out, gc::CUmemoryPool pool,
                                gi::CUmemPoolPtrExportData* shareData);
CUresult cuStreamSynchronize(gc::CUstream hStream);
CUresult cuStreamSynchronize_ptsz(gc::CUstream hStream);
CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize_v2(gc::CUcontext ctx);
CUresult cuEventSynchronize(gc::CUevent hEvent);
CUresult cuMemCreate(gc::CUmemGenericAllocationHandle* handle, size_t size,
                     const gc::CUmemAllocationProp* prop, unsigned long long flags);
CUresult cuMemRelease(gc::CUmemGenericAllocationHandle handle);
CUresult cuMemMap(gc::CUdeviceptr ptr, size_t size, size_t offset,
                  gc::CUmemGenericAllocationHandle handle, unsigned long long flags);
CUresult cuMemUnmap(gc::CUdeviceptr ptr, size_t size);
CUresult cuMemRetainAllocationHandle(gc::CUmemGenericAllocationHandle* handle, void* addr);
CUresult cuMemImportFromShareableHandle(gc::CUmemGenericAllocationHandle* handle, void* osHandle,
                                        int shHandleType);
CUresult cuIpcOpenMemHandle(gc::CUdeviceptr* pdptr, gc::CUipcMemHandle handle, unsigned int Flags);
CUresult cuIpcOpenMemHandle_v2(gc::CUdeviceptr* pdptr, gc::CUipcMemHandle handle,
                               unsigned int Flags);
CUresult cuIpcCloseMemHandle(gc::CUdeviceptr dptr);
CUresult cuImportExternalMemory(gc::CUexternalMemory* extMem_out,
                                const gc::CUDA_EXTERNAL_MEMORY_HANDLE_DESC* memHandleDesc);
CUresult cuDestroyExternalMemory(gc::CUexternalMemory extMem);
CUresult cuDevicePrimaryCtxRetain(gc::CUcontext* pctx, gc::CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(gc::CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(gc::CUdevice dev);
CUresult cuDevicePrimaryCtxReset(gc::CUdevice dev);
CUresult cuDevicePrimaryCtxReset_v2(gc::CUdevice dev);
CUresult cuCtxCreate(gc::CUcontext* pctx, unsigned int flags, gc::CUdevice dev);
CUresult cuCtxCreate_v2(gc::CUcontext* pctx, unsigned int flags, gc::CUdevice dev);
CUresult cuCtxCreate_v3(gc::CUcontext* pctx, gi::CUexecAffinityParam* paramsArray, int numParams,
                        unsigned int flags, gc::CUdevice dev);
CUresult cuCtxCreate_v4(gc::CUcontext* pctx, gi::CUctxCreateParams* ctxCreateParams,
                        unsigned int flags, gc::CUdevice dev);
CUresult cuCtxDestroy(gc::CUcontext ctx);
CUresult cuCtxDestroy_v2(gc::CUcontext ctx);
CUresult cuLaunchKernel(gc::CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, gc::CUstream hStream,
                        void** kernelParams, void** extra);
CUresult cuLaunchKernel_ptsz(gc::CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes,
                             gc::CUstream hStream, void** kernelParams, void** extra);
CUresult cuLaunchKernelEx(const gc::CUlaunchConfig* config, gc::CUfunction f, void** kernelParams,
                          void** extra);
CUresult cuLaunchKernelEx_ptsz(const gc::CUlaunchConfig* config, gc::CUfunction f,
                               void** kernelParams, void** extra);
CUresult cuLaunchCooperativeKernel(gc::CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, gc::CUstream hStream,
                                   void** kernelParams);
CUresult cuLaunchCooperativeKernel_ptsz(gc::CUfunction f, unsigned int gridDimX,
                                        unsigned int gridDimY, unsigned int gridDimZ,
                                        unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                                        gc::CUstream hStream, void** kernelParams);
CUresult cuGraphLaunch(gc::CUgraphExec hGraphExec, gc::CUstream hStream);
CUresult cuGraphLaunch_ptsz(gc::CUgraphExec hGraphExec, gc::CUstream hStream);
CUresult cuGraphAddMemAllocNode(gc::CUgraphNode* phGraphNode, gc::CUgraph hGraph,
                                const gc::CUgraphNode* dependencies, size_t numDependencies,
                                gc::CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams);
CUresult cuDeviceGraphMemTrim(gc::CUdevice device);

gpushare::nvml::nvmlReturn_t nvmlDeviceGetMemoryInfo(gpushare::nvml::nvmlDevice_t device,
                                                     gpushare::nvml::nvmlMemory_t* memory);
gpushare::nvml::nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(gpushare::nvml::nvmlDevice_t device,
                                                        gpushare::nvml::nvmlMemory_v2_t* memory);
}  // extern "C"
