// Device health: the pure state machine that turns GPU error events into Healthy/Unhealthy.
//
// The node agent feeds it events from a HealthEventSource (gpu/health_events.h: NVML XID
// events, or an injected events file for tests) and the current time; it answers with the
// transitions to log and to push to kubelet through ListAndWatch. Unlike NVIDIA's plugin a
// device can come back: after `recovery_ms` without a new error it is Healthy again.
//
//   * A non-ignored XID on a GPU marks the GPU Unhealthy, and with it every device built on
//     it: its MIG instances and all replicas (ApplyTo maps units to planned devices).
//   * A MIG-scoped event (NVML reports the GI/CI) marks only that MIG instance.
//   * "Device lost" (the GPU fell off the bus, or the event source itself failed) is sticky:
//     no quiet period brings it back; only a restart with a fresh inventory does.
//   * XIDs in the ignore list change nothing (defaults 13, 31, 43, 45, 68, 109, as NVIDIA).
//
// No clocks here: every call carries the time, in milliseconds on any base the caller keeps
// consistent (the agent uses a steady clock).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/inventory.h"
#include "core/node_config.h"
#include "core/resource_plan.h"

namespace gpushare {

enum class HealthEventKind {
  kXid,         // an XID critical error (NVML event type XidCriticalError)
  kDeviceLost,  // the device is gone (XID 79 style "fallen off the bus", event wait failure)
};

struct HealthEvent {
  HealthEventKind kind = HealthEventKind::kXid;
  std::string uuid;  // GPU or MIG UUID; empty = every GPU of the node
  uint32_t xid = 0;  // for kXid
  int64_t time_ms = 0;
  std::string detail;  // free text for logs, e.g. the NVML error
};

struct HealthOptions {
  bool enabled = true;
  std::vector<uint32_t> ignored_xids = {13, 31, 43, 45, 68, 109};
  int64_t recovery_ms = 300'000;  // quiet period before an Unhealthy device is Healthy; 0 = never
};

HealthOptions HealthOptionsFromSettings(const GpushareSettings& s);

// One change of a unit's (GPU or MIG instance) health, for the log and for ListAndWatch.
struct HealthTransition {
  std::string uuid;  // the GPU or MIG device
  int gpu_index = 0;
  int mig_index = -1;    // j of "i:j" for a MIG instance
  bool healthy = false;  // the new state
  std::string reason;    // "xid 79 on GPU-...", "no error for 300s", ...
  int64_t time_ms = 0;
};

class HealthTracker {
 public:
  HealthTracker(const Inventory& inventory, HealthOptions options);

  // Applies one event. Returns the transitions it causes (none when the device was already
  // Unhealthy, or when the event is ignored; then *ignored says why, if given).
  std::vector<HealthTransition> OnEvent(const HealthEvent& event, std::string* ignored = nullptr);

  // Takes over what `previous` (the tracker of the config before a reload) knew about the units
  // both have: Unhealthy devices stay Unhealthy, with their last error time, so a reload never
  // hands out a GPU that is failing. Nothing is taken over when health checks are disabled.
  // Returns how many units were carried over Unhealthy.
  int CarryOver(const HealthTracker& previous);

  // Brings back devices whose quiet period has passed by `now_ms`.
  std::vector<HealthTransition> Advance(int64_t now_ms);

  // When Advance would next change something; nullopt when nothing is waiting to recover.
  std::optional<int64_t> NextRecoveryMs() const;

  // The effective health of a GPU or MIG unit: a MIG instance is Unhealthy when it or its GPU
  // is. Unknown UUIDs are reported Healthy.
  bool IsHealthy(const std::string& uuid) const;

  // Sets PlannedDevice::healthy for every device of the plan. A whole GPU is Unhealthy when
  // the GPU or any of its MIG instances is (it is handed out with all of them).
  void ApplyTo(ResourcePlan* plan) const;

  const HealthOptions& options() const { return options_; }

 private:
  struct Unit {
    std::string uuid;
    std::string parent;  // the GPU UUID of a MIG instance, empty for a GPU
    int gpu_index = 0;
    int mig_index = -1;
    bool unhealthy = false;
    bool sticky = false;
    int64_t last_error_ms = 0;
  };
  std::map<std::string, bool> Snapshot() const;
  std::vector<HealthTransition> Diff(const std::map<std::string, bool>& before,
                                     const std::string& reason, int64_t time_ms) const;
  bool Effective(const Unit& u) const;

  HealthOptions options_;
  std::vector<Unit> units_;                // GPUs and MIG instances in inventory order
  std::map<std::string, size_t> by_uuid_;  // uuid -> index into units_
};

}  // namespace gpushare
