// `gpushare inspect region FILE`: prints an interposer accounting region (interpose/region.h):
// its layout version, per GPU the UUID, memory limit, bytes used, SM limit and refusals, per
// process slot the pid, start time, whether it is alive (seen from this PID namespace) and its
// usage. Read-only: the file is read with pread into memory, never mapped, never locked, never
// written, so a container is never slowed or blocked. A file that is too short, not a region, or
// in another layout version is refused with a message that says which.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpushare::cli {

struct RegionDeviceInfo {
  int index = 0;     // position in the region's device table
  std::string uuid;  // "GPU-xxxxxxxx-xxxx-..." form of the 16 bytes
  bool limited = false;
  uint64_t memory_limit = 0;
  uint64_t used = 0;
  uint32_t sm_limit = 0;  // percent, 0 = none
  uint64_t oom_refusals = 0;
  uint64_t launches = 0;  // SM limiter: admitted
  uint64_t delayed = 0;   // SM limiter: launches that waited
};

struct RegionProcessInfo {
  int slot = 0;
  int32_t pid = 0;
  uint64_t start_time = 0;
  std::string state;           // "alive", "dead" (this PID namespace), "reused" (pid, other start)
  std::vector<uint64_t> used;  // per device index, bytes
};

struct RegionInfo {
  uint32_t layout_version = 0;
  uint64_t file_size = 0;
  bool ready = false;
  uint32_t slot_high_water = 0;
  uint64_t repairs = 0;
  uint64_t reclaimed_slots = 0;
  std::vector<RegionDeviceInfo> devices;
  std::vector<RegionProcessInfo> processes;
};

// Reads a region file. Errors: unreadable, truncated, foreign (no region magic), another layout.
Result<RegionInfo> ReadRegionFile(const std::string& path);
std::string FormatRegion(const std::string& path, const RegionInfo& info);
int RunInspectRegion(const std::string& path);

}  // namespace gpushare::cli
