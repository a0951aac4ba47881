#include "gpu/nvml_inventory.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/inventory.h"

namespace gpushare {

namespace {

std::string Trimmed(const char* buf) {
  std::string s(buf);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

int ReadNumaNode(const std::string& root, const std::string& bus_id) {
  if (bus_id.empty()) return -1;
  std::ifstream in(root + "/" + bus_id + "/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node < 0 ? -1 : node;
}

// The profile a MIG device's name ends with, e.g. "... MIG 1g.10gb" -> "1g.10gb".
std::string ProfileFromName(const std::string& name) {
  size_t at = name.rfind("MIG ");
  if (at == std::string::npos) return "";
  std::string p = name.substr(at + 4);
  return ParseMigProfile(p) ? p : "";
}

}  // namespace

std::string SysfsPciBusId(const std::string& nvml_bus_id) {
  std::string s;
  for (char c : nvml_bus_id) {
    if (c == '\0') break;
    s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  size_t colon = s.find(':');
  if (colon == 8 && s.substr(0, 4) == "0000") s = s.substr(4);
  return s;
}

std::string MigProfileFromAttributes(unsigned gpu_slices, unsigned compute_slices,
                                     unsigned long long mig_memory_mib,
                                     unsigned long long parent_memory_bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  constexpr unsigned long long kGiB = 1024ULL * 1024 * 1024;
  unsigned long long mem_gb = 0;
  if (parent_memory_bytes > 0) {
    double fraction =
        static_cast<double>(mig_memory_mib) * kMiB / static_cast<double>(parent_memory_bytes);
    fraction = std::ceil(fraction * 8.0) / 8.0;
    double parent_gb = static_cast<double>((parent_memory_bytes + kGiB - 1) / kGiB);
    mem_gb = static_cast<unsigned long long>(std::llround(fraction * parent_gb));
  }
  std::string p;
  if (compute_slices != gpu_slices) p = std::to_string(compute_slices) + "c.";
  p += std::to_string(gpu_slices) + "g." + std::to_string(mem_gb) + "gb";
  return p;
}

Result<Inventory> ReadNvmlInventory(const NvmlLibrary& nvml, const NvmlInventoryOptions& options) {
  Inventory inv;
  inv.source = "nvml";
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (nvml.SystemGetDriverVersion != nullptr &&
      nvml.SystemGetDriverVersion(buf, sizeof(buf)) == NVML_SUCCESS) {
    inv.driver_version = Trimmed(buf);
  }
  int cuda = 0;
  if (nvml.SystemGetCudaDriverVersion != nullptr &&
      nvml.SystemGetCudaDriverVersion(&cuda) == NVML_SUCCESS && cuda > 0) {
    inv.cuda_driver_version =
        std::to_string(cuda / 1000) + "." + std::to_string((cuda % 1000) / 10);
  }
  unsigned count = 0;
  if (nvmlReturn_t r = nvml.DeviceGetCount(&count); r != NVML_SUCCESS) {
    return nvml.Error("nvmlDeviceGetCount_v2", r);
  }
  if (count == 0) {
    return Status::NotFound("NVML (" + nvml.path() + ") reports no GPUs on this node");
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    const std::string where = "GPU " + std::to_string(i) + ": ";
    if (nvmlReturn_t r = nvml.DeviceGetHandleByIndex(i, &dev); r != NVML_SUCCESS) {
      return nvml.Error(where + "nvmlDeviceGetHandleByIndex_v2", r);
    }
    Gpu g;
    g.index = static_cast<int>(i);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvmlReturn_t r = nvml.DeviceGetUUID(dev, uuid, sizeof(uuid)); r != NVML_SUCCESS) {
      return nvml.Error(where + "nvmlDeviceGetUUID", r);
    }
    g.uuid = Trimmed(uuid);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (nvmlReturn_t r = nvml.DeviceGetName(dev, name, sizeof(name)); r != NVML_SUCCESS) {
      return nvml.Error(where + "nvmlDeviceGetName", r);
    }
    g.product = Trimmed(name);
    unsigned long long total_bytes = 0;
    nvmlMemory_v2_t m2 = {};
    m2.version = nvmlMemory_v2;
    if (nvml.DeviceGetMemoryInfoV2 != nullptr &&
        nvml.DeviceGetMemoryInfoV2(dev, &m2) == NVML_SUCCESS) {
      total_bytes = m2.total;
    } else {
      nvmlMemory_t m1 = {};
      if (nvmlReturn_t r = nvml.DeviceGetMemoryInfo(dev, &m1); r != NVML_SUCCESS) {
        return nvml.Error(where + "nvmlDeviceGetMemoryInfo", r);
      }
      total_bytes = m1.total;
    }
    g.memory_mib = total_bytes / (1024 * 1024);
    if (nvml.DeviceGetCudaComputeCapability != nullptr) {
      nvml.DeviceGetCudaComputeCapability(dev, &g.cc_major, &g.cc_minor);
    }
    if (nvml.DeviceGetPciInfo != nullptr) {
      nvmlPciInfo_t pci = {};
      if (nvml.DeviceGetPciInfo(dev, &pci) == NVML_SUCCESS) {
        g.pci_bus_id = SysfsPciBusId(std::string(pci.busId, strnlen(pci.busId, sizeof(pci.busId))));
        g.numa_node = ReadNumaNode(options.sysfs_pci_root, g.pci_bus_id);
      }
    }
    if (nvml.DeviceGetAttributes != nullptr) {
      nvmlDeviceAttributes_t a = {};
      if (nvml.DeviceGetAttributes(dev, &a) == NVML_SUCCESS) {
        g.multiprocessors = static_cast<int>(a.multiprocessorCount);
      }
    }
    unsigned current = NVML_DEVICE_MIG_DISABLE, pending = NVML_DEVICE_MIG_DISABLE;
    if (nvml.DeviceGetMigMode != nullptr) {
      nvmlReturn_t r = nvml.DeviceGetMigMode(dev, &current, &pending);
      if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_SUPPORTED) {
        return nvml.Error(where + "nvmlDeviceGetMigMode", r);
      }
      g.mig_enabled = r == NVML_SUCCESS && current == NVML_DEVICE_MIG_ENABLE;
    }
    if (g.mig_enabled) {
      if (nvml.DeviceGetMaxMigDeviceCount == nullptr ||
          nvml.DeviceGetMigDeviceHandleByIndex == nullptr ||
          nvml.DeviceGetGpuInstanceId == nullptr || nvml.DeviceGetComputeInstanceId == nullptr) {
        return Status::FailedPrecondition(where + "MIG is enabled but " + nvml.path() +
                                          " lacks the MIG device entry points");
      }
      unsigned max_mig = 0;
      if (nvmlReturn_t r = nvml.DeviceGetMaxMigDeviceCount(dev, &max_mig); r != NVML_SUCCESS) {
        return nvml.Error(where + "nvmlDeviceGetMaxMigDeviceCount", r);
      }
      for (unsigned j = 0; j < max_mig; ++j) {
        nvmlDevice_t mig = nullptr;
        nvmlReturn_t r = nvml.DeviceGetMigDeviceHandleByIndex(dev, j, &mig);
        if (r == NVML_ERROR_NOT_FOUND) continue;  // an empty slot
        const std::string mwhere =
            "MIG device " + std::to_string(i) + ":" + std::to_string(j) + ": ";
        if (r != NVML_SUCCESS) return nvml.Error(mwhere + "nvmlDeviceGetMigDeviceHandleByIndex", r);
        MigInstance mi;
        mi.index = static_cast<int>(j);
        unsigned gi = 0, ci = 0;
        if ((r = nvml.DeviceGetGpuInstanceId(mig, &gi)) != NVML_SUCCESS) {
          return nvml.Error(mwhere + "nvmlDeviceGetGpuInstanceId", r);
        }
        if ((r = nvml.DeviceGetComputeInstanceId(mig, &ci)) != NVML_SUCCESS) {
          return nvml.Error(mwhere + "nvmlDeviceGetComputeInstanceId", r);
        }
        mi.gpu_instance_id = static_cast<int>(gi);
        mi.compute_instance_id = static_cast<int>(ci);
        char muuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
        if ((r = nvml.DeviceGetUUID(mig, muuid, sizeof(muuid))) != NVML_SUCCESS) {
          return nvml.Error(mwhere + "nvmlDeviceGetUUID", r);
        }
        mi.uuid = Trimmed(muuid);
        nvmlMemory_t mm = {};
        if ((r = nvml.DeviceGetMemoryInfo(mig, &mm)) != NVML_SUCCESS) {
          return nvml.Error(mwhere + "nvmlDeviceGetMemoryInfo", r);
        }
        mi.memory_mib = mm.total / (1024 * 1024);
        char mname[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
        std::string named;
        if (nvml.DeviceGetName(mig, mname, sizeof(mname)) == NVML_SUCCESS) {
          named = ProfileFromName(Trimmed(mname));
        }
        std::string derived;
        nvmlDeviceAttributes_t a = {};
        if (nvml.DeviceGetAttributes != nullptr &&
            nvml.DeviceGetAttributes(mig, &a) == NVML_SUCCESS) {
          mi.multiprocessors = static_cast<int>(a.multiprocessorCount);
          derived = MigProfileFromAttributes(a.gpuInstanceSliceCount, a.computeInstanceSliceCount,
                                             a.memorySizeMB, total_bytes);
        }
        // The name's spelling keeps attributes such as "+me"; use it when it agrees with the
        // slices NVML reports (or when NVML reports none).
        auto ns = ParseMigProfile(named);
        auto ds = ParseMigProfile(derived);
        if (ns && (!ds || (ns->gpu_slices == ds->gpu_slices &&
                           ns->compute_slices == ds->compute_slices))) {
          mi.profile = named;
        } else if (ds) {
          mi.profile = derived;
        } else {
          return Status::FailedPrecondition(mwhere + "cannot tell its MIG profile (name \"" +
                                            Trimmed(mname) + "\", no slice attributes)");
        }
        g.mig.push_back(std::move(mi));
      }
    }
    inv.gpus.push_back(std::move(g));
  }
  return inv;
}

Result<Inventory> NvmlInventorySource::Load() {
  GPUSHARE_ASSIGN_OR_RETURN(auto lib, NvmlLibrary::Open(options_.library_path));
  auto inv = ReadNvmlInventory(*lib, options_);
  if (inv.ok()) library_ = lib;
  return inv;
}

}  // namespace gpushare
