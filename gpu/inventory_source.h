// InventorySource: where a node's GPU inventory comes from (NVML, or a simulated inventory
// file), and what the agent does when it cannot get one.
//
// Backends: gpu/file_inventory.h (--inventory FILE, for machines without GPUs and for tests)
// and gpu/nvml_inventory.h (libnvidia-ml.so.1 through dlopen). Both produce core's Inventory.
#pragma once

#include <memory>
#include <string>

#include "core/inventory.h"
#include "core/status.h"

namespace gpushare {

class InventorySource {
 public:
  virtual ~InventorySource() = default;
  // Discovers the GPUs now. A node without GPUs is an error (kNotFound) with a message an
  // operator can act on; so is a missing or broken NVML (kUnavailable / kFailedPrecondition).
  virtual Result<Inventory> Load() = 0;
  // "nvml" or the inventory file path, for logs.
  virtual std::string Describe() const = 0;
};

// What to do when the inventory cannot be loaded at start (NVIDIA's failOnInitError):
// exit non-zero (default), or log the reason and wait idle so that a DaemonSet on nodes
// without GPUs stays Running without crash-looping.
enum class InitFailureAction { kExit, kWaitIdle };

struct InitFailureDecision {
  InitFailureAction action = InitFailureAction::kExit;
  int exit_code = 1;    // for kExit
  std::string message;  // the line to log, naming the problem and the way out
};

InitFailureDecision DecideOnInitFailure(const Status& error, bool fail_on_init_error);

}  // namespace gpushare
