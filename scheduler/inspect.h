// Inspect: the JSON of PREFIX/inspect and PREFIX/inspect/NODE (the paths Alibaba's extender
// used), a read-only view of what gpushare-scheduler's cache holds: per node and GPU the model,
// memory total and allocated, health, the pods on it with their shares (assumed or confirmed),
// and the node's pending (assumed) pods. The schema is in docs/scheduler.md ("Inspect").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/memshare.h"
#include "scheduler/cache.h"
#include "scheduler/extender.h"

namespace gpushare::scheduler {

// {"unit": "GiB", "nodes": [...], "totals": {...}}
std::string EncodeInspect(const std::vector<InspectNode>& nodes, memshare::MemoryUnit unit);
// One node object.
std::string EncodeInspectNode(const InspectNode& node, memshare::MemoryUnit unit);

// The GET handler: `rest` is what follows PREFIX/inspect ("" or "/NODE"). 404 with a JSON
// {"Error": ...} for a node the cache does not know.
HttpReply ServeInspect(const GpuCache& cache, memshare::MemoryUnit unit, std::string_view rest);

}  // namespace gpushare::scheduler
