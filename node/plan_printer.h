// Plan printer: the resource plan (and the inventory it came from) as an operator reads it,
// for `gpushare-node --print-resources [--output table|json]`.
//
// The table shows the GPUs, then one row per advertised resource (devices, healthy, replicas,
// per-device memory limit, socket, which GPUs). The JSON carries everything, one object per
// device, with the inventory in the same camelCase field names as the inventory file
// (docs/inventory.md), so scripts and tests can check any figure. The node form is the Node
// object as the API shows it once gpushare-node and kubelet have published this plan: the
// gpushare.io/gpu-inventory annotation gpushare-node writes (memshare::BuildNodeInventory), and
// per advertised resource its devices as capacity and its healthy ones as allocatable (what
// kubelet reports for a device plugin), with aliyun.com/gpu-count where memory shares publish
// it. The scale harness (scripts/e2e-scale.sh) registers its simulated nodes from it, so that
// they carry what a real node would, from the same code.
#pragma once

#include <string>
#include <vector>

#include "core/inventory.h"
#include "core/node_config.h"
#include "core/resource_plan.h"

namespace gpushare::node {

enum class PlanFormat { kTable, kJson, kNode };

struct PlanPrintInput {
  const Inventory* inventory = nullptr;
  const NodeConfig* config = nullptr;
  const ResourcePlan* plan = nullptr;
  std::string config_path;         // empty = defaults only
  std::vector<std::string> notes;  // config notes; the plan's own notes are added
  std::string node_name;           // the Node's name (kNode)
};

std::string FormatPlan(const PlanPrintInput& in, PlanFormat format);

// The name flags.migStrategy takes for `s`: none, single or mixed.
const char* MigStrategyName(MigStrategy s);

}  // namespace gpushare::node
