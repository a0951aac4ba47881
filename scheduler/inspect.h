// gpushare-scheduler's two read-only JSON views (docs/scheduler.md, "Inspect"):
//
//   PREFIX/inspect, PREFIX/inspect/NODE (the paths Alibaba's extender used): the document
//     `gpushare inspect -o json` prints (kube/inspect_view.h, docs/inspect.md), built by the same
//     code from the nodes and pods the scheduler's informers hold, so that both show the same
//     thing. The scheduler watches no Events: a pending pod's reason comes from its PodScheduled
//     condition (the CLI also reads Events). With NODE: the view of that node alone, as
//     `gpushare inspect NODE -o json` prints it.
//   PREFIX/debug/cache, PREFIX/debug/cache/NODE: what the scheduler's GpuCache holds, in its own
//     schema: its bookings (assumed, confirmed, binds in flight), which nodes and GPUs it
//     considers usable and why not. For debugging the scheduler's decisions.
//
// Neither holds a lock while it builds or encodes: the inspect view copies the informers' lists
// (shared pointers to immutable objects, under each informer's lock only for the copy), the
// cache view copies the cache's state (GpuCache::Inspect, under the cache's lock).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/memshare.h"
#include "kube/inspect_view.h"
#include "kube/objects.h"
#include "scheduler/cache.h"
#include "scheduler/extender.h"

namespace gpushare::scheduler {

// ---- PREFIX/inspect ---------------------------------------------------------------------------

// Where PREFIX/inspect reads the cluster: the scheduler's node and pod informers (their List()
// and HasSynced()). Every member must be set.
struct InspectSource {
  std::function<std::vector<std::shared_ptr<const kube::Node>>()> nodes;
  std::function<std::vector<std::shared_ptr<const kube::Pod>>()> pods;
  std::function<bool()> synced;  // both informers have listed everything once
};

// The inspect view's input from the informers' objects: copies of the nodes and pods (with
// `node` set: only that node and the pods bound to it, all the view of that node needs), in the
// order the API server lists them (by namespace/name), and no Events.
kube::inspect::Input InspectInput(const std::vector<std::shared_ptr<const kube::Node>>& nodes,
                                  const std::vector<std::shared_ptr<const kube::Pod>>& pods,
                                  std::string_view node = {});

// The GET handler of PREFIX/inspect: `rest` is what follows it ("" or "/NODE"). 200 with
// ToJson(Build(input, {NODE})).dump(); 404 with a JSON {"Error": ...} naming the node for a node
// the node informer does not have (the API server does not), or a deeper path; 503 until both
// informers have synced (the view would be partial).
HttpReply ServeInspect(const InspectSource& source, std::string_view rest);

// ---- PREFIX/debug/cache -----------------------------------------------------------------------

// {"unit": "GiB", "nodes": [...], "totals": {...}}
std::string EncodeCacheView(const std::vector<InspectNode>& nodes, memshare::MemoryUnit unit);
// One node object.
std::string EncodeCacheViewNode(const InspectNode& node, memshare::MemoryUnit unit);

// The GET handler of PREFIX/debug/cache: `rest` is what follows it ("" or "/NODE"). 404 with a
// JSON {"Error": ...} for a node the cache does not know.
HttpReply ServeCacheView(const GpuCache& cache, memshare::MemoryUnit unit, std::string_view rest);

}  // namespace gpushare::scheduler
