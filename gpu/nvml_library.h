// NvmlLibrary: libnvidia-ml.so.1 opened with dlopen, its entry points resolved with dlsym, and
// nvmlInit_v2 / nvmlShutdown paired for the object's lifetime.
//
// gpushare never links against NVML: a node without the driver must still start (and say so),
// and tests load the fake NVML (tests/fakes/native/nvml) through an explicit path. The NVML
// inventory (gpu/nvml_inventory.h) and the NVML health event source (gpu/health_events.h)
// share one NvmlLibrary.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "gpu/nvml_api.h"

namespace gpushare {

class NvmlLibrary {
 public:
  // Opens `path` ("libnvidia-ml.so.1" searches the loader path) and calls nvmlInit_v2.
  // Missing library -> kUnavailable; a library without the required entry points or an init
  // failure -> kFailedPrecondition. The message says what to check.
  static Result<std::shared_ptr<NvmlLibrary>> Open(const std::string& path = "libnvidia-ml.so.1");
  ~NvmlLibrary();  // nvmlShutdown, then dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // "NVML_ERROR_TIMEOUT"-style text from nvmlErrorString, or the number when unknown.
  std::string ErrorString(nvmlReturn_t r) const;
  // A Status for a failed call: "<call>: <nvml error text> (<code>)".
  Status Error(const std::string& call, nvmlReturn_t r) const;

  const std::string& path() const { return path_; }

  // Required entry points (never null after Open).
  nvmlInit_v2_fn Init = nullptr;
  nvmlShutdown_fn Shutdown = nullptr;
  nvmlErrorString_fn ErrorStringFn = nullptr;
  nvmlDeviceGetCount_v2_fn DeviceGetCount = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn DeviceGetHandleByIndex = nullptr;
  nvmlDeviceGetUUID_fn DeviceGetUUID = nullptr;
  nvmlDeviceGetName_fn DeviceGetName = nullptr;
  nvmlDeviceGetMemoryInfo_fn DeviceGetMemoryInfo = nullptr;
  // Optional entry points (null when the library lacks them; callers degrade).
  nvmlSystemGetDriverVersion_fn SystemGetDriverVersion = nullptr;
  nvmlSystemGetCudaDriverVersion_v2_fn SystemGetCudaDriverVersion = nullptr;
  nvmlDeviceGetMemoryInfo_v2_fn DeviceGetMemoryInfoV2 = nullptr;
  nvmlDeviceGetCudaComputeCapability_fn DeviceGetCudaComputeCapability = nullptr;
  nvmlDeviceGetPciInfo_v3_fn DeviceGetPciInfo = nullptr;
  nvmlDeviceGetMigMode_fn DeviceGetMigMode = nullptr;
  nvmlDeviceGetMaxMigDeviceCount_fn DeviceGetMaxMigDeviceCount = nullptr;
  nvmlDeviceGetMigDeviceHandleByIndex_fn DeviceGetMigDeviceHandleByIndex = nullptr;
  nvmlDeviceGetGpuInstanceId_fn DeviceGetGpuInstanceId = nullptr;
  nvmlDeviceGetComputeInstanceId_fn DeviceGetComputeInstanceId = nullptr;
  nvmlDeviceGetAttributes_v2_fn DeviceGetAttributes = nullptr;
  nvmlEventSetCreate_fn EventSetCreate = nullptr;
  nvmlEventSetFree_fn EventSetFree = nullptr;
  nvmlDeviceGetSupportedEventTypes_fn DeviceGetSupportedEventTypes = nullptr;
  nvmlDeviceRegisterEvents_fn DeviceRegisterEvents = nullptr;
  nvmlEventSetWait_v2_fn EventSetWait = nullptr;

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  bool initialized_ = false;
  std::string path_;
};

}  // namespace gpushare
