// The scheduler cache's private parts (scheduler/cache.h): the node and pod records and the
// helpers its files share. The cache is one class in five files, one concept each:
//   - cache.cc: decisions (filter, prioritize, reserve, bind's bookings, expiry, plan moves);
//   - cache_records.cc: the records, from the informers' nodes and pods;
//   - cache_engine.cc: the placement engine's mirror of the records, and the per-node checks;
//   - cache_preempt.cc: nominations and the views preemption works on;
//   - cache_inspect.cc: introspection (GPU states, stats, `gpushare inspect`).
// Private to scheduler/cache*.cc.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string_view>
#include <unordered_set>

#include "base/logfmt.h"
#include "core/memshare_ledger.h"
#include "core/memshare_node.h"
#include "core/reasons.h"
#include "kube/memshare_pod.h"
#include "kube/pod_requests.h"
#include "kube/timestamps.h"
#include "scheduler/cache.h"

namespace gpushare::scheduler {

namespace ms = memshare;
namespace pl = placement;

struct GpuCache::NodeRec {
  std::string name;
  int32_t id = -1;  // in node_index_, by_id_ and hot_
  pl::NodeId eid = -1;
  bool exists = false;  // the Node object is known
  bool has_inventory = false;
  // The engine's view: usable GPUs only, slot -> GPU index.
  std::vector<int> slots;
  int64_t share_units = 0;      // units of each usable GPU when all have the same, else 0
  int64_t units_max = 0;        // units of the largest usable GPU
  kube::CpuMemory allocatable;  // the Node's (0: not published, then unbounded for the engine)
  kube::CpuMemory cpu_used;     // requests of the pods bound here (pod_cpu_)
  std::string problem;          // why the node cannot take shares (when !has_inventory or no GPU)
  std::string_view problem_code = reasons::kNodeUnknown;  // its core/reasons.h code
  std::string inventory_text;                             // the annotation as last decoded
  ms::NodeInventory inv;
  // Usage per GPU index, in thousandths of the node's unit (memshare::PodRequest::InMilliUnits:
  // fractions exact): every counted pod where the scheduler placed it (plan), and where its
  // annotations say it is (current); the slots of pods not yet confirmed by the agent (pending)
  // by key. `used`/`clients` are what decisions count (memshare::EffectiveUsage of the two).
  std::map<int, ms::GpuUse> plan, current;
  int pending = 0;
  std::map<ms::SlotKey, int> pending_keys;
  int odd_pending = 0;  // pending slots whose key is not plain (an init container first, or
                        // a compute share): only they can clash with a pod's (FreshConflict)
  // Slots kept counted after their pods were released (memshare::ReleaseNeedsGuard), or the
  // whole node held back after a start, until the pods in `waiting` are confirmed or gone.
  struct Guard {
    std::map<int, ms::GpuUse> hold;
    bool whole_node = false;
    std::set<std::string> waiting;  // pod UIDs
    int64_t since_ns = 0;           // whole_node: the first sweep after the start
  };
  std::vector<Guard> guards;
  int held_back = 0;  // whole-node guards
  // Preemption's holds here (Nomination), per GPU index, and their nominees.
  std::map<int, ms::GpuUse> nominated;
  std::set<std::string> nominees;
  std::map<int, int64_t> used;
  std::map<int, int> clients;
  std::map<int, int64_t> core;          // compute shares booked per GPU index, in percent
  std::map<std::string, PodRec*> pods;  // counted here, by UID
  std::vector<pl::PlacementId> bookings;

  bool Usable(const ms::InventoryGpu& g) const { return g.ServesMemoryShares(); }
  int64_t CoreOn(int index) const {
    const auto it = core.find(index);
    return it == core.end() ? 0 : it->second;
  }
  int SlotOf(int index) const {
    for (size_t s = 0; s < slots.size(); ++s)
      if (slots[s] == index) return static_cast<int>(s);
    return -1;
  }
};

struct GpuCache::PodRec {
  enum class State { kReserved, kBound, kAssumed, kConfirmed, kExpired };
  std::string uid, key, node;
  ms::PodRequest request;
  std::vector<int64_t> demands;        // its target-workload key (WorkloadKey)
  ms::ContainerGpus gpus;              // where the annotations say the containers are
  ms::ContainerGpus planned;           // where the scheduler placed them
  std::map<int, ms::GpuUse> use;       // counted on `node` at `gpus` (empty when nothing is)
  std::map<int, ms::GpuUse> plan_use;  // counted on `node` at `planned`
  std::vector<ms::SlotKey> keys;       // per demand
  bool counted = false;
  State state = State::kAssumed;
  // What preemption needs (from the informer's last copy of the pod).
  int32_t priority = 0;
  int64_t start_ns = 0;
  bool terminating = false;
  kube::CpuMemory requests;
  bool Pending() const;  // placed, not yet confirmed by the node agent
  void TakeFacts(const kube::Pod& pod);
  int64_t assume_ns = 0;
  bool pending = true;  // phase Pending (or not yet set)
  uint64_t token = 0;
  bool shape_counted = false;
};

namespace cache_internal {

// Thousandths of a unit as units: "3", "3.75".
std::string MilliNumber(int64_t milli);

// The same with the unit: "3 GiB", "3.75 GiB".
std::string MilliUnits(int64_t milli, ms::MemoryUnit u);

// Whole units covering `milli` thousandths (what the scheduler reports of a GPU's use).
int64_t CeilUnits(int64_t milli);

// A placement for the log: "main:0,side:1".
std::string GpuList(const ms::ContainerGpus& g);

// The demand order of the engine's PodShape (whole GPUs first, then shares sorted largest
// first) mapped back to the request's demand order (`key`: PodRequest::ShapeKey, a whole GPU
// negative): order[i] is the demand that the shape's i-th GPU stands for.
std::vector<size_t> ShapeOrder(const std::vector<int64_t>& key);

// A target-workload key: the pod's CPU request, then its EngineKey. The policies weigh a shape's
// CPU as gpushare simulate does with the trace's (FGD: a node without the CPU for a typical pod
// strands its GPUs for it; default: the CPU per GPU of GPU pods).
std::vector<int64_t> WorkloadKey(int64_t cpu_milli, const std::vector<int64_t>& engine_key);

// The usage of `request` (resolved against GPUs of `share_units`) at `gpus`, in thousandths of a
// unit: what the cache counts (NodeRec's usage maps).
std::map<int, ms::GpuUse> MilliUsage(int64_t share_units, const ms::PodRequest& request,
                                     const ms::ContainerGpus& gpus);

// MilliUsage on the GPUs the node's inventory knows (on all of them while it has none yet).
std::map<int, ms::GpuUse> KnownUsage(const ms::NodeInventory& inv, bool has_inventory,
                                     int64_t share_units, const ms::PodRequest& request,
                                     const ms::ContainerGpus& gpus);

// Adds (sign 1) or takes away (-1) `use` from `total`; a GPU left at nothing is erased.
void AddTo(std::map<int, ms::GpuUse>& total, const std::map<int, ms::GpuUse>& use, int sign);

// A verdict of `kind` with its core/reasons.h code and message.
NodeVerdict Verdict(NodeVerdict::Kind kind, std::string_view code, std::string reason);

// "GPU 0: <why>; GPU 1: <why>" for the excluded slots, at most four GPUs, then how many more.
std::string ExclusionList(const std::vector<int>& slots, const std::vector<std::string>& why);

}  // namespace cache_internal
}  // namespace gpushare::scheduler
