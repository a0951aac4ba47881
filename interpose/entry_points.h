// entry_points.h: which driver symbol cuGetProcAddress hands out for (name, cudaVersion, flags).
//
// The CUDA 12/13 runtime resolves every driver function through cuGetProcAddress_v2 with a base
// name ("cuMemAlloc"), the CUDA version whose ABI it was compiled against, and a flag asking for
// the per-thread-default-stream variant. The answer is an ABI, e.g. cuMemAlloc@3020 is the
// `cuMemAlloc_v2` ABI, cuCtxCreate@3020 the `cuCtxCreate_v2` ABI (not the _v3 affinity form),
// cuLaunchKernel@7000 with flags 2 the `cuLaunchKernel_ptsz` ABI. The table comes from the
// toolkit's cudaTypedefs.h (interpose/generated/cuda_entry_points.inc, see
// interpose/gen/gen_cuda_tables.py); the rule applied to it:
//   * default-stream variants: the newest one introduced at or below cudaVersion;
//   * with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: the newest per-thread variant at or
//     below cudaVersion if it is the per-thread form of that same ABI, else the legacy one.
// Never "the highest suffix wins" (HAMi-core#57/#71, PR #320).
#pragma once

#include <stdint.h>

namespace gpushare::interpose {

struct EntryPoint {
  const char* base;      // "cuMemAlloc"
  int version;           // CUDA version that introduced this ABI, e.g. 3020
  bool per_thread;       // a _ptsz / _ptds variant
  const char* exported;  // the driver's exported symbol with this ABI: "cuMemAlloc_v2"
};

// The generated table, sorted by base name then version.
const EntryPoint* EntryPoints(int* count);

// The exported symbol whose ABI a cuGetProcAddress(base, cudaVersion, flags) request selects,
// or nullptr when the name is unknown or no variant is old enough. *version_too_low is set when
// the name is known but every variant is newer than cudaVersion.
const char* ResolveEntryPoint(const char* base, int cuda_version, uint64_t flags,
                              bool* version_too_low);

}  // namespace gpushare::interpose
