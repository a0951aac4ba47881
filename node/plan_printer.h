// Plan printer: the resource plan (and the inventory it came from) as an operator reads it,
// for `gpushare-node --print-resources [--output table|json]`.
//
// The table shows the GPUs, then one row per advertised resource (devices, healthy, replicas,
// per-device memory limit, socket, which GPUs). The JSON carries everything, one object per
// device, with the inventory in the same camelCase field names as the inventory file
// (docs/inventory.md), so scripts and tests can check any figure.
#pragma once

#include <string>
#include <vector>

#include "core/inventory.h"
#include "core/node_config.h"
#include "core/resource_plan.h"

namespace gpushare::node {

enum class PlanFormat { kTable, kJson };

struct PlanPrintInput {
  const Inventory* inventory = nullptr;
  const NodeConfig* config = nullptr;
  const ResourcePlan* plan = nullptr;
  std::string config_path;         // empty = defaults only
  std::vector<std::string> notes;  // config notes; the plan's own notes are added
};

std::string FormatPlan(const PlanPrintInput& in, PlanFormat format);

// The name flags.migStrategy takes for `s`: none, single or mixed.
const char* MigStrategyName(MigStrategy s);

}  // namespace gpushare::node
