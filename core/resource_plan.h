// ResourcePlan: which extended resources this node advertises, and which devices each has.
//
// BuildResourcePlan is a pure function of (Inventory, NodeConfig): no I/O, no clocks. The node
// agent serves one device plugin per PlannedResource; `gpushare-node --print-resources` prints
// the plan. Examples: 8 x A10 with replicas 10 -> one resource "nvidia.com/gpu" with 80 devices
// "<uuid>::0".."<uuid>::9"; one H100 in MIG mode, mixed strategy, replicas 3 on
// nvidia.com/mig-1g.10gb -> "nvidia.com/mig-1g.10gb" with 21 devices "MIG-<uuid>::0..2".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/inventory.h"
#include "core/node_config.h"
#include "core/status.h"

namespace gpushare {

// What one advertised device stands for.
struct PlannedDevice {
  std::string id;       // the ID kubelet sees: "<uuid>", "<uuid>::<n>", "MIG-<uuid>::<n>"
  bool healthy = true;  // initial health; health changes are applied by the node agent
  std::vector<int64_t> numa_nodes;  // topology; empty = no NUMA affinity

  int gpu_index = 0;     // the physical GPU this device lives on
  std::string gpu_uuid;  // its UUID
  bool is_mig = false;
  int mig_index = -1;             // j of "i:j" when is_mig
  int mig_gi = -1;                // GPU instance ID when is_mig (nvidia-caps access)
  int mig_ci = -1;                // compute instance ID when is_mig
  std::string device_uuid;        // the GPU or MIG UUID a container is given
  std::string device_index;       // "i" or "i:j": the index form a container is given
  int replica = -1;               // n of "::n", -1 when not replicated
  uint64_t memory_mib = 0;        // memory of the underlying GPU or MIG device
  uint64_t memory_limit_mib = 0;  // per-container limit for the interposer, 0 = none
  // This device's share of its GPU's (or MIG device's) SMs, in millionths, for the interposer's
  // SM limit: a container's limit is the sum over its devices of one GPU. 0 = no SM limit.
  uint32_t sm_share_ppm = 0;
  // A device of alibabacloud.com/gpu-milli: 1 (one thousandth of its GPU), else 0. A container's
  // memory limit on the GPU is then its milli x memory_mib / 1000, rounded down, and none for
  // the whole GPU (core/interposer_contract.h); memory_limit_mib holds memory_mib / 1000 for
  // readers that sum per device.
  uint32_t gpu_milli = 0;
};

struct PlannedResource {
  std::string name;          // "nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb"
  std::string socket_name;   // file name in the device-plugin dir, e.g. "gpushare-gpu.sock"
  int replicas = 1;          // per underlying device; 1 = not shared
  std::string base_name;     // the resource it derives from ("nvidia.com/gpu" for .shared)
  std::string source_field;  // the config entry it comes from, e.g.
                             // "sharing.timeSlicing.resources[0]"; empty = not shared
  bool fail_requests_greater_than_one = false;
  // Memory shares (gpushare.memoryShares): MiB per unit (1024 for GiB, 1 for MiB); 0 for every
  // other resource. Each device is one unit "<GPU-uuid>-_-<j>" (core/memshare.h) whose
  // memory_limit_mib is the unit size, so a container's limit is its units times the unit.
  int64_t unit_mib = 0;
  // alibabacloud.com/gpu-milli (gpushare.memoryShares.fractions): fractions (1..999 devices of
  // one GPU) and whole GPUs (all 1,000 devices of each) on the memory-share GPUs. Each device is
  // one milli "<GPU-uuid>-_-m<j>" (core/memshare.h).
  bool gpu_milli = false;
  std::vector<PlannedDevice> devices;

  bool is_memory_shares() const { return unit_mib > 0; }
  // Served by the memory-share mode: the units or the milli resource.
  bool is_share_resource() const { return is_memory_shares() || gpu_milli; }
};

struct ResourcePlan {
  std::vector<PlannedResource> resources;  // sorted by name
  // Things worth telling the operator that are not errors, e.g. a compute-instance MIG
  // sub-profile that is not advertised, or a sharing entry with no devices on this node.
  std::vector<std::string> notes;

  const PlannedResource* Find(const std::string& name) const;
};

// Problems found while planning, one per line, each naming the config field it comes from,
// e.g. "sharing.timeSlicing.resources[2].devices: selector [7] matches no device on this node".
// Returns kInvalidArgument with the problems joined by '\n' when anything is wrong: at most 20,
// then "... and K more problems (N in all)" (core/problem_list.h); the notes are capped the
// same way. Work is linear in the selector items and the devices (items are looked up, not
// compared with every device), so no config makes planning slow or its message large.
Result<ResourcePlan> BuildResourcePlan(const Inventory& inventory, const NodeConfig& config);

// kubelet receives ListAndWatch with grpc-go's default limit of 4 MiB per message
// (kubernetes-protocols.md section 1.9); the plan refuses a resource whose device list would not
// fit.
inline constexpr int64_t kMaxListAndWatchBytes = int64_t{4} << 20;

// The exact size in bytes of the ListAndWatchResponse that lists `resource`'s devices, every
// one reported "Unhealthy" (the longer health string, so health changes never grow past it).
int64_t ListAndWatchBytes(const PlannedResource& resource);

// The socket file name for a resource: "gpushare-" + name with the domain removed and '/'
// replaced, e.g. nvidia.com/gpu -> gpushare-gpu.sock, nvidia.com/mig-1g.10gb ->
// gpushare-mig-1g.10gb.sock, aliyun.com/gpu-mem -> gpushare-aliyun.com-gpu-mem.sock.
std::string SocketNameForResource(const std::string& resource_name);

}  // namespace gpushare
