// Allocation: what one container is given for the device IDs kubelet chose.
//
// Kubelet calls Allocate with device IDs only (no pod identity). Everything a container gets
// follows from those IDs, the resource they belong to and the node's plugin flags:
//   - ResolveDevices checks the IDs (known, healthy, no duplicates, failRequestsGreaterThanOne);
//   - BuildContainerAllocation turns the resolved devices into environment, mounts, device
//     nodes, annotations and CDI names per flags.plugin.deviceListStrategy/deviceIDStrategy/
//     passDeviceSpecs (NVIDIA's documented behaviour: replicas of one GPU collapse to one UUID);
//   - an AllocationDecorator, when set, adds more (the in-container library's environment and
//     mounts are added this way by the interposer integration), after the strategy's answer.
// The result is a plain value; the gRPC server converts it to a ContainerAllocateResponse.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/node_config.h"
#include "core/resource_plan.h"
#include "core/status.h"

namespace gpushare::deviceplugin {

// Where the container list of devices is mounted under the volume-mounts strategy.
inline constexpr const char* kVolumeMountsRoot = "/var/run/nvidia-container-devices";
inline constexpr const char* kVisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES";

struct MountSpec {
  std::string container_path;
  std::string host_path;
  bool read_only = false;
  bool operator==(const MountSpec&) const = default;
};

struct DeviceNodeSpec {
  std::string container_path;  // e.g. /dev/nvidia0
  std::string host_path;       // <dev root>/dev/nvidia0
  std::string permissions;     // "rw"
  bool operator==(const DeviceNodeSpec&) const = default;
};

// What one container gets. Mirrors ContainerAllocateResponse field for field.
struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<MountSpec> mounts;
  std::vector<DeviceNodeSpec> device_nodes;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;  // fully qualified CDI names
  // Not sent to kubelet: the container's compute share in percent (0: none), set by the
  // memory-share step (a pod's aliyun.com/gpu-core.percentage); the interposer step makes it the
  // SM limit of the container's GPU, over what the plan gives its devices.
  uint32_t sm_limit_percent = 0;
  // Why the container cannot be given its devices (e.g. a MIG device whose nvidia-caps minors
  // are unknown with passDeviceSpecs); Allocate refuses with it. Empty = fine.
  std::string problem;
};

// The checked request of one container: its devices, in the order kubelet sent them.
struct ResolvedRequest {
  const PlannedResource* resource = nullptr;
  std::vector<const PlannedDevice*> devices;
};

// Hook run after the strategy's answer is built, e.g. to add the interposer's environment and
// mounts. Returning an error fails the Allocate call with that error (admission fails).
using AllocationDecorator =
    std::function<Status(const ResolvedRequest& request, ContainerAllocation* allocation)>;

// Looks up device IDs in a resource, and numbers the units devices are built on (the GPU or
// MIG device a replica belongs to, and the physical GPU) so that allocation policies can
// count per unit with plain integers. Health is the resource's health when the index is built.
class DeviceIndex {
 public:
  explicit DeviceIndex(const PlannedResource& resource);

  const PlannedResource& resource() const { return *resource_; }
  const PlannedDevice* Find(const std::string& id) const;
  // Position of `id` in resource().devices, or -1.
  int Position(const std::string& id) const;

  int unit_of(int pos) const { return unit_of_[pos]; }  // by device_uuid
  int gpu_of(int pos) const { return gpu_of_[pos]; }    // by gpu_uuid
  int unit_count() const { return static_cast<int>(healthy_per_unit_.size()); }
  int gpu_count() const { return static_cast<int>(healthy_per_gpu_.size()); }
  int healthy_in_unit(int unit) const { return healthy_per_unit_[unit]; }
  int healthy_in_gpu(int gpu) const { return healthy_per_gpu_[gpu]; }

 private:
  const PlannedResource* resource_;
  std::unordered_map<std::string, int> by_id_;
  std::vector<int> unit_of_, gpu_of_;
  std::vector<int> healthy_per_unit_, healthy_per_gpu_;
};

// Checks one container's device IDs: non-empty, no duplicates, every ID known and healthy, and
// at most one device when the resource is shared with failRequestsGreaterThanOne. Errors name
// the offending IDs: kInvalidArgument for malformed or unknown, kFailedPrecondition for
// unhealthy devices and the failRequestsGreaterThanOne refusal.
Result<ResolvedRequest> ResolveDevices(const DeviceIndex& index,
                                       const std::vector<std::string>& ids);

// Which optional control device nodes exist on the host (checked under the dev root).
struct HostDeviceNodes {
  bool nvidiactl = false;
  bool nvidia_uvm = false;
  bool nvidia_uvm_tools = false;
  bool nvidia_modeset = false;
  // The driver's MIG capability minors ("gpu0/gi1/access" -> 12, "gpu0/gi1/ci0/access" -> 13),
  // from /proc/driver/nvidia-caps/mig-minors; a MIG device's container needs
  // /dev/nvidia-caps/nvidia-cap<minor> for its GPU instance and its compute instance.
  std::map<std::string, int> mig_minors;
  std::string mig_minors_source;  // the file they were read from ("" when none was readable)
};

// Checks <dev_root>/dev/nvidiactl, nvidia-uvm, nvidia-uvm-tools and nvidia-modeset, and reads
// the MIG capability minors from <dev_root>/proc/driver/nvidia-caps/mig-minors, else from
// /proc/driver/nvidia-caps/mig-minors (the kernel's, as NVIDIA's plugin reads it).
HostDeviceNodes ProbeHostDeviceNodes(const std::string& dev_root);

// Parses the text of mig-minors: lines "<name> <minor>"; malformed lines are skipped.
std::map<std::string, int> ParseMigMinors(const std::string& text);

// Node-wide additions to every container's environment (NVIDIA's flags.gdrcopyEnabled,
// gdsEnabled, mofedEnabled -> NVIDIA_GDRCOPY/NVIDIA_GDS/NVIDIA_MOFED=enabled; imex.channelIDs
// -> NVIDIA_IMEX_CHANNELS, with the envvar strategy).
struct ExtraEnv {
  bool gdrcopy = false;
  bool gds = false;
  bool mofed = false;
  std::vector<int> imex_channels;

  static ExtraEnv FromConfig(const NodeConfig& config);
};

// The strategy's answer for a resolved request. Pure: host facts come in through `nodes`.
ContainerAllocation BuildContainerAllocation(const ResolvedRequest& request,
                                             const PluginFlags& flags, const HostDeviceNodes& nodes,
                                             const ExtraEnv& extra = {});

// The device names a container is given, one per underlying GPU or MIG device (replicas of one
// device collapse), per deviceIDStrategy: UUIDs, or "i" / "i:j" indices.
std::vector<std::string> VisibleDeviceNames(const ResolvedRequest& request,
                                            DeviceIdStrategy strategy);

}  // namespace gpushare::deviceplugin
