// Test fixtures for device plugin tests: hand-built resources (the shapes BuildResourcePlan
// produces) and a temporary directory with a short path (unix socket paths are limited to 107
// bytes).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/resource_plan.h"

namespace gpushare::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gpushare-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    path_ = p ? p : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string GpuUuid(int i) {
  return "GPU-0000000" + std::to_string(i) + "-aaaa-bbbb-cccc-dddddddddddd";
}
inline std::string MigUuid(int gpu, int j) {
  return "MIG-" + std::to_string(gpu) + std::to_string(j) + "000000-aaaa-bbbb-cccc-eeeeeeeeeeee";
}

// `gpus` whole GPUs, or `replicas` replicas of each ("<uuid>::<n>") when replicas > 1.
// GPU i is on NUMA node i / numa_split (numa_split 0 = no topology).
inline PlannedResource EmptyResource(const std::string& name, int replicas) {
  PlannedResource r;
  r.name = name;
  r.socket_name = "gpushare-" + name.substr(name.find('/') + 1) + ".sock";
  r.replicas = replicas;
  r.base_name = name;
  return r;
}

inline PlannedResource MakeGpuResource(int gpus, int replicas, int numa_split = 0,
                                       const std::string& name = "nvidia.com/gpu") {
  PlannedResource r = EmptyResource(name, replicas);
  for (int g = 0; g < gpus; ++g) {
    for (int n = 0; n < (replicas > 1 ? replicas : 1); ++n) {
      PlannedDevice d;
      d.gpu_index = g;
      d.gpu_uuid = GpuUuid(g);
      d.device_uuid = d.gpu_uuid;
      d.device_index = std::to_string(g);
      d.replica = replicas > 1 ? n : -1;
      d.id = replicas > 1 ? d.gpu_uuid + "::" + std::to_string(n) : d.gpu_uuid;
      d.memory_mib = 24576;
      if (numa_split > 0) d.numa_nodes = {g / numa_split};
      r.devices.push_back(d);
    }
  }
  return r;
}

// `instances` MIG devices on each of `gpus` GPUs, each with `replicas` replicas (1 = none).
inline PlannedResource MakeMigResource(int gpus, int instances, int replicas,
                                       const std::string& name = "nvidia.com/mig-1g.10gb") {
  PlannedResource r = EmptyResource(name, replicas);
  for (int g = 0; g < gpus; ++g) {
    for (int j = 0; j < instances; ++j) {
      for (int n = 0; n < replicas; ++n) {
        PlannedDevice d;
        d.gpu_index = g;
        d.gpu_uuid = GpuUuid(g);
        d.is_mig = true;
        d.mig_index = j;
        d.mig_gi = 7 + j;  // as NVIDIA numbers 1g.10gb instances on an 80 GB GPU: GI 7..13, CI 0
        d.mig_ci = 0;
        d.device_uuid = MigUuid(g, j);
        d.device_index = std::to_string(g) + ":" + std::to_string(j);
        d.replica = replicas > 1 ? n : -1;
        d.id = replicas > 1 ? d.device_uuid + "::" + std::to_string(n) : d.device_uuid;
        d.memory_mib = 9856;
        r.devices.push_back(d);
      }
    }
  }
  return r;
}

}  // namespace gpushare::testing
