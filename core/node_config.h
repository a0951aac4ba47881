// NodeConfig: the validated, normalised sharing configuration of one node.
//
// config/ parses the NVIDIA k8s-device-plugin config file (version v1) plus gpushare's own
// top-level `gpushare:` section, applies flag > environment > file precedence, validates every
// field, and produces this struct. Nothing here is parsed; every value is already in range.
// The resource plan (core/resource_plan.h) is a pure function of (Inventory, NodeConfig).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/memshare.h"

namespace gpushare {

enum class MigStrategy { kNone, kSingle, kMixed };
enum class DeviceIdStrategy { kUuid, kIndex };
enum class AllocationPolicy {
  kDistributed,
  kPacked
};  // replicas / MIG devices in GetPreferredAllocation

// flags.plugin.deviceListStrategy: any combination of these.
struct DeviceListStrategy {
  bool envvar = true;
  bool volume_mounts = false;
  bool cdi_annotations = false;
  bool cdi_cri = false;
};

// sharing.timeSlicing.resources[].devices: which devices an entry applies to.
// NVIDIA semantics: "all" (default), a positive count (the first N devices), or a list of
// GPU indices ("0"), MIG indices ("0:1"), GPU UUIDs ("GPU-..."), MIG UUIDs ("MIG-...").
struct DeviceSelector {
  enum class Kind { kAll, kCount, kList };
  Kind kind = Kind::kAll;
  int count = 0;                   // for kCount
  std::vector<std::string> items;  // for kList, as written
};

// One sharing.timeSlicing.resources[] entry.
struct ReplicatedResource {
  std::string name;    // the resource being replicated: "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
  std::string rename;  // advertised name instead of `name`, empty = none (or <name>.shared
                       // when renameByDefault); always fully qualified after validation
  DeviceSelector devices;
  int replicas = 2;        // 2..GpushareSettings::max_clients_per_gpu
  std::string field_path;  // e.g. "sharing.timeSlicing.resources[1]" for messages
};

struct TimeSlicing {
  bool rename_by_default = false;
  bool fail_requests_greater_than_one = false;
  std::vector<ReplicatedResource> resources;
};

// How a replica's memory limit is derived (gpushare.timeSlicing.memoryLimit).
enum class ReplicaMemoryLimit {
  kNone,       // replicas are not memory-limited (NVIDIA behaviour)
  kEvenSplit,  // each replica gets floor(device memory / replicas)
};

// How a replica's compute share is derived (gpushare.timeSlicing.computeLimit).
enum class ReplicaComputeLimit {
  kNone,       // replicas are not SM-limited
  kEvenSplit,  // each replica gets floor(100% / replicas) of the device's SMs (at least 1%)
};

// How a memory share's compute share is derived (gpushare.memoryShares.computeLimit).
enum class MemoryComputeLimit {
  kNone,          // memory shares are not SM-limited
  kProportional,  // a container gets the fraction of the SMs that its units are of the memory
};

// gpushare.memoryShares: GPUs whose memory is advertised in units of one GPU's memory
// (`aliyun.com/gpu-mem`, placed by gpushare-scheduler; docs/memory-shares.md). A GPU that serves
// memory shares is neither whole nor time-sliced.
struct MemoryShares {
  // Which GPUs: nullopt (the default) = none. Items of a list are GPU indices or GPU UUIDs.
  std::optional<DeviceSelector> devices;
  std::string resource_name = std::string(memshare::kResourceName);
  memshare::MemoryUnit unit = memshare::MemoryUnit::kGiB;
  bool publish_gpu_count = true;  // aliyun.com/gpu-count in node capacity/allocatable
  MemoryComputeLimit compute_limit = MemoryComputeLimit::kNone;
  // alibabacloud.com/gpu-milli beside the units: fractions and whole GPUs of the same GPUs.
  bool fractions = true;

  bool enabled() const { return devices.has_value(); }
};

// gpushare-node's /metrics, /healthz and /readyz (gpushare.metrics; read at start only).
struct MetricsSettings {
  std::string listen = ":9445";     // ":PORT", "HOST:PORT", "[V6]:PORT"; "" = not served
  std::string auth = "kubernetes";  // kubernetes | none (loopback listen only)
  std::string names = "gpushare";   // gpushare | hami | both
};

// gpushare's own settings: the top-level `gpushare:` section of the config file.
struct GpushareSettings {
  int max_clients_per_gpu = 48;  // ceiling on containers sharing one physical GPU
  AllocationPolicy allocation_policy = AllocationPolicy::kDistributed;
  ReplicaMemoryLimit replica_memory_limit = ReplicaMemoryLimit::kNone;
  ReplicaComputeLimit replica_compute_limit = ReplicaComputeLimit::kNone;

  // Health (XID) handling.
  bool health_checks_enabled = true;
  std::vector<uint32_t> ignored_xids = {13, 31, 43, 45, 68, 109};
  int64_t health_recovery_seconds =
      300;  // quiet period after which an Unhealthy device recovers; 0 = never

  // Where the in-container library lives on the host (mounted by Allocate); empty = not mounted.
  std::string interposer_host_dir;
  // Host directory under which per-container accounting directories are created.
  std::string container_state_dir = "/var/lib/gpushare/containers";

  MemoryShares memory_shares;
  MetricsSettings metrics;
};

struct PluginFlags {
  bool pass_device_specs = false;
  DeviceListStrategy device_list_strategy;
  DeviceIdStrategy device_id_strategy = DeviceIdStrategy::kUuid;
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
  std::string cdi_vendor_class = "k8s.device-plugin.nvidia.com/gpu";  // CDI kind for names
  std::string nvidia_dev_root = "/";     // where /dev/nvidia* live, for passDeviceSpecs
  std::string nvidia_driver_root = "/";  // flags.nvidiaDriverRoot
  std::string container_driver_root = "/driver-root";   // flags.plugin.containerDriverRoot
  std::string nvidia_ctk_path = "/usr/bin/nvidia-ctk";  // flags.plugin.nvidiaCTKPath
};

// The top-level `imex:` section (NVIDIA): IMEX channels given to every container.
struct ImexConfig {
  std::vector<int> channel_ids;  // [] or [0]
  bool required = false;
};

struct NodeConfig {
  MigStrategy mig_strategy = MigStrategy::kNone;
  bool fail_on_init_error = true;
  PluginFlags plugin;
  TimeSlicing time_slicing;
  GpushareSettings gpushare;
  // flags.gdrcopyEnabled / gdsEnabled / mofedEnabled: add NVIDIA_GDRCOPY / NVIDIA_GDS /
  // NVIDIA_MOFED=enabled to every container's environment.
  bool gdrcopy_enabled = false;
  bool gds_enabled = false;
  bool mofed_enabled = false;
  ImexConfig imex;
};

}  // namespace gpushare
