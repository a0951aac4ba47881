// InterposerContract: what gpushare-node's Allocate gives a container so that the in-container
// library (libgpushare-cuda.so, docs/interposer.md) enforces its GPU memory limit and SM share.
//
// One contract, pure (no I/O): from the container's GPUs and their limits to
//   - the environment, HAMi-core compatible: CUDA_DEVICE_MEMORY_LIMIT_<i>=<n>m,
//     CUDA_DEVICE_SM_LIMIT_<i>=<pct>, CUDA_DEVICE_MEMORY_SHARED_CACHE=<region file>, where <i> is
//     the position of the GPU in the container's device list;
//   - the config file (kContainerConfigPath), which the library prefers to the environment: it
//     names GPUs by UUID (so a process that renumbers them with CUDA_VISIBLE_DEVICES still gets
//     the right limit) and survives `su`/`ssh` sessions that drop the environment;
//   - the /etc/ld.so.preload contents that load the library into every process;
//   - the mounts: the library (read-only), the per-container directory's `shared/` (the
//     accounting region, read-write), the config and the preload file (read-only).
// node/interposer_mounts.h creates the host files and calls this.
//
// Limits per GPU: the sum of the memory_limit_mib of the container's devices on that GPU
// (replicas of one GPU given to one container add up; memory-share units carry their unit
// size). A GPU is limited only when every one of its devices carries a limit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/resource_plan.h"
#include "core/status.h"

namespace gpushare {

// Fixed paths inside the container (the library looks for its config at kContainerConfigPath).
inline constexpr const char* kContainerLibraryPath = "/usr/local/gpushare/lib/libgpushare-cuda.so";
inline constexpr const char* kContainerConfigPath = "/etc/gpushare/config";
inline constexpr const char* kContainerSharedDir = "/var/lib/gpushare";
inline constexpr const char* kContainerRegionPath = "/var/lib/gpushare/region";
inline constexpr const char* kContainerPreloadPath = "/etc/ld.so.preload";
inline constexpr const char* kLibraryFileName = "libgpushare-cuda.so";

struct InterposerDevice {
  std::string uuid;               // GPU-... or MIG-...
  uint64_t memory_limit_mib = 0;  // 0 = none
  uint32_t sm_limit_percent = 0;  // 0 (or 100) = none
};

// The container's GPUs, in the order of its device list, with summed limits: memory limits add
// up (none if one device has none), and so do SM shares (PlannedDevice::sm_share_ppm), as a
// whole percent rounded down, at least 1, and none for the whole device or a device without one.
std::vector<InterposerDevice> InterposerDevicesFor(
    const std::vector<const PlannedDevice*>& devices);

// Whether any device carries a limit (memory, or an SM limit below 100 %): what makes a
// container need the library at all.
bool AnyLimited(const std::vector<InterposerDevice>& devices);

struct InterposerMount {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
  bool operator==(const InterposerMount&) const = default;
};

struct InterposerOptions {
  std::string library_host_dir;    // NodeConfig gpushare.interposer_host_dir
  std::string container_host_dir;  // this container's directory under container_state_dir
  // Optional overrides written to the config file (empty/0 = the library's default).
  uint64_t context_overhead_mib = 0;
};

struct InterposerSetup {
  std::map<std::string, std::string> envs;
  std::string config_text;   // contents of <container_host_dir>/config
  std::string preload_text;  // contents of <container_host_dir>/ld.so.preload
  std::vector<InterposerMount> mounts;
  bool enforces_anything() const { return !config_text.empty(); }
};

// Builds the setup. Nothing to enforce (no device limited) gives an empty setup: the container
// gets neither variables nor mounts. Errors (kInvalidArgument) name what is wrong: relative or
// empty directories, an SM limit above 100, a device without a UUID.
Result<InterposerSetup> BuildInterposerSetup(const std::vector<InterposerDevice>& devices,
                                             const InterposerOptions& options);

}  // namespace gpushare
