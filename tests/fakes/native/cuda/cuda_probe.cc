// cuda-probe: drives the CUDA driver API from a script, the way real programs reach the driver.
//
//   cuda-probe-linked   calls the driver's exported symbols directly (a program linked -lcuda)
//   cuda-probe-dlopen   PROBE_MODE=dlsym   dlopen("libcuda.so.1") + dlsym(handle, "cuMemAlloc_v2")
//                       PROBE_MODE=runtime like the CUDA 12/13 runtime: dlsym only
//                       cuGetProcAddress_v2, fetch cuGetProcAddress@12000 through it, and get
//                       every function from that with (base name, version, flags)
//
// Commands come from argv (one per argument, words separated by spaces) or, with "-", from
// stdin, one per line. Every command prints one line: "<command> <CUresult> [values...]".
// Values that name objects (pointers, handles, pools) are printed and accepted in hex.
// Used by tests/interpose with the interposer preloaded; never sanitized.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "interpose/cuda_abi.h"
#include "tests/fakes/native/cuda/fake_cuda_control.h"

using namespace gpushare::cuda;  // NOLINT

// name, base name, version, flags: how each mode resolves a function.
#define PROBE_APIS(X)                                                         \
  X(cuInit, cuInit, 2000, 0)                                                  \
  X(cuDeviceGet, cuDeviceGet, 2000, 0)                                        \
  X(cuDeviceGetCount, cuDeviceGetCount, 2000, 0)                              \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0)              \
  X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, 0)        \
  X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, 0)            \
  X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0)                                \
  X(cuCtxCreate_v2, cuCtxCreate, 3020, 0)                                     \
  X(cuCtxDestroy_v2, cuCtxDestroy, 4000, 0)                                   \
  X(cuCtxSynchronize, cuCtxSynchronize, 2000, 0)                              \
  X(cuMemAlloc_v2, cuMemAlloc, 3020, 0)                                       \
  X(cuMemFree_v2, cuMemFree, 3020, 0)                                         \
  X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0)                             \
  X(cuMemAllocManaged, cuMemAllocManaged, 6000, 0)                            \
  X(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0)                                   \
  X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, 0)                           \
  X(cuArrayCreate_v2, cuArrayCreate, 3020, 0)                                 \
  X(cuArray3DCreate_v2, cuArray3DCreate, 3020, 0)                             \
  X(cuArrayDestroy, cuArrayDestroy, 2000, 0)                                  \
  X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, 0)                  \
  X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, 0)                \
  X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0)                               \
  X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 2)                          \
  X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0)                                 \
  X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 2)                            \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0)               \
  X(cuMemPoolCreate, cuMemPoolCreate, 11020, 0)                               \
  X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0)                             \
  X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0)                               \
  X(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020, 0)                   \
  X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, 0)                   \
  X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, 0)           \
  X(cuDeviceSetMemPool, cuDeviceSetMemPool, 11020, 0)                         \
  X(cuStreamSynchronize, cuStreamSynchronize, 2000, 0)                        \
  X(cuStreamCreate, cuStreamCreate, 2000, 0)                                  \
  X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, 0)                  \
  X(cuStreamEndCapture, cuStreamEndCapture, 10000, 0)                         \
  X(cuMemCreate, cuMemCreate, 10020, 0)                                       \
  X(cuMemRelease, cuMemRelease, 10020, 0)                                     \
  X(cuMemAddressReserve, cuMemAddressReserve, 10020, 0)                       \
  X(cuMemMap, cuMemMap, 10020, 0)                                             \
  X(cuMemUnmap, cuMemUnmap, 10020, 0)                                         \
  X(cuMemSetAccess, cuMemSetAccess, 10020, 0)                                 \
  X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0)       \
  X(cuMemExportToShareableHandle, cuMemExportToShareableHandle, 10020, 0)     \
  X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 10020, 0) \
  X(cuIpcGetMemHandle, cuIpcGetMemHandle, 4010, 0)                            \
  X(cuIpcOpenMemHandle_v2, cuIpcOpenMemHandle, 11000, 0)                      \
  X(cuIpcCloseMemHandle, cuIpcCloseMemHandle, 4010, 0)                        \
  X(cuImportExternalMemory, cuImportExternalMemory, 10000, 0)                 \
  X(cuDestroyExternalMemory, cuDestroyExternalMemory, 10000, 0)               \
  X(cuModuleGetFunction, cuModuleGetFunction, 2000, 0)                        \
  X(cuLaunchKernel, cuLaunchKernel, 4000, 0)                                  \
  X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, 2)                             \
  X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, 0)                             \
  X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, 2)                        \
  X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, 0)            \
  X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, 2)       \
  X(cuGraphCreate, cuGraphCreate, 10000, 0)                                   \
  X(cuGraphAddMemAllocNode, cuGraphAddMemAllocNode, 11040, 0)                 \
  X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0)       \
  X(cuGraphLaunch, cuGraphLaunch, 10000, 0)                                   \
  X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 2)                              \
  X(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 11040, 0)

