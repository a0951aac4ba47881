// nvml_abi.h: the few NVML declarations libgpushare-cuda.so needs to rewrite memory queries.
//
// No nvml.h is installed anywhere here (the toolkit lacks it, Debian's libnvidia-ml-dev is in
// non-free), so the types are written from the public NVML API reference: nvmlMemory_t (v1) and
// nvmlMemory_v2_t, whose `version` field must equal NVML_STRUCT_VERSION(Memory, 2) =
// sizeof(nvmlMemory_v2_t) | (2 << 24).
#pragma once

#include <stdint.h>

namespace gpushare::nvml {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;

inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};

inline constexpr unsigned int nvmlMemory_v2 =
    static_cast<unsigned int>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;

}  // namespace gpushare::nvml
