// Inventory: what GPUs a node has, independent of where that knowledge came from.
//
// The NVML backend (gpu/nvml_inventory) and the simulated-inventory file backend
// (gpu/file_inventory) both produce an Inventory; everything downstream (resource plans,
// health, the node annotation read by the scheduler) works on this model only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpushare {

// One MIG device (a GPU instance plus a compute instance) of a MIG-enabled GPU.
struct MigInstance {
  int index = 0;            // position among the parent's MIG devices: j in the "i:j" index form
  std::string profile;      // e.g. "1g.10gb", "1c.2g.20gb", "1g.10gb+me"
  int gpu_instance_id = 0;  // GI ID
  int compute_instance_id = 0;  // CI ID
  std::string uuid;             // "MIG-<uuid>"
  uint64_t memory_mib = 0;
  int multiprocessors = 0;  // SM count of the instance, 0 when unknown
};

// One physical GPU.
struct Gpu {
  int index = 0;            // NVML index (minor order)
  std::string uuid;         // "GPU-<uuid>"
  std::string product;      // e.g. "NVIDIA A10", "NVIDIA H100 80GB HBM3"
  uint64_t memory_mib = 0;  // total framebuffer memory
  int cc_major = 0;         // compute capability
  int cc_minor = 0;
  int numa_node = -1;            // -1: no NUMA affinity known
  std::string pci_bus_id;        // e.g. "0000:17:00.0", may be empty
  int multiprocessors = 0;       // SM count, 0 when unknown
  bool mig_enabled = false;      // MIG mode currently enabled
  std::vector<MigInstance> mig;  // the MIG devices, in index order (empty unless mig_enabled)
};

struct Inventory {
  std::string source;               // "nvml" or the inventory file's path, for logs
  std::string driver_version;       // e.g. "570.124.06", may be empty
  std::string cuda_driver_version;  // e.g. "12.8", may be empty
  std::vector<Gpu> gpus;            // in index order

  const Gpu* FindByIndex(int index) const;
  const Gpu* FindByUuid(const std::string& uuid) const;
  // Finds the GPU owning a MIG device UUID; sets *mig to the instance when found.
  const Gpu* FindMigOwner(const std::string& mig_uuid, const MigInstance** mig) const;
};

// Parses a MIG profile name "[<c>c.]<g>g.<mem>gb[+<attr>...]" into its slice counts.
// compute_slices == gpu_slices for a full GPU-instance profile ("1g.10gb"); a compute-instance
// sub-profile ("1c.2g.20gb") has compute_slices < gpu_slices. Returns nullopt if malformed.
struct MigProfileSlices {
  int compute_slices = 0;
  int gpu_slices = 0;
  int memory_gb = 0;
  std::vector<std::string> attributes;  // e.g. {"me"} for "1g.10gb+me"
};
std::optional<MigProfileSlices> ParseMigProfile(const std::string& profile);

// UUID forms as NVML writes them: "GPU-" + 8-4-4-4-12 hex digits; a MIG UUID is "MIG-" + the
// same, or the older "MIG-GPU-<uuid>/<gi>/<ci>" form.
bool IsGpuUuid(const std::string& s);
bool IsMigUuid(const std::string& s);

}  // namespace gpushare
