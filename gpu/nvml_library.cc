#include "gpu/nvml_library.h"

#include <dlfcn.h>

namespace gpushare {

namespace {

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

Result<std::shared_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    return Status::Unavailable(
        "NVML library " + path + " could not be loaded (" + (why ? why : "unknown error") +
        "): is the NVIDIA driver installed on this node, and does this container run with the "
        "NVIDIA runtime or have the driver root mounted? On a machine without GPUs use "
        "--inventory FILE");
  }
  std::shared_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->handle_ = h;
  lib->path_ = path;
  Resolve(h, "nvmlInit_v2", &lib->Init);
  Resolve(h, "nvmlShutdown", &lib->Shutdown);
  Resolve(h, "nvmlErrorString", &lib->ErrorStringFn);
  Resolve(h, "nvmlDeviceGetCount_v2", &lib->DeviceGetCount);
  Resolve(h, "nvmlDeviceGetHandleByIndex_v2", &lib->DeviceGetHandleByIndex);
  Resolve(h, "nvmlDeviceGetUUID", &lib->DeviceGetUUID);
  Resolve(h, "nvmlDeviceGetName", &lib->DeviceGetName);
  Resolve(h, "nvmlDeviceGetMemoryInfo", &lib->DeviceGetMemoryInfo);
  Resolve(h, "nvmlSystemGetDriverVersion", &lib->SystemGetDriverVersion);
  Resolve(h, "nvmlSystemGetCudaDriverVersion_v2", &lib->SystemGetCudaDriverVersion);
  Resolve(h, "nvmlDeviceGetMemoryInfo_v2", &lib->DeviceGetMemoryInfoV2);
  Resolve(h, "nvmlDeviceGetCudaComputeCapability", &lib->DeviceGetCudaComputeCapability);
  Resolve(h, "nvmlDeviceGetPciInfo_v3", &lib->DeviceGetPciInfo);
  Resolve(h, "nvmlDeviceGetMigMode", &lib->DeviceGetMigMode);
  Resolve(h, "nvmlDeviceGetMaxMigDeviceCount", &lib->DeviceGetMaxMigDeviceCount);
  Resolve(h, "nvmlDeviceGetMigDeviceHandleByIndex", &lib->DeviceGetMigDeviceHandleByIndex);
  Resolve(h, "nvmlDeviceGetGpuInstanceId", &lib->DeviceGetGpuInstanceId);
  Resolve(h, "nvmlDeviceGetComputeInstanceId", &lib->DeviceGetComputeInstanceId);
  Resolve(h, "nvmlDeviceGetAttributes_v2", &lib->DeviceGetAttributes);
  Resolve(h, "nvmlEventSetCreate", &lib->EventSetCreate);
  Resolve(h, "nvmlEventSetFree", &lib->EventSetFree);
  Resolve(h, "nvmlDeviceGetSupportedEventTypes", &lib->DeviceGetSupportedEventTypes);
  Resolve(h, "nvmlDeviceRegisterEvents", &lib->DeviceRegisterEvents);
  Resolve(h, "nvmlEventSetWait_v2", &lib->EventSetWait);

  std::string missing;
  auto need = [&](const void* fn, const char* name) {
    if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  need(reinterpret_cast<const void*>(lib->Init), "nvmlInit_v2");
  need(reinterpret_cast<const void*>(lib->Shutdown), "nvmlShutdown");
  need(reinterpret_cast<const void*>(lib->ErrorStringFn), "nvmlErrorString");
  need(reinterpret_cast<const void*>(lib->DeviceGetCount), "nvmlDeviceGetCount_v2");
  need(reinterpret_cast<const void*>(lib->DeviceGetHandleByIndex), "nvmlDeviceGetHandleByIndex_v2");
  need(reinterpret_cast<const void*>(lib->DeviceGetUUID), "nvmlDeviceGetUUID");
  need(reinterpret_cast<const void*>(lib->DeviceGetName), "nvmlDeviceGetName");
  need(reinterpret_cast<const void*>(lib->DeviceGetMemoryInfo), "nvmlDeviceGetMemoryInfo");
  if (!missing.empty()) {
    return Status::FailedPrecondition("NVML library " + path + " lacks " + missing +
                                      ": the driver is too old or the library is not NVML");
  }
  nvmlReturn_t r = lib->Init();
  if (r != NVML_SUCCESS) {
    Status s = lib->Error("nvmlInit_v2", r);
    std::string hint;
    if (r == NVML_ERROR_DRIVER_NOT_LOADED)
      hint = ": the NVIDIA kernel driver is not loaded";
    else if (r == NVML_ERROR_LIB_RM_VERSION_MISMATCH)
      hint = ": the user-space driver does not match the kernel driver (reboot or reload it)";
    else if (r == NVML_ERROR_NO_PERMISSION)
      hint = ": no permission to open /dev/nvidia*";
    return Status::FailedPrecondition(s.message() + hint);
  }
  lib->initialized_ = true;
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_ && Shutdown != nullptr) Shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

std::string NvmlLibrary::ErrorString(nvmlReturn_t r) const {
  const char* s = ErrorStringFn != nullptr ? ErrorStringFn(r) : nullptr;
  return s != nullptr ? std::string(s) : "NVML error " + std::to_string(r);
}

Status NvmlLibrary::Error(const std::string& call, nvmlReturn_t r) const {
  StatusCode code = StatusCode::kInternal;
  if (r == NVML_ERROR_GPU_IS_LOST)
    code = StatusCode::kUnavailable;
  else if (r == NVML_ERROR_TIMEOUT)
    code = StatusCode::kDeadlineExceeded;
  else if (r == NVML_ERROR_NOT_FOUND)
    code = StatusCode::kNotFound;
  else if (r == NVML_ERROR_NOT_SUPPORTED)
    code = StatusCode::kUnimplemented;
  else if (r == NVML_ERROR_UNINITIALIZED || r == NVML_ERROR_DRIVER_NOT_LOADED)
    code = StatusCode::kFailedPrecondition;
  return Status(code, call + ": " + ErrorString(r) + " (" + std::to_string(r) + ")");
}

}  // namespace gpushare
