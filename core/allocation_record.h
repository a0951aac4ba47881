// AllocationRecord: which physical GPU, replica, MIG instance or memory units each container of
// a pod really holds, in every sharing mode (whole GPUs, time-sliced replicas, MIG instances
// with or without replicas, memory shares). gpushare-node writes it on the pod as the
// annotation gpushare.io/allocations (core/allocation_json.h encodes it) from kubelet's
// PodResources List and the node's resource plan, so that the API alone tells who uses what;
// `gpushare inspect` and gpushare-scheduler's /inspect read it back. docs/node-agent.md
// ("Allocations") documents the value.
//
// Pure (no I/O, no clocks): BuildAllocationRecords turns what kubelet allocated into one record
// per pod; DecideRecordPatches compares them with the pods as the API has them and says which
// pods to patch (only pods bound to this node, only when the value differs, with their UID as
// the precondition); RecordWrites covers a pod cache that has not seen the recorder's own patches
// yet; RecordBackoff paces retries of failed patches.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/inventory.h"
#include "core/resource_plan.h"

namespace gpushare::alloc {

inline constexpr std::string_view kAllocationsAnnotation = "gpushare.io/allocations";
inline constexpr int kRecordVersion = 1;
// Bounds that keep the annotation small (the API server allows 256 KiB for all annotations of
// an object together; a device entry is about 200 bytes): at most this many containers and
// device entries per record (the first containers by name keep theirs); the device entries
// left out are counted in `truncated`.
inline constexpr size_t kMaxContainers = 64;
inline constexpr size_t kMaxDevicesPerRecord = 256;

enum class DeviceKind {
  kWhole,    // a whole GPU
  kReplica,  // one time-sliced replica of a GPU ("<uuid>::<n>")
  kMig,      // a MIG instance (replicated or not)
  kMemory,   // memory units of one GPU (aliyun.com/gpu-mem), merged per GPU
  kUnknown,  // an ID the current plan does not know (kept so nothing is hidden)
};
std::string_view DeviceKindName(DeviceKind k);  // "whole", "replica", "mig", "memory", "unknown"
std::optional<DeviceKind> ParseDeviceKind(std::string_view s);

// One device (or, for memory shares, the units of one GPU) a container holds.
struct DeviceRecord {
  std::string id;  // the device ID kubelet allocated (memory: the least unit ID)
  DeviceKind kind = DeviceKind::kUnknown;
  int gpu = -1;            // the physical GPU's index, -1 when unknown
  std::string uuid;        // the physical GPU's UUID
  int replica = -1;        // n of "::n"; -1 when not replicated
  std::string mig;         // the MIG device's UUID (kind mig)
  std::string profile;     // the MIG profile, e.g. "1g.10gb" (kind mig)
  int64_t units = 0;       // memory units (kind memory)
  int64_t memory_mib = 0;  // memory reserved for the container on this device: the whole GPU,
                           // the MIG instance, the units, or a replica's limit; 0 = not reserved
                           // (a replica without a memory limit shares its GPU's memory)

  bool operator==(const DeviceRecord&) const = default;
};

struct ContainerRecord {
  std::string name;
  std::string resource;               // "nvidia.com/gpu", "aliyun.com/gpu-mem", ...
  std::vector<DeviceRecord> devices;  // sorted by (gpu, replica, id)

  bool operator==(const ContainerRecord&) const = default;
};

// The physical GPUs the record's devices live on (model and memory for a reader that has no
// inventory of the node).
struct GpuRecord {
  int index = 0;
  std::string uuid;
  std::string model;
  int64_t memory_mib = 0;

  bool operator==(const GpuRecord&) const = default;
};

struct AllocationRecord {
  int version = kRecordVersion;
  std::string node;
  std::vector<ContainerRecord> containers;  // sorted by (name, resource)
  std::vector<GpuRecord> gpus;              // sorted by index
  int64_t truncated = 0;                    // device entries left out

  bool operator==(const AllocationRecord&) const = default;
};

// One container's devices of one resource, as kubelet's PodResources List reports them.
struct AllocatedDevices {
  std::string pod_namespace;
  std::string pod_name;
  std::string container;
  std::string resource;
  std::vector<std::string> device_ids;
};

// One record per pod ("namespace/name") for the devices of gpushare's resources (those of
// `plan`; other resources are ignored). A device ID the plan does not know (a device of an
// earlier plan) is recorded with kind unknown, and what its ID says (the UUID of "<uuid>::n").
std::map<std::string, AllocationRecord> BuildAllocationRecords(
    std::string_view node, const ResourcePlan& plan, const Inventory& inventory,
    const std::vector<AllocatedDevices>& allocated);

// A pod as the API has it, as far as the recorder cares.
struct PodState {
  std::string key;  // "namespace/name"
  std::string uid;
  std::string node_name;             // spec.nodeName
  std::optional<std::string> value;  // the current gpushare.io/allocations, if any
  std::string version;               // metadata.resourceVersion
};

struct RecordPatch {
  std::string key;
  std::string uid;    // the precondition: patch only this pod, not a namesake
  std::string value;  // the new annotation value
  std::string seen;   // the resourceVersion of the pod it was decided on
};

// The pods to patch: those in `desired` (pod key -> encoded record) that exist in `pods`, are
// bound to `node` and whose annotation differs. Pods kubelet lists that the API does not have
// (gone, or not yet seen) or that are bound elsewhere are skipped; nothing is ever removed.
std::vector<RecordPatch> DecideRecordPatches(std::string_view node,
                                             const std::map<std::string, std::string>& desired,
                                             const std::vector<PodState>& pods);

// The recorder's own patches that its pod cache may not show yet. The cache follows a watch, and
// a watch lags behind the writes (seconds on a busy API server), so for a while after a patch the
// cache still holds the pod as it was. While the cached pod is the very version a patch was
// decided on (same UID and resourceVersion), the patched value counts as in place: a lagging
// cache never causes the same patch twice. Any other version (the watch caught up, or someone
// else wrote the pod) is taken as it is, and the entry is dropped.
class RecordWrites {
 public:
  void Wrote(const RecordPatch& patch);
  // The pod as far as DecideRecordPatches should see it: `pod`, or `pod` with the value of a
  // patch its cached version does not show yet.
  PodState Current(PodState pod);
  // Forgets pods not in `keys`.
  void Retain(const std::map<std::string, std::string>& keys);
  size_t size() const { return pending_.size(); }

 private:
  std::map<std::string, RecordPatch> pending_;  // pod key -> the last successful patch
};

// Per-pod retry pacing after failed patches: doubling from `initial_ms` up to `max_ms`; a
// success forgets the pod.
class RecordBackoff {
 public:
  RecordBackoff(int64_t initial_ms = 1000, int64_t max_ms = 60000)
      : initial_ms_(initial_ms), max_ms_(max_ms) {}
  bool Allowed(const std::string& key, int64_t now_ms) const;
  void Failed(const std::string& key, int64_t now_ms);
  void Succeeded(const std::string& key) { state_.erase(key); }
  // Forgets pods not in `keys` (gone from kubelet's list).
  void Retain(const std::map<std::string, std::string>& keys);
  size_t size() const { return state_.size(); }

 private:
  struct Entry {
    int64_t next_ms = 0;
    int64_t delay_ms = 0;
  };
  int64_t initial_ms_;
  int64_t max_ms_;
  std::map<std::string, Entry> state_;
};

}  // namespace gpushare::alloc
