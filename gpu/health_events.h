// HealthEventSource: where GPU error events come from, for core's HealthTracker.
//
// Two sources:
//   * NVML: an event set with XidCriticalError registered on every GPU; nvmlEventSetWait_v2
//     yields the XID and, for a MIG-enabled GPU, the GI/CI that map the event to one MIG
//     instance. NVML_ERROR_GPU_IS_LOST becomes a "device lost" event for every GPU.
//   * An events file (`gpushare-node --health-events FILE`), for the simulated inventory and
//     for tests of the real binary. The agent follows the file like `tail -f` from its start;
//     each complete line is one event (docs/inventory.md, "Injecting health events"):
//         xid=79 uuid=GPU-4a1c...      an XID on a GPU (or a MIG device, uuid=MIG-...)
//         xid=48                       an XID on every GPU
//         lost uuid=GPU-4a1c...        the GPU is gone (sticky)
//         lost                         every GPU is gone
//     '#' starts a comment; blank lines are skipped. A malformed line is reported and skipped.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "core/health.h"
#include "core/inventory.h"
#include "core/status.h"
#include "gpu/nvml_library.h"

namespace gpushare {

struct HealthPoll {
  std::vector<HealthEvent> events;
  std::vector<std::string> problems;  // malformed input, for the log
};

class HealthEventSource {
 public:
  virtual ~HealthEventSource() = default;
  // Waits up to `timeout` for events and returns what arrived (possibly nothing). An error
  // means the source itself broke; the caller decides (NVIDIA marks every device Unhealthy).
  virtual Result<HealthPoll> Wait(std::chrono::milliseconds timeout) = 0;
};

// Parses one events-file line. Blank and comment lines give an empty optional (no error).
Result<std::optional<HealthEvent>> ParseHealthEventLine(const std::string& line);

// Events are stamped with `clock`'s NowMs.
std::unique_ptr<HealthEventSource> MakeEventsFileSource(std::string path,
                                                        std::shared_ptr<Clock> clock = RealClock());

// Registers XidCriticalError on every GPU of `inventory` that supports it.
Result<std::unique_ptr<HealthEventSource>> MakeNvmlHealthEventSource(
    std::shared_ptr<NvmlLibrary> nvml, const Inventory& inventory,
    std::shared_ptr<Clock> clock = RealClock());

}  // namespace gpushare
