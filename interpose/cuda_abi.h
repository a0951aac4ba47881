// cuda_abi.h: the subset of the CUDA driver ABI that libgpushare-cuda.so and the fake driver use.
//
// The build must not need the CUDA toolkit, so these declarations are written here from the
// CUDA 13.0 cuda.h (types, struct layouts, enum values: facts of the ABI, not NVIDIA's text).
// tests/interpose/cuda_abi_layout_test.cc compares every struct size, field offset and enum value
// with the real cuda.h whenever the toolkit is installed. Plain C-compatible declarations only:
// this header is included by code that is loaded into other people's processes.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace gpushare::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUmemGenericAllocationHandle = unsigned long long;
using cuuint64_t = uint64_t;

using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUfunction = struct CUfunc_st*;
using CUarray = struct CUarray_st*;
using CUmipmappedArray = struct CUmipmappedArray_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUevent = struct CUevent_st*;
using CUexternalMemory = struct CUextMemory_st*;

// CUresult values.
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;

// cuGetProcAddress flags and symbol status.
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2;
using CUdriverProcAddressQueryResult = int;
inline constexpr int CU_GET_PROC_ADDRESS_SUCCESS = 0;
inline constexpr int CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
inline constexpr int CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2;

struct CUuuid {
  char bytes[16];
};

// Device attributes used here.
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;

// Pointer attributes used here.
inline constexpr int CU_POINTER_ATTRIBUTE_CONTEXT = 1;
inline constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
inline constexpr int CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12;
inline constexpr int CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE = 17;

// Memory locations, allocation properties (VMM), pools.
inline constexpr int CU_MEM_LOCATION_TYPE_INVALID = 0;
inline constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
inline constexpr int CU_MEM_LOCATION_TYPE_HOST = 2;
inline constexpr int CU_MEM_ALLOCATION_TYPE_PINNED = 1;
inline constexpr int CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0;
inline constexpr int CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1;

struct CUmemLocation {
  int type;  // CUmemLocationType
  int id;
};

struct CUmemAllocationProp {
  int type;                  // CUmemAllocationType
  int requestedHandleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;  // CUmemAccess_flags
};

struct CUmemPoolProps {
  int allocType;    // CUmemAllocationType
  int handleTypes;  // CUmemAllocationHandleType
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};

// CUmemPool_attribute.
inline constexpr int CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1;
inline constexpr int CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2;
inline constexpr int CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3;
inline constexpr int CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;
inline constexpr int CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5;
inline constexpr int CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6;
inline constexpr int CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7;
inline constexpr int CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8;

// CUgraphMem_attribute.
inline constexpr int CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0;
inline constexpr int CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1;
inline constexpr int CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2;
inline constexpr int CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3;

struct CUDA_MEM_ALLOC_NODE_PARAMS {
  CUmemPoolProps poolProps;
  const CUmemAccessDesc* accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr;
};

// Arrays.
inline constexpr int CU_AD_FORMAT_UNSIGNED_INT8 = 0x01;
inline constexpr int CU_AD_FORMAT_UNSIGNED_INT16 = 0x02;
inline constexpr int CU_AD_FORMAT_UNSIGNED_INT32 = 0x03;
inline constexpr int CU_AD_FORMAT_SIGNED_INT8 = 0x08;
inline constexpr int CU_AD_FORMAT_SIGNED_INT16 = 0x09;
inline constexpr int CU_AD_FORMAT_SIGNED_INT32 = 0x0a;
inline constexpr int CU_AD_FORMAT_HALF = 0x10;
inline constexpr int CU_AD_FORMAT_FLOAT = 0x20;

// Bytes of one element of `format` with `channels` channels (0 counts as 1): 1 or 2 a channel
// for the 8- and 16-bit formats and half, else 4. Exact for the formats above; block-compressed,
// YUV and normalised formats have no one element size, and 4 is an estimate for them.
inline constexpr uint64_t ArrayElementBytes(int format, unsigned int channels) {
  uint64_t b = 4;
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      b = 1;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      b = 2;
      break;
    default:
      break;
  }
  return b * (channels == 0 ? 1 : channels);
}

struct CUDA_ARRAY_DESCRIPTOR {  // the _v2 layout (size_t extents)
  size_t Width;
  size_t Height;
  int Format;  // CUarray_format
  unsigned int NumChannels;
};

struct CUDA_ARRAY3D_DESCRIPTOR {  // the _v2 layout
  size_t Width;
  size_t Height;
  size_t Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
};

// The _v1 layouts (32-bit extents) of the CUDA 2.0 ABI, still exported as cuArrayCreate.
struct CUDA_ARRAY_DESCRIPTOR_v1 {
  unsigned int Width;
  unsigned int Height;
  int Format;
  unsigned int NumChannels;
};

struct CUDA_ARRAY3D_DESCRIPTOR_v1 {
  unsigned int Width;
  unsigned int Height;
  unsigned int Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
};

struct CUDA_ARRAY_MEMORY_REQUIREMENTS {
  size_t size;
  size_t alignment;
  unsigned int reserved[4];
};

// Launches.
struct CUlaunchAttribute;
struct CUlaunchConfig {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
};

// External memory and IPC.
inline constexpr int CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD = 1;
struct CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
  int type;  // CUexternalMemoryHandleType
  union {
    int fd;
    struct {
      void* handle;
      const void* name;
    } win32;
    const void* nvSciBufObject;
  } handle;
  unsigned long long size;
  unsigned int flags;
  unsigned int reserved[16];
};

struct CUipcMemHandle {
  char reserved[64];
};

inline constexpr unsigned int CU_MEM_ATTACH_GLOBAL = 0x1;
inline constexpr int CU_STREAM_CAPTURE_STATUS_NONE = 0;

inline constexpr unsigned int CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned int CU_EVENT_DISABLE_TIMING = 0x2;

}  // namespace gpushare::cuda
