// The NVML inventory backend: what NVML reports about every GPU and MIG device of this node.
//
// Per GPU: index, UUID, name, memory (v2 memory info when the driver has it), CUDA compute
// capability, PCI bus ID and the NUMA node read from sysfs
// (<sysfs_pci_root>/<bus id>/numa_node), MIG mode and, when MIG is enabled, each MIG device
// with its GI/CI IDs, UUID, memory and profile. The profile is derived from the device's
// slice counts and memory the way NVIDIA's plugin derives it (memory fraction of the parent
// rounded up to eighths); a profile spelled in the MIG device's name
// ("NVIDIA H100 80GB HBM3 MIG 1g.10gb") wins when it has the same slices, so "+me" survives.
#pragma once

#include <memory>
#include <string>

#include "gpu/inventory_source.h"
#include "gpu/nvml_library.h"

namespace gpushare {

struct NvmlInventoryOptions {
  std::string library_path = "libnvidia-ml.so.1";
  std::string sysfs_pci_root = "/sys/bus/pci/devices";  // tests point this at a fixture
};

// Reads the inventory through an open library.
Result<Inventory> ReadNvmlInventory(const NvmlLibrary& nvml, const NvmlInventoryOptions& options);

// The profile name for MIG slices and memory: "1g.10gb", "1c.2g.20gb". The memory part is
// the instance's fraction of the parent's memory, rounded up to eighths, times the parent's
// memory in GB (rounded up), rounded to the nearest GB.
std::string MigProfileFromAttributes(unsigned gpu_slices, unsigned compute_slices,
                                     unsigned long long mig_memory_mib,
                                     unsigned long long parent_memory_bytes);

// "00000000:17:00.0" (NVML) -> "0000:17:00.0" (sysfs), lower case.
std::string SysfsPciBusId(const std::string& nvml_bus_id);

// Opens NVML on every Load (so a reload after a driver change sees the new state).
class NvmlInventorySource : public InventorySource {
 public:
  explicit NvmlInventorySource(NvmlInventoryOptions options) : options_(std::move(options)) {}
  Result<Inventory> Load() override;
  std::string Describe() const override { return "nvml (" + options_.library_path + ")"; }
  // The library opened by the last successful Load, for the health event source.
  std::shared_ptr<NvmlLibrary> library() const { return library_; }

 private:
  NvmlInventoryOptions options_;
  std::shared_ptr<NvmlLibrary> library_;
};

}  // namespace gpushare