#if defined(GPUSHARE_PROBE_LINKED)
extern "C" {
#define PROBE_DECL(name, base, version, flags) void name();
PROBE_APIS(PROBE_DECL)
#undef PROBE_DECL
}
#endif

namespace {

struct Api {
  const char* name;
  const char* base;
  int version;
  int flags;
  void* fn;
};
Api g_apis[] = {
#define PROBE_ROW(name, base, version, flags) {#name, #base, version, flags, nullptr},
    PROBE_APIS(PROBE_ROW)
#undef PROBE_ROW
};

using GetProcV2 = CUresult (*)(const char*, void**, int, cuuint64_t, int*);
using GetProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
void* g_driver = nullptr;
std::string g_mode;

void* Resolve(const char* name) {
  for (Api& a : g_apis)
    if (strcmp(a.name, name) == 0) return a.fn;
  fprintf(stderr, "probe: unknown api %s\n", name);
  exit(2);
}

template <typename F>
F Fn(const char* name) {
  return reinterpret_cast<F>(Resolve(name));
}
#define CALL(name, type) Fn<type>(#name)

void Setup() {
  const char* m = getenv("PROBE_MODE");
#if defined(GPUSHARE_PROBE_LINKED)
  g_mode = "linked";
  int i = 0;
#define PROBE_ADDR(name, base, version, flags) g_apis[i++].fn = reinterpret_cast<void*>(&name);
  PROBE_APIS(PROBE_ADDR)
#undef PROBE_ADDR
  g_driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  (void)m;
#else
  g_mode = m != nullptr ? m : "dlsym";
  g_driver = dlopen("libcuda.so.1", RTLD_NOW);
  if (g_driver == nullptr) {
    fprintf(stderr, "probe: dlopen libcuda.so.1: %s\n", dlerror());
    exit(2);
  }
  if (g_mode == "runtime") {
    auto gpa2 = reinterpret_cast<GetProcV2>(dlsym(g_driver, "cuGetProcAddress_v2"));
    void* p = nullptr;
    int status = 0;
    gpa2("cuGetProcAddress", &p, 12000, 0, &status);
    auto gpa = reinterpret_cast<GetProcV2>(p);
    for (Api& a : g_apis) gpa(a.base, &a.fn, 13000, static_cast<cuuint64_t>(a.flags), &status);
  } else {
    for (Api& a : g_apis) a.fn = dlsym(g_driver, a.name);
  }
#endif
}

template <typename T>
T Control(const char* name) {
  void* p = dlsym(RTLD_DEFAULT, name);
  if (p == nullptr && g_driver != nullptr) p = dlsym(g_driver, name);
  if (p == nullptr) {
    fprintf(stderr, "probe: no %s in the driver\n", name);
    exit(2);
  }
  return reinterpret_cast<T>(p);
}

uint64_t Num(const std::string& s) {
  return strtoull(s.c_str(), nullptr, 0);
}
std::string Hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// One launch through the requested variant.
CUresult LaunchVariant(const std::string& variant, CUfunction f, CUstream s) {
  using LK = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                          unsigned, CUstream, void**, void**);
  using LKEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
  using LCoop = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**);
  CUlaunchConfig cfg{};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = s;
  if (variant == "kernel")
    return CALL(cuLaunchKernel, LK)(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr);
  if (variant == "kernel_ptsz")
    return CALL(cuLaunchKernel_ptsz, LK)(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr);
  if (variant == "ex") return CALL(cuLaunchKernelEx, LKEx)(&cfg, f, nullptr, nullptr);
  if (variant == "ex_ptsz") return CALL(cuLaunchKernelEx_ptsz, LKEx)(&cfg, f, nullptr, nullptr);
  if (variant == "coop")
    return CALL(cuLaunchCooperativeKernel, LCoop)(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr);
  if (variant == "coop_ptsz")
    return CALL(cuLaunchCooperativeKernel_ptsz, LCoop)(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr);
  return CUDA_ERROR_INVALID_VALUE;
}

struct Barrier {
  pthread_barrier_t barrier;
};

Barrier* OpenBarrier(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) return nullptr;
  void* m = mmap(nullptr, sizeof(Barrier), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return m == MAP_FAILED ? nullptr : static_cast<Barrier*>(m);
}

// Executes one command; returns false to stop.
bool Run(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string t; in >> t;) w.push_back(t);
  if (w.empty()) return true;
  const std::string& c = w[0];
  auto arg = [&](size_t i) -> uint64_t { return i < w.size() ? Num(w[i]) : 0; };
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  std::string out;

  if (c == "init") {
    r = CALL(cuInit, CUresult(*)(unsigned))(0);
  } else if (c == "ctx") {  // retain the primary context of a device and make it current
    CUcontext ctx = nullptr;
    r = CALL(cuDevicePrimaryCtxRetain, CUresult(*)(CUcontext*, CUdevice))(&ctx,
                                                                          static_cast<int>(arg(1)));
    if (r == CUDA_SUCCESS) r = CALL(cuCtxSetCurrent, CUresult(*)(CUcontext))(ctx);
    out = Hex(reinterpret_cast<uint64_t>(ctx));
  } else if (c == "ctxrelease") {
    r = CALL(cuDevicePrimaryCtxRelease_v2, CUresult(*)(CUdevice))(static_cast<int>(arg(1)));
  } else if (c == "ctxreset") {
    r = CALL(cuDevicePrimaryCtxReset_v2, CUresult(*)(CUdevice))(static_cast<int>(arg(1)));
  } else if (c == "ctxcreate") {
    CUcontext ctx = nullptr;
    r = CALL(cuCtxCreate_v2, CUresult(*)(CUcontext*, unsigned, CUdevice))(&ctx, 0,
                                                                          static_cast<int>(arg(1)));
    out = Hex(reinterpret_cast<uint64_t>(ctx));
  } else if (c == "ctxdestroy") {
    r = CALL(cuCtxDestroy_v2, CUresult(*)(CUcontext))(reinterpret_cast<CUcontext>(arg(1)));
  } else if (c == "setctx") {
    r = CALL(cuCtxSetCurrent, CUresult(*)(CUcontext))(reinterpret_cast<CUcontext>(arg(1)));
  } else if (c == "alloc") {
    CUdeviceptr p = 0;
    r = CALL(cuMemAlloc_v2, CUresult(*)(CUdeviceptr*, size_t))(&p, arg(1));
    out = Hex(p);
  } else if (c == "free") {
    r = CALL(cuMemFree_v2, CUresult(*)(CUdeviceptr))(arg(1));
  } else if (c == "pitch") {
    CUdeviceptr p = 0;
    size_t pitch = 0;
    r = CALL(cuMemAllocPitch_v2, CUresult(*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned))(
        &p, &pitch, arg(1), arg(2), static_cast<unsigned>(arg(3)));
    out = Hex(p) + " " + std::to_string(pitch);
  } else if (c == "managed") {
    CUdeviceptr p = 0;
    r = CALL(cuMemAllocManaged, CUresult(*)(CUdeviceptr*, size_t, unsigned))(&p, arg(1),
                                                                             CU_MEM_ATTACH_GLOBAL);
    out = Hex(p);
  } else if (c == "array") {  // array <w> <h> <format> <channels>
    CUDA_ARRAY_DESCRIPTOR d{arg(1), arg(2), static_cast<int>(arg(3)),
                            static_cast<unsigned>(arg(4))};
    CUarray a = nullptr;
    r = CALL(cuArrayCreate_v2, CUresult(*)(CUarray*, const CUDA_ARRAY_DESCRIPTOR*))(&a, &d);
    out = Hex(reinterpret_cast<uint64_t>(a));
  } else if (c == "array3d") {  // array3d <w> <h> <d> <format> <channels> <flags>
    CUDA_ARRAY3D_DESCRIPTOR d{arg(1),
                              arg(2),
                              arg(3),
                              static_cast<int>(arg(4)),
                              static_cast<unsigned>(arg(5)),
                              static_cast<unsigned>(arg(6))};
    CUarray a = nullptr;
    r = CALL(cuArray3DCreate_v2, CUresult(*)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*))(&a, &d);
    out = Hex(reinterpret_cast<uint64_t>(a));
  } else if (c == "arrayfree") {
    r = CALL(cuArrayDestroy, CUresult(*)(CUarray))(reinterpret_cast<CUarray>(arg(1)));
  } else if (c == "mip") {  // mip <w> <h> <d> <levels>
    CUDA_ARRAY3D_DESCRIPTOR d{arg(1), arg(2), arg(3), CU_AD_FORMAT_FLOAT, 4, 0};
    CUmipmappedArray m = nullptr;
    r = CALL(cuMipmappedArrayCreate, CUresult(*)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*,
                                                 unsigned))(&m, &d, static_cast<unsigned>(arg(4)));
    out = Hex(reinterpret_cast<uint64_t>(m));
  } else if (c == "mipfree") {
    r = CALL(cuMipmappedArrayDestroy,
             CUresult(*)(CUmipmappedArray))(reinterpret_cast<CUmipmappedArray>(arg(1)));
  } else if (c == "async" || c == "async_ptsz") {
    CUdeviceptr p = 0;
    auto f = c == "async" ? CALL(cuMemAllocAsync, CUresult(*)(CUdeviceptr*, size_t, CUstream))
                          : CALL(cuMemAllocAsync_ptsz, CUresult(*)(CUdeviceptr*, size_t, CUstream));
    r = f(&p, arg(1), nullptr);
    out = Hex(p);
  } else if (c == "asyncfree" || c == "asyncfree_ptsz") {
    auto f = c == "asyncfree" ? CALL(cuMemFreeAsync, CUresult(*)(CUdeviceptr, CUstream))
                              : CALL(cuMemFreeAsync_ptsz, CUresult(*)(CUdeviceptr, CUstream));
    r = f(arg(1), nullptr);
  } else if (c == "poolcreate") {  // poolcreate <dev> [maxSize]
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = static_cast<int>(arg(1));
    props.maxSize = arg(2);
    CUmemoryPool pool = nullptr;
    r = CALL(cuMemPoolCreate, CUresult(*)(CUmemoryPool*, const CUmemPoolProps*))(&pool, &props);
    out = Hex(reinterpret_cast<uint64_t>(pool));
  } else if (c == "defaultpool") {
    CUmemoryPool pool = nullptr;
    r = CALL(cuDeviceGetDefaultMemPool, CUresult(*)(CUmemoryPool*, CUdevice))(
        &pool, static_cast<int>(arg(1)));
    out = Hex(reinterpret_cast<uint64_t>(pool));
  } else if (c == "setpool") {  // setpool <dev> <pool>: cuMemAllocAsync draws from it now
    r = CALL(cuDeviceSetMemPool, CUresult(*)(CUdevice, CUmemoryPool))(
        static_cast<int>(arg(1)), reinterpret_cast<CUmemoryPool>(arg(2)));
  } else if (c == "poolalloc") {
    CUdeviceptr p = 0;
    r = CALL(cuMemAllocFromPoolAsync, CUresult(*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream))(
        &p, arg(2), reinterpret_cast<CUmemoryPool>(arg(1)), nullptr);
    out = Hex(p);
  } else if (c == "pooltrim") {
    r = CALL(cuMemPoolTrimTo, CUresult(*)(CUmemoryPool, size_t))(
        reinterpret_cast<CUmemoryPool>(arg(1)), arg(2));
  } else if (c == "poolthreshold") {
    uint64_t v = arg(2);
    r = CALL(cuMemPoolSetAttribute, CUresult(*)(CUmemoryPool, int, void*))(
        reinterpret_cast<CUmemoryPool>(arg(1)), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v);
  } else if (c == "poolreserved") {
    uint64_t v = 0;
    r = CALL(cuMemPoolGetAttribute, CUresult(*)(CUmemoryPool, int, void*))(
        reinterpret_cast<CUmemoryPool>(arg(1)), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v);
    out = std::to_string(v);
  } else if (c == "pooldestroy") {
    r = CALL(cuMemPoolDestroy, CUresult(*)(CUmemoryPool))(reinterpret_cast<CUmemoryPool>(arg(1)));
  } else if (c == "sync") {
    r = CALL(cuStreamSynchronize, CUresult(*)(CUstream))(nullptr);
  } else if (c == "ctxsync") {
    r = CALL(cuCtxSynchronize, CUresult(*)())();
  } else if (c == "vmmcreate") {  // vmmcreate <bytes> <dev>
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = static_cast<int>(arg(2));
    CUmemGenericAllocationHandle h = 0;
    r = CALL(cuMemCreate, CUresult(*)(CUmemGenericAllocationHandle*, size_t,
                                      const CUmemAllocationProp*, unsigned long long))(&h, arg(1),
                                                                                       &prop, 0);
    out = Hex(h);
  } else if (c == "vmmrelease") {
    r = CALL(cuMemRelease, CUresult(*)(CUmemGenericAllocationHandle))(arg(1));
  } else if (c == "vareserve") {
    CUdeviceptr p = 0;
    r = CALL(cuMemAddressReserve, CUresult(*)(CUdeviceptr*, size_t, size_t, CUdeviceptr,
                                              unsigned long long))(&p, arg(1), 0, 0, 0);
    out = Hex(p);
  } else if (c == "map") {  // map <va> <bytes> <handle>
    r = CALL(cuMemMap, CUresult(*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                                   unsigned long long))(arg(1), arg(2), 0, arg(3), 0);
    if (r == CUDA_SUCCESS) {
      CUmemAccessDesc access{};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.flags = 3;
      r = CALL(cuMemSetAccess, CUresult(*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t))(
          arg(1), arg(2), &access, 1);
    }
  } else if (c == "unmap") {
    r = CALL(cuMemUnmap, CUresult(*)(CUdeviceptr, size_t))(arg(1), arg(2));
  } else if (c == "retain") {
    CUmemGenericAllocationHandle h = 0;
    r = CALL(cuMemRetainAllocationHandle, CUresult(*)(CUmemGenericAllocationHandle*, void*))(
        &h, reinterpret_cast<void*>(arg(1)));
    out = Hex(h);
  } else if (c == "export") {
    int fd = -1;
    r = CALL(cuMemExportToShareableHandle, CUresult(*)(void*, CUmemGenericAllocationHandle, int,
                                                       unsigned long long))(&fd, arg(1), 1, 0);
    out = std::to_string(fd);
  } else if (c == "import") {
    CUmemGenericAllocationHandle h = 0;
    r = CALL(cuMemImportFromShareableHandle,
             CUresult(*)(CUmemGenericAllocationHandle*, void*, int))(
        &h, reinterpret_cast<void*>(static_cast<uintptr_t>(arg(1))), 1);
    out = Hex(h);
  } else if (c == "ipcopen") {  // ipcopen <ptr>: export a handle for ptr and open it
    CUipcMemHandle h{};
    r = CALL(cuIpcGetMemHandle, CUresult(*)(CUipcMemHandle*, CUdeviceptr))(&h, arg(1));
    CUdeviceptr p = 0;
    if (r == CUDA_SUCCESS)
      r = CALL(cuIpcOpenMemHandle_v2, CUresult(*)(CUdeviceptr*, CUipcMemHandle, unsigned))(&p, h,
                                                                                           1);
    out = Hex(p);
  } else if (c == "ipcclose") {
    r = CALL(cuIpcCloseMemHandle, CUresult(*)(CUdeviceptr))(arg(1));
  } else if (c == "extimport") {
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC d{};
    d.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = 3;
    d.size = arg(1);
    CUexternalMemory e = nullptr;
    r = CALL(cuImportExternalMemory,
             CUresult(*)(CUexternalMemory*, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC*))(&e, &d);
    out = Hex(reinterpret_cast<uint64_t>(e));
  } else if (c == "extdestroy") {
    r = CALL(cuDestroyExternalMemory,
             CUresult(*)(CUexternalMemory))(reinterpret_cast<CUexternalMemory>(arg(1)));
  } else if (c == "meminfo") {
    size_t f = 0, t = 0;
    r = CALL(cuMemGetInfo_v2, CUresult(*)(size_t*, size_t*))(&f, &t);
    out = std::to_string(f) + " " + std::to_string(t);
  } else if (c == "totalmem") {
    size_t t = 0;
    r = CALL(cuDeviceTotalMem_v2, CUresult(*)(size_t*, CUdevice))(&t, static_cast<int>(arg(1)));
    out = std::to_string(t);
  } else if (c == "launch") {  // launch <variant> <count> [kernel ns]
    CUfunction f = nullptr;
    std::string name = "spin_" + std::to_string(w.size() > 3 ? arg(3) : 1000);
    r = CALL(cuModuleGetFunction, CUresult(*)(CUfunction*, void*, const char*))(&f, nullptr,
                                                                                name.c_str());
    uint64_t n = arg(2) == 0 ? 1 : arg(2);
    for (uint64_t i = 0; i < n && r == CUDA_SUCCESS; ++i) r = LaunchVariant(w[1], f, nullptr);
  } else if (c == "graph") {  // graph <alloc bytes> <dev> <launches> [ptsz]
    CUgraph g = nullptr;
    r = CALL(cuGraphCreate, CUresult(*)(CUgraph*, unsigned))(&g, 0);
    if (r == CUDA_SUCCESS && arg(1) != 0) {
      CUDA_MEM_ALLOC_NODE_PARAMS p{};
      p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      p.poolProps.location.id = static_cast<int>(arg(2));
      p.bytesize = arg(1);
      CUgraphNode node = nullptr;
      r = CALL(cuGraphAddMemAllocNode, CUresult(*)(CUgraphNode*, CUgraph, const CUgraphNode*,
                                                   size_t, CUDA_MEM_ALLOC_NODE_PARAMS*))(
          &node, g, nullptr, 0, &p);
    }
    CUgraphExec e = nullptr;
    if (r == CUDA_SUCCESS)
      r = CALL(cuGraphInstantiateWithFlags, CUresult(*)(CUgraphExec*, CUgraph, unsigned long long))(
          &e, g, 0);
    bool ptsz = w.size() > 4 && w[4] == "ptsz";
    for (uint64_t i = 0; i < arg(3) && r == CUDA_SUCCESS; ++i)
      r = ptsz ? CALL(cuGraphLaunch_ptsz, CUresult(*)(CUgraphExec, CUstream))(e, nullptr)
               : CALL(cuGraphLaunch, CUresult(*)(CUgraphExec, CUstream))(e, nullptr);
    out = Hex(reinterpret_cast<uint64_t>(e));
  } else if (c == "graphtrim") {
    r = CALL(cuDeviceGraphMemTrim, CUresult(*)(CUdevice))(static_cast<int>(arg(1)));
  } else if (c == "capture") {  // capture <begin|end>
    if (w.size() > 1 && w[1] == "begin") {
      r = CALL(cuStreamBeginCapture_v2, CUresult(*)(CUstream, int))(nullptr, 0);
    } else {
      CUgraph g = nullptr;
      r = CALL(cuStreamEndCapture, CUresult(*)(CUstream, CUgraph*))(nullptr, &g);
    }
  } else if (c == "phys") {  // phys <dev>: all tenants, this process, high water
    int d = static_cast<int>(arg(1));
    r = CUDA_SUCCESS;
    out = std::to_string(Control<fakecuda_u64_fn>("fakecuda_physical_used")(d)) + " " +
          std::to_string(Control<fakecuda_u64_fn>("fakecuda_process_used")(d)) + " " +
          std::to_string(Control<fakecuda_u64_fn>("fakecuda_high_water")(d));
  } else if (c == "resethigh") {
    Control<fakecuda_void_fn>("fakecuda_reset_high_water")();
    r = CUDA_SUCCESS;
  } else if (c == "calls") {
    r = CUDA_SUCCESS;
    out = std::to_string(
        Control<fakecuda_calls_fn>("fakecuda_calls")(w.size() > 1 ? w[1].c_str() : ""));
  } else if (c == "live") {
    r = CUDA_SUCCESS;
    out = std::to_string(Control<fakecuda_count_fn>("fakecuda_live_objects")());
  } else if (c == "busy") {
    r = CUDA_SUCCESS;
    out = std::to_string(Control<fakecuda_u64_fn>("fakecuda_busy_ns")(static_cast<int>(arg(1))));
  } else if (c == "fail") {  // fail <exported> <count> <result>
    Control<fakecuda_fail_fn>("fakecuda_fail_next")(w[1].c_str(), static_cast<int>(arg(2)),
                                                    static_cast<int>(arg(3)));
    r = CUDA_SUCCESS;
  } else if (c == "sleepms") {
    usleep(static_cast<useconds_t>(arg(1) * 1000));
    r = CUDA_SUCCESS;
  } else if (c == "touch") {  // touch <path>: tell the test something happened
    FILE* f = fopen(w[1].c_str(), "w");
    if (f != nullptr) fclose(f);
    r = CUDA_SUCCESS;
  } else if (c == "pause") {  // wait to be killed
    printf("pause 0\n");
    fflush(stdout);
    for (;;) pause();
  } else if (c == "race") {  // race <rounds> <bytes> <barrier file>: see tests/interpose
    Barrier* b = OpenBarrier(w[3]);
    if (b == nullptr) {
      printf("race 1 no-barrier\n");
      return false;
    }
    // How this process allocates: alloc (cuMemAlloc), managed, async (default pool; freed
    // and synchronised so the pool gives the memory back) or vmm (cuMemCreate).
    std::string api = w.size() > 4 ? w[4] : "alloc";
    auto alloc = CALL(cuMemAlloc_v2, CUresult(*)(CUdeviceptr*, size_t));
    auto managed = CALL(cuMemAllocManaged, CUresult(*)(CUdeviceptr*, size_t, unsigned));
    auto async = CALL(cuMemAllocAsync, CUresult(*)(CUdeviceptr*, size_t, CUstream));
    auto free_async = CALL(cuMemFreeAsync, CUresult(*)(CUdeviceptr, CUstream));
    auto sync = CALL(cuStreamSynchronize, CUresult(*)(CUstream));
    auto create = CALL(cuMemCreate, CUresult(*)(CUmemGenericAllocationHandle*, size_t,
                                                const CUmemAllocationProp*, unsigned long long));
    auto release = CALL(cuMemRelease, CUresult(*)(CUmemGenericAllocationHandle));
    auto free_fn = CALL(cuMemFree_v2, CUresult(*)(CUdeviceptr));
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    int wins = 0;
    std::string trace;
    for (uint64_t round = 0; round < arg(1); ++round) {
      pthread_barrier_wait(&b->barrier);  // everyone tries at once
      CUdeviceptr p = 0;
      CUmemGenericAllocationHandle h = 0;
      CUresult ar;
      if (api == "managed")
        ar = managed(&p, arg(2), CU_MEM_ATTACH_GLOBAL);
      else if (api == "async")
        ar = async(&p, arg(2), nullptr);
      else if (api == "vmm")
        ar = create(&h, arg(2), &prop, 0);
      else
        ar = alloc(&p, arg(2));
      pthread_barrier_wait(&b->barrier);  // every winner still holds its memory here
      if (ar == CUDA_SUCCESS) {
        ++wins;
        if (api == "async") {
          free_async(p, nullptr);
          sync(nullptr);
        } else if (api == "vmm") {
          release(h);
        } else {
          free_fn(p);
        }
      }
      trace += ar == CUDA_SUCCESS ? '1' : (ar == CUDA_ERROR_OUT_OF_MEMORY ? '0' : 'E');
      pthread_barrier_wait(&b->barrier);  // everyone freed
    }
    r = CUDA_SUCCESS;
    out = std::to_string(wins) + " " + trace;
  } else if (c == "forkhold") {  // forkhold <bytes>: a forked child allocates and waits
    int ready[2];
    if (pipe(ready) != 0) return false;
    pid_t child = fork();
    if (child == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the probe
      CUdeviceptr p = 0;
      CUresult ar = CALL(cuMemAlloc_v2, CUresult(*)(CUdeviceptr*, size_t))(&p, arg(1));
      ssize_t ignored = write(ready[1], &ar, sizeof(ar));
      (void)ignored;
      for (;;) pause();
    }
    CUresult child_rc = CUDA_ERROR_INVALID_VALUE;
    ssize_t got = read(ready[0], &child_rc, sizeof(child_rc));
    (void)got;
    r = child_rc;
    out = std::to_string(child);
  } else if (c == "thread") {  // thread <command...>: run one command on a new thread
    std::string rest = line.substr(line.find("thread") + 6);
    bool ok = true;
    std::thread t([&] { ok = Run(rest); });
    t.join();
    return ok;
  } else if (c == "churn") {  // churn <threads> <iterations> <bytes>: concurrent alloc/free
    CUcontext ctx = nullptr;
    CALL(cuDevicePrimaryCtxRetain, CUresult(*)(CUcontext*, CUdevice))(&ctx, 0);
    auto alloc = CALL(cuMemAlloc_v2, CUresult(*)(CUdeviceptr*, size_t));
    auto free_fn = CALL(cuMemFree_v2, CUresult(*)(CUdeviceptr));
    auto set = CALL(cuCtxSetCurrent, CUresult(*)(CUcontext));
    std::atomic<int> failures{0}, refused{0};
    std::vector<std::thread> threads;
    for (uint64_t i = 0; i < arg(1); ++i)
      threads.emplace_back([&] {
        set(ctx);
        for (uint64_t k = 0; k < arg(2); ++k) {
          CUdeviceptr p = 0;
          CUresult ar = alloc(&p, arg(3));
          if (ar == CUDA_ERROR_OUT_OF_MEMORY)
            ++refused;
          else if (ar != CUDA_SUCCESS || free_fn(p) != CUDA_SUCCESS)
            ++failures;
        }
      });
    for (std::thread& t : threads) t.join();
    r = failures.load() == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    out = std::to_string(refused.load());
  } else if (c == "mode") {
    r = CUDA_SUCCESS;
    out = g_mode;
  } else if (c == "exit") {
    return false;
  } else {
    fprintf(stderr, "probe: unknown command %s\n", c.c_str());
    exit(2);
  }
  printf("%s %d%s%s\n", c.c_str(), r, out.empty() ? "" : " ", out.c_str());
  fflush(stdout);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Setup();
  if (argc == 2 && strcmp(argv[1], "-") == 0) {
    char line[4096];
    while (fgets(line, sizeof(line), stdin) != nullptr)
      if (!Run(line)) break;
    return 0;
  }
  for (int i = 1; i < argc; ++i)
    if (!Run(argv[i])) break;
  return 0;
}
