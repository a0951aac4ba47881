#include "scheduler/cache.h"

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

namespace gpushare::scheduler {

using logfmt::Value;
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
  int odd_pending = 0;  // pending slots whose first request is smaller than their demand
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
  std::map<std::string, PodRec*> pods;  // counted here, by UID
  std::vector<pl::PlacementId> bookings;

  bool Usable(const ms::InventoryGpu& g) const { return g.ServesMemoryShares(); }
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

namespace {

std::string_view StateName(int s) {
  static const char* names[] = {"reserved", "bound", "assumed", "confirmed", "expired"};
  return names[s];
}

constexpr size_t kMaxAskedShapes = 1024;

// A GPU of every size is 1000 x L engine units (L: the least common multiple of the GPU sizes
// in units) while L stays below this; beyond, each node counts thousandths of its unit.
constexpr int64_t kMaxCommonUnits = 10'000'000;

// Thousandths of a unit as units: "3", "3.75".
std::string MilliNumber(int64_t milli) {
  std::string out = std::to_string(milli / ms::kMilliPerGpu);
  if (int64_t rest = milli % ms::kMilliPerGpu; rest != 0) {
    std::string frac = std::to_string(rest + ms::kMilliPerGpu).substr(1);
    while (frac.back() == '0') frac.pop_back();
    out += "." + frac;
  }
  return out;
}

// The same with the unit: "3 GiB", "3.75 GiB".
std::string MilliUnits(int64_t milli, ms::MemoryUnit u) {
  return MilliNumber(milli) + " " + std::string(ms::MemoryUnitName(u));
}

// Whole units covering `milli` thousandths (what the scheduler reports of a GPU's use).
int64_t CeilUnits(int64_t milli) {
  return (milli + ms::kMilliPerGpu - 1) / ms::kMilliPerGpu;
}

// Demands in thousandths of a unit: "1, 2.5 GiB".
std::string DemandList(const std::vector<int64_t>& milli, ms::MemoryUnit u) {
  std::string out;
  for (int64_t v : milli) out += (out.empty() ? "" : ", ") + MilliNumber(v);
  return out + " " + std::string(ms::MemoryUnitName(u));
}

std::string GpuList(const ms::ContainerGpus& g) {
  std::string out;
  for (const auto& [c, i] : g) out += (out.empty() ? "" : ",") + c + ":" + std::to_string(i);
  return out;
}

// The demand order of the engine's PodShape (whole GPUs first, then shares sorted largest
// first) mapped back to the request's demand order (`key`: PodRequest::ShapeKey, a whole GPU
// negative): order[i] is the demand that the shape's i-th GPU stands for.
std::vector<size_t> ShapeOrder(const std::vector<int64_t>& key) {
  std::vector<size_t> order(key.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if ((key[a] < 0) != (key[b] < 0)) return key[a] < 0;
    return key[a] >= 0 && key[a] > key[b];
  });
  return order;
}

// The engine's request for a GpuCache::EngineKey (whole GPUs negative), with `cpu_milli`.
pl::PodRequest EngineRequest(const std::vector<int64_t>& key, int64_t cpu_milli = 0) {
  pl::PodRequest r;
  r.distinct_gpus = false;
  r.cpu_milli = cpu_milli;
  for (int64_t d : key) r.gpus.push_back({d < 0 ? -d : d, d < 0});
  return r;
}

// A target-workload key: the pod's CPU request, then its EngineKey. The policies weigh a shape's
// CPU as gpushare simulate does with the trace's (FGD: a node without the CPU for a typical pod
// strands its GPUs for it; default: the CPU per GPU of GPU pods).
std::vector<int64_t> WorkloadKey(int64_t cpu_milli, const std::vector<int64_t>& engine_key) {
  std::vector<int64_t> key;
  key.reserve(engine_key.size() + 1);
  key.push_back(cpu_milli);
  key.insert(key.end(), engine_key.begin(), engine_key.end());
  return key;
}

pl::PodRequest WorkloadRequest(const std::vector<int64_t>& workload_key) {
  return EngineRequest({workload_key.begin() + 1, workload_key.end()}, workload_key.front());
}

// Where a node stands among nodes the policy finds equally good: a fixed pseudo-random order of
// names (FNV-1a, then SplitMix64's finaliser). The order nodes were seen in (the API server lists
// them by name) would send every tie to the first of a pool of alike-named nodes, which packs
// them worse (docs/benchmarks.md, "Replay"); gpushare simulate draws a seeded permutation.
int64_t TieRank(std::string_view name) {
  uint64_t h = 14695981039346656037ULL;
  for (const unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return static_cast<int64_t>(h >> 1);
}

// The same node with nothing allocated: does the pod fit at all?
pl::NodeState Emptied(const pl::NodeState& s) {
  pl::NodeState e = s;
  e.pods = 0;
  e.max_share_free = 0;
  for (int g = 0; g < e.num_gpus; ++g) {
    e.gpu_free[g] = e.gpu_capacity[g];
    e.gpu_clients[g] = 0;
    e.max_share_free = std::max(e.max_share_free, e.gpu_capacity[g]);
  }
  e.fully_free_gpus = e.num_gpus;
  e.gpu_free_total = e.gpu_capacity_total;
  return e;
}

}  // namespace

GpuCache::GpuCache(CacheOptions options) : options_(std::move(options)), rng_(options_.seed) {}
GpuCache::~GpuCache() = default;

void GpuCache::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void GpuCache::SetSynced(bool synced) {
  MutexLock l(&mu_);
  if (synced && !synced_ && !ever_synced_ && options_.restart_hold_ns > 0) {
    // A start forgets the pods released while this process was away: on each node, no new
    // shares until the pods pending there now are confirmed or gone (one of them may sit in a
    // released pod's slot).
    for (auto& [name, n] : nodes_) {
      NodeRec::Guard g;
      g.whole_node = true;
      for (const auto& [uid, p] : n->pods)
        if (p->Pending()) g.waiting.insert(uid);
      if (g.waiting.empty()) continue;
      Log("event=node_held_back node=" + Value(name) +
          " waiting_for=" + std::to_string(g.waiting.size()));
      n->guards.push_back(std::move(g));
      ++n->held_back;
    }
    ever_synced_ = true;
  }
  synced_ = synced;
}

bool GpuCache::synced() const {
  MutexLock l(&mu_);
  return synced_;
}

GpuCache::NodeRec* GpuCache::FindNode(std::string_view name) const {
  const int32_t id = node_index_.Find(name);
  return id == NameIndex::kNone ? nullptr : by_id_[static_cast<size_t>(id)];
}

void GpuCache::RefreshHot(const NodeRec& n) {
  hot_[static_cast<size_t>(n.id)].eid =
      n.exists && n.has_inventory && !n.slots.empty() ? n.eid : -1;
}

GpuCache::NodeRec& GpuCache::NodeFor(const std::string& name) {
  if (NodeRec* n = FindNode(name)) return *n;
  auto rec = std::make_unique<NodeRec>();
  rec->name = name;
  rec->problem = "node not seen by the node informer";
  rec->id = node_index_.Insert(name);
  NodeRec& r = *rec;
  by_id_.push_back(&r);
  hot_.push_back(NodeHot{});
  nodes_.emplace(name, std::move(rec));
  return r;
}

// --- nodes -------------------------------------------------------------------------------------

void GpuCache::UpsertNode(const kube::Node& node) {
  MutexLock l(&mu_);
  NodeRec& n = NodeFor(node.metadata.name);
  struct RefreshOnReturn {
    GpuCache* cache;
    const NodeRec& node;
    ~RefreshOnReturn() { cache->RefreshHot(node); }
  } refresh{this, n};
  const bool was_new = !n.exists;
  n.exists = true;
  if (const kube::CpuMemory a = kube::NodeAllocatable(node);
      a.cpu_milli != n.allocatable.cpu_milli || a.memory_bytes != n.allocatable.memory_bytes) {
    n.allocatable = a;
    if (n.eid >= 0) rebuild_ = true;  // the engine's node changes capacity
  }
  auto it = node.metadata.annotations.find(std::string(ms::kInventoryAnnotation));
  const std::string text = it == node.metadata.annotations.end() ? std::string() : it->second;
  if (!was_new && text == n.inventory_text) return;  // heartbeats and status updates
  n.inventory_text = text;
  const std::vector<int> old_slots = n.slots;
  const ms::NodeInventory old_inv = n.inv;
  const bool had = n.has_inventory;
  n.has_inventory = false;
  n.slots.clear();
  n.share_units = 0;
  n.units_max = 0;
  n.problem_code = reasons::kNodeUnknown;
  if (it == node.metadata.annotations.end()) {
    n.problem = "no " + std::string(ms::kInventoryAnnotation) +
                " annotation (no gpushare-node with API access runs on this node)";
  } else if (Result<ms::NodeInventory> inv = ms::DecodeInventory(text); !inv.ok()) {
    n.problem = "annotation " + std::string(ms::kInventoryAnnotation) +
                " is unreadable: " + inv.status().message();
    Log("event=node_inventory_invalid node=" + Value(n.name) +
        " error=" + Value(inv.status().message()));
  } else if (inv->unit != options_.unit && ms::CountMemoryGpus(*inv).capacity > 0) {
    // (Only a node with memory GPUs counts in units: any other publishes its GPUs for the
    // record, its unit is moot.)
    n.problem_code = reasons::kNoSharedGpu;
    n.problem = "node counts " + options_.resource_name + " in " +
                std::string(ms::MemoryUnitName(inv->unit)) + ", gpushare-scheduler in " +
                std::string(ms::MemoryUnitName(options_.unit)) +
                " (--memory-unit must match every node)";
    Log("event=node_unit_mismatch node=" + Value(n.name) +
        " node_unit=" + std::string(ms::MemoryUnitName(inv->unit)));
  } else {
    n.inv = std::move(*inv);
    n.has_inventory = true;
    std::string skipped;
    bool unhealthy = false;  // a GPU that would serve shares if it were healthy
    for (const auto& g : n.inv.gpus) {
      if (n.Usable(g)) {
        n.slots.push_back(g.index);
      } else {
        unhealthy = unhealthy || (!g.healthy && g.mode == ms::kMemoryMode && g.units > 0);
        skipped += (skipped.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(g.index) +
                   " " +
                   (!g.healthy                  ? "unhealthy"
                    : g.mode != ms::kMemoryMode ? "in mode " + g.mode
                                                : "has no units");
      }
    }
    n.problem_code = unhealthy ? reasons::kGpuUnhealthy : reasons::kNoSharedGpu;
    n.share_units = ms::UniformShareUnits(n.inv);
    for (int idx : n.slots) n.units_max = std::max(n.units_max, n.inv.FindByIndex(idx)->units);
    if (n.slots.size() > static_cast<size_t>(pl::kMaxGpusPerNode)) {
      n.problem_code = reasons::kNoSharedGpu;
      n.has_inventory = false;
      n.slots.clear();
      n.problem = "more than " + std::to_string(pl::kMaxGpusPerNode) +
                  " GPUs serve memory shares; not supported";
    } else if (n.slots.empty()) {
      n.problem = n.inv.gpus.empty() ? "the node has no GPUs"
                                     : "no GPU serves memory shares (" + skipped + ")";
    } else {
      n.problem.clear();
    }
    Log("event=node_inventory node=" + Value(n.name) +
        " gpus=" + std::to_string(n.inv.gpus.size()) + " usable=" + std::to_string(n.slots.size()) +
        " unit=" + std::string(ms::MemoryUnitName(n.inv.unit)) +
        " max_clients=" + std::to_string(n.inv.max_clients_per_gpu) +
        (skipped.empty() ? "" : " skipped=" + Value(skipped)));
  }
  Recount(n);  // capacities may have changed
  if (n.share_units > 0) {
    // Pods asking alibabacloud.com/gpu-milli that waited for this node's GPU size.
    std::vector<kube::Pod> retry;
    for (auto it = unresolved_.begin(); it != unresolved_.end();) {
      if (it->second.spec.node_name == n.name) {
        retry.push_back(std::move(it->second));
        it = unresolved_.erase(it);
      } else {
        ++it;
      }
    }
    for (const kube::Pod& pod : retry) UpsertPodLocked(pod);
  }
  // The engine's node must change shape: capacities, usable GPUs, model or ceiling.
  bool same = had && n.has_inventory && old_slots == n.slots &&
              old_inv.max_clients_per_gpu == n.inv.max_clients_per_gpu;
  if (same) {
    for (int idx : n.slots) {
      const ms::InventoryGpu* a = old_inv.FindByIndex(idx);
      const ms::InventoryGpu* b = n.inv.FindByIndex(idx);
      if (a == nullptr || b == nullptr || a->units != b->units || a->model != b->model)
        same = false;
    }
  }
  if (same) return;
  if (n.eid >= 0) {
    rebuild_ = true;
  } else if (n.has_inventory && !rebuild_) {
    to_add_.push_back(&n);
  }
}

void GpuCache::DeleteNode(const std::string& name) {
  MutexLock l(&mu_);
  NodeRec* found = FindNode(name);
  if (found == nullptr) return;
  NodeRec& n = *found;
  n.exists = false;
  n.has_inventory = false;
  n.inventory_text.clear();
  n.slots.clear();
  n.problem = "node was deleted";
  n.problem_code = reasons::kNodeUnknown;
  RefreshHot(n);
  if (n.eid >= 0) rebuild_ = true;
  to_add_.erase(std::remove(to_add_.begin(), to_add_.end(), &n), to_add_.end());
  Log("event=node_deleted node=" + Value(name) + " pods=" + std::to_string(n.pods.size()));
}

// --- pods --------------------------------------------------------------------------------------

namespace {

// The usage of `request` (resolved against GPUs of `share_units`) at `gpus`, in thousandths of a
// unit: what the cache counts (NodeRec's usage maps).
std::map<int, ms::GpuUse> MilliUsage(int64_t share_units, const ms::PodRequest& request,
                                     const ms::ContainerGpus& gpus) {
  return ms::GpuUsage(request.InMilliUnits(share_units), gpus);
}

// MilliUsage on the GPUs the node's inventory knows (on all of them while it has none yet).
std::map<int, ms::GpuUse> KnownUsage(const ms::NodeInventory& inv, bool has_inventory,
                                     int64_t share_units, const ms::PodRequest& request,
                                     const ms::ContainerGpus& gpus) {
  std::map<int, ms::GpuUse> out;
  for (const auto& [g, u] : MilliUsage(share_units, request, gpus))
    if (!has_inventory || inv.FindByIndex(g) != nullptr) out[g] = u;
  return out;
}

void AddTo(std::map<int, ms::GpuUse>& total, const std::map<int, ms::GpuUse>& use, int sign) {
  for (const auto& [g, u] : use) {
    ms::GpuUse& t = total[g];
    t.units += sign * u.units;
    t.clients += sign * u.clients;
    if (t.units == 0 && t.clients == 0) total.erase(g);
  }
}

}  // namespace

namespace {

// status.startTime in ns since the epoch (0: none or unreadable).
int64_t StartNs(const kube::Pod& pod) {
  if (pod.status.start_time.empty()) return 0;
  Result<std::chrono::system_clock::time_point> t = kube::ParseTimestamp(pod.status.start_time);
  return t.ok()
             ? std::chrono::duration_cast<std::chrono::nanoseconds>(t->time_since_epoch()).count()
             : 0;
}

}  // namespace

void GpuCache::PodRec::TakeFacts(const kube::Pod& pod) {
  priority = pod.spec.priority;
  start_ns = StartNs(pod);
  terminating = pod.IsBeingDeleted();
  requests = kube::PodCpuMemoryRequests(pod);
}

bool GpuCache::PodRec::Pending() const {
  return state != State::kConfirmed && state != State::kExpired;
}

void GpuCache::CountPod(NodeRec& n, const PodRec& p, int sign) {
  AddTo(n.current, p.use, sign);
  AddTo(n.plan, p.plan_use, sign);
  if (p.Pending()) {
    n.pending += sign;
    for (const ms::SlotKey& k : p.keys) {
      if ((n.pending_keys[k] += sign) == 0) n.pending_keys.erase(k);
      if (k.odd()) n.odd_pending += sign;
    }
  }
  Recount(n);
}

void GpuCache::Recount(NodeRec& n) {
  std::map<int, int64_t> capacity;
  for (int idx : n.slots) {
    if (const ms::InventoryGpu* g = n.inv.FindByIndex(idx))
      capacity[idx] = g->units * ms::kMilliPerGpu;
  }
  n.used.clear();
  n.clients.clear();
  for (const auto& [g, u] : ms::EffectiveUsage(n.plan, n.current, capacity)) {
    if (u.units != 0) n.used[g] = u.units;
    if (u.clients != 0) n.clients[g] = u.clients;
  }
  for (const auto& [g, u] : n.nominated) {  // preemption's holds
    if (u.units != 0) n.used[g] += u.units;
    if (u.clients != 0) n.clients[g] += u.clients;
  }
  if (n.eid >= 0) dirty_.insert(&n);
}

void GpuCache::AddUse(PodRec& p) {
  if (p.counted || p.use.empty()) return;
  NodeRec& n = NodeFor(p.node);
  CountPod(n, p, +1);
  n.pods.emplace(p.uid, &p);
  p.counted = true;
}

void GpuCache::RemoveUse(PodRec& p) {
  if (!p.counted) return;
  NodeRec& n = NodeFor(p.node);
  CountPod(n, p, -1);
  n.pods.erase(p.uid);
  p.counted = false;
}

void GpuCache::SetPodShape(PodRec& p, bool counted) {
  if (p.shape_counted == counted) return;
  p.shape_counted = counted;
  int& c = shapes_live_[p.demands];
  bool fresh = false;
  if (counted) {
    fresh = c++ == 0 && !workload_shapes_.count(p.demands);
  } else if (--c <= 0) {
    shapes_live_.erase(p.demands);
  }
  NoteWorkloadChange(fresh);
}

void GpuCache::SetCpuOnlyShape(const std::string& uid, int64_t cpu_milli) {
  auto it = cpu_only_.find(uid);
  if (it != cpu_only_.end()) {
    if (it->second == cpu_milli) return;
    const std::vector<int64_t> key = WorkloadKey(it->second, {});
    if (auto c = shapes_live_.find(key); c != shapes_live_.end() && --c->second <= 0)
      shapes_live_.erase(c);
    cpu_only_.erase(it);
  }
  bool fresh = false;
  if (cpu_milli > 0) {
    cpu_only_[uid] = cpu_milli;
    const std::vector<int64_t> key = WorkloadKey(cpu_milli, {});
    fresh = shapes_live_[key]++ == 0 && !workload_shapes_.count(key);
  }
  NoteWorkloadChange(fresh);
}

void GpuCache::NoteWorkloadChange(bool new_shape) {
  if (!options_.target_workload.empty()) return;
  const int live = static_cast<int>(pods_.size() + cpu_only_.size());
  if (new_shape || live > 2 * workload_pods_ + 8 || 2 * live + 8 < workload_pods_)
    workload_stale_ = true;
}

void GpuCache::RemovePod(const std::string& uid, bool released) {
  unassigned_.erase(uid);
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  PodRec& p = *it->second;
  NodeRec* n = p.counted ? &NodeFor(p.node) : nullptr;
  if (n != nullptr && released) GuardRelease(*n, p);
  RemoveUse(p);
  SetPodShape(p, false);
  pods_.erase(it);
  if (n != nullptr) SettleGuards(*n);
}

// A released pod whose last known state is not "confirmed where it was planned": kubelet may
// have put another pod into its planned slot (a swap) that the API shows only once the agent
// confirms that pod. The slot stays counted until the pods pending now are confirmed or gone.
void GpuCache::GuardRelease(NodeRec& n, const PodRec& p) {
  ms::PodAssignment last;
  last.state = p.state == PodRec::State::kConfirmed ? ms::AssignmentState::kConfirmed
                                                    : ms::AssignmentState::kAssumed;
  last.gpus = p.gpus;
  last.planned = p.planned;
  if (!ms::ReleaseNeedsGuard(last) || p.plan_use.empty()) return;
  NodeRec::Guard g;
  g.hold = p.plan_use;
  for (const auto& [other, o] : n.pods)
    if (other != p.uid && o->Pending()) g.waiting.insert(other);
  if (g.waiting.empty()) return;
  AddTo(n.plan, g.hold, +1);
  AddTo(n.current, g.hold, +1);
  Log("event=slot_guarded node=" + Value(n.name) + " pod=" + Value(p.key) +
      " gpus=" + Value(GpuList(p.planned)) + " waiting_for=" + std::to_string(g.waiting.size()));
  n.guards.push_back(std::move(g));
  Recount(n);
}

// Drops from the guards the pods that are confirmed or gone, and the guards nobody is left in.
void GpuCache::SettleGuards(NodeRec& n) {
  if (n.guards.empty()) return;
  bool changed = false;
  for (auto g = n.guards.begin(); g != n.guards.end();) {
    for (auto w = g->waiting.begin(); w != g->waiting.end();) {
      auto p = pods_.find(*w);
      const bool waits = p != pods_.end() && p->second->counted && p->second->node == n.name &&
                         p->second->Pending();
      w = waits ? std::next(w) : g->waiting.erase(w);
    }
    if (!g->waiting.empty()) {
      ++g;
      continue;
    }
    if (g->whole_node) {
      --n.held_back;
      Log("event=node_released node=" + Value(n.name));
    } else {
      AddTo(n.plan, g->hold, -1);
      AddTo(n.current, g->hold, -1);
    }
    g = n.guards.erase(g);
    changed = true;
  }
  if (changed) Recount(n);
}

void GpuCache::UpsertPod(const kube::Pod& pod) {
  MutexLock l(&mu_);
  UpsertPodLocked(pod);
}

void GpuCache::UpsertPodLocked(const kube::Pod& pod) {
  const std::string& uid = pod.metadata.uid;
  const std::string key = pod.metadata.namespace_ + "/" + pod.metadata.name;
  // Every pod's CPU and memory where it is bound (a bind of ours in flight keeps counting).
  if (pod.IsTerminal()) {
    CountCpu(uid, "", {});
  } else if (!pod.spec.node_name.empty()) {
    CountCpu(uid, pod.spec.node_name, kube::PodCpuMemoryRequests(pod));
  } else if (auto c = pod_cpu_.find(uid); c != pod_cpu_.end() && !c->second.reserved) {
    CountCpu(uid, "", {});
  }
  if (auto nom = nominations_.find(uid); nom != nominations_.end()) {
    Nomination& h = nom->second;
    if (pod.IsTerminal()) {
      DropNomination(uid, "finished");
    } else if (!pod.spec.node_name.empty()) {
      DropNomination(uid, pod.spec.node_name == h.node ? "bound" : "bound to another node");
    } else if (pod.status.nominated_node_name == h.node) {
      h.seen = true;
    } else if (h.seen) {
      DropNomination(uid, "kube-scheduler nominated it elsewhere or cleared its nomination");
    }
  }
  auto it = pods_.find(uid);
  PodRec* rec = it == pods_.end() ? nullptr : it->second.get();
  if (pod.IsTerminal()) {
    if (rec)
      Log("event=pod_released pod=" + Value(key) + " reason=" + pod.status.phase +
          " node=" + Value(rec->node));
    RemovePod(uid, /*released=*/true);
    unresolved_.erase(uid);
    SetCpuOnlyShape(uid, 0);
    return;
  }
  Result<ms::PodRequest> req = kube::PodGpuRequest(pod, options_.resource_name);
  if (!req.ok() || req->empty()) {
    if (!req.ok())
      Log("event=pod_request_invalid pod=" + Value(key) +
          " error=" + Value(req.status().message()));
    RemovePod(uid);
    const NodeRec* on =
        req.ok() && !pod.spec.node_name.empty() ? FindNode(pod.spec.node_name) : nullptr;
    SetCpuOnlyShape(uid, on != nullptr && on->has_inventory && !on->slots.empty()
                             ? kube::PodCpuMemoryRequests(pod).cpu_milli
                             : 0);
    return;
  }
  SetCpuOnlyShape(uid, 0);
  const bool local =
      rec && (rec->state == PodRec::State::kReserved || rec->state == PodRec::State::kBound);
  if (rec) {
    rec->pending = pod.status.phase.empty() || pod.status.phase == "Pending";
    rec->TakeFacts(pod);
  }
  if (pod.spec.node_name.empty()) {
    // Not bound (yet): only this process's own bind in flight counts.
    if (!local) RemovePod(uid);
    return;
  }
  if (req->unresolved()) {
    const NodeRec* on = FindNode(pod.spec.node_name);
    Result<ms::PodRequest> resolved =
        on != nullptr ? OnNode(*on, *req) : Result<ms::PodRequest>(Status::NotFound("no node"));
    if (!resolved.ok()) {
      // Counted once the node's GPU size is known; until then the node's inventory is missing
      // or unusable, so nothing is placed there meanwhile.
      if (unresolved_.insert_or_assign(uid, pod).second)
        Log("event=pod_request_waits pod=" + Value(key) + " node=" + Value(pod.spec.node_name) +
            " detail=" + Value(resolved.status().message()));
      if (!local) RemovePod(uid);
      return;
    }
    req = std::move(resolved);
  }
  unresolved_.erase(uid);
  ms::PodAssignment a = ms::ResolveAssignment(pod.metadata.annotations, *req);
  for (const std::string& p : a.problems)
    Log("event=pod_annotation_unreadable pod=" + Value(key) + " problem=" + Value(p));
  if (a.state == ms::AssignmentState::kNone) {
    if (local && rec->node == pod.spec.node_name) return;
    if (!rec || rec->node != pod.spec.node_name || rec->state != PodRec::State::kExpired) {
      RemovePod(uid);
      if (unassigned_.emplace(uid, pod.spec.node_name).second)
        Log("event=pod_unassigned pod=" + Value(key) + " node=" + Value(pod.spec.node_name) +
            " detail=\"bound with " + options_.resource_name +
            " but no GPU assignment; not counted on any GPU\"");
    }
    return;
  }
  if (rec && rec->state == PodRec::State::kExpired && a.state == ms::AssignmentState::kAssumed &&
      a.assume_time.value_or(0) == rec->assume_ns && rec->node == pod.spec.node_name)
    return;  // stays released until the node agent confirms it
  // GPUs that the node does not have cannot hold anything.
  const NodeRec& node = NodeFor(pod.spec.node_name);
  if (node.has_inventory) {
    for (const auto& [c, g] : a.gpus) {
      if (node.inv.FindByIndex(g) == nullptr)
        Log("event=pod_gpu_unknown pod=" + Value(key) + " node=" + Value(node.name) +
            " container=" + Value(c) + " gpu=" + std::to_string(g));
    }
  }
  const PodRec::State state = a.state == ms::AssignmentState::kConfirmed ? PodRec::State::kConfirmed
                                                                         : PodRec::State::kAssumed;
  if (rec && rec->counted && rec->node == pod.spec.node_name && rec->gpus == a.gpus &&
      rec->planned == a.planned && rec->state == state)
    return;
  if (rec && rec->gpus != a.gpus && !rec->gpus.empty())
    Log("event=pod_assignment_changed pod=" + Value(key) + " node=" + Value(pod.spec.node_name) +
        " from=" + Value(GpuList(rec->gpus)) + " to=" + Value(GpuList(a.gpus)) +
        " state=" + std::string(ms::AssignmentStateName(a.state)));
  unassigned_.erase(uid);
  if (!rec) {
    auto fresh = std::make_unique<PodRec>();
    fresh->uid = uid;
    rec = fresh.get();
    pods_.emplace(uid, std::move(fresh));
    rec->pending = pod.status.phase.empty() || pod.status.phase == "Pending";
    rec->TakeFacts(pod);
  }
  RemoveUse(*rec);
  SetPodShape(*rec, false);
  rec->key = key;
  rec->node = pod.spec.node_name;
  rec->request = *req;
  rec->demands = PodWorkloadKey(node, *rec);
  rec->gpus = a.gpus;
  rec->planned = a.planned;
  rec->keys = ms::SlotKeys(*req);
  rec->use = KnownUsage(node.inv, node.has_inventory, node.share_units, *req, a.gpus);
  rec->plan_use = KnownUsage(node.inv, node.has_inventory, node.share_units, *req, a.planned);
  rec->state = state;
  if (a.assume_time) rec->assume_ns = *a.assume_time;
  rec->token = 0;
  AddUse(*rec);
  SetPodShape(*rec, true);
  SettleGuards(NodeFor(rec->node));
}

void GpuCache::DeletePod(const kube::Pod& last_known) {
  MutexLock l(&mu_);
  CountCpu(last_known.metadata.uid, "", {});
  SetCpuOnlyShape(last_known.metadata.uid, 0);
  DropNomination(last_known.metadata.uid, "deleted");
  auto it = pods_.find(last_known.metadata.uid);
  if (it != pods_.end())
    Log("event=pod_released pod=" + Value(it->second->key) +
        " reason=deleted node=" + Value(it->second->node));
  RemovePod(last_known.metadata.uid, /*released=*/true);
}

// --- the engine's view -------------------------------------------------------------------------

void GpuCache::ChooseEngineUnits() {
  int64_t l = 1;
  for (const auto& [name, n] : nodes_) {
    if (!n->has_inventory || n->units_max <= 0) continue;
    l = std::lcm(l, n->units_max);
    if (l > kMaxCommonUnits) {
      l = 0;
      break;
    }
  }
  if (l != common_units_)
    Log("event=engine_units common_units=" + std::to_string(l) +
        (l == 0 ? " detail=\"GPU sizes too many to share a unit; each node counts its own\"" : ""));
  common_units_ = l;
}

int64_t GpuCache::Factor(const NodeRec& n) const {
  return EngineUnitsFit(n) && common_units_ > 0 && n.units_max > 0 ? common_units_ / n.units_max
                                                                   : 1;
}

bool GpuCache::EngineUnitsFit(const NodeRec& n) const {
  return common_units_ == 0 || n.units_max <= 0 || common_units_ % n.units_max == 0;
}

std::vector<int64_t> GpuCache::EngineKey(const NodeRec& n, const ms::PodRequest& request) const {
  std::vector<int64_t> key = request.InMilliUnits(n.share_units).ShapeKey();
  for (int64_t& d : key) d *= Factor(n);
  return key;
}

std::vector<int64_t> GpuCache::PodWorkloadKey(const NodeRec& n, const PodRec& p) const {
  return WorkloadKey(p.requests.cpu_milli, EngineKey(n, p.request));
}

void GpuCache::AddToEngine(NodeRec& n) {
  if (!n.has_inventory || n.eid >= 0) return;
  // Every GPU of the largest size here is 1000 x common_units_ engine units: a fraction is the
  // same amount on every node, as in gpushare simulate, and the policy compares GPUs of
  // different sizes by the share of them that is free.
  const int64_t factor = Factor(n);
  pl::NodeSpec spec;
  spec.name = n.name;
  spec.max_clients_per_gpu = n.inv.max_clients_per_gpu;
  // CPU and memory as the policy weighs them; unbounded where the Node publishes none.
  constexpr int64_t kUnbounded = int64_t{1} << 40;
  spec.cpu_milli = n.allocatable.cpu_milli > 0 ? n.allocatable.cpu_milli : kUnbounded;
  spec.memory_mib = n.allocatable.memory_bytes > 0 ? n.allocatable.memory_bytes >> 20 : kUnbounded;
  for (int idx : n.slots) {
    const ms::InventoryGpu* g = n.inv.FindByIndex(idx);
    spec.gpu_capacity.push_back(g->units * ms::kMilliPerGpu * factor);
    if (spec.gpu_model.empty()) spec.gpu_model = g->model.empty() ? "unknown" : g->model;
  }
  Result<pl::NodeId> id = cluster_.AddNode(spec);
  if (!id.ok()) {
    n.has_inventory = false;
    n.problem = "cannot be modelled: " + id.status().message();
    n.problem_code = reasons::kNoSharedGpu;
    Log("event=node_model_failed node=" + Value(n.name) + " error=" + Value(id.status().message()));
    RefreshHot(n);
    return;
  }
  n.eid = *id;
  cluster_.set_tie_rank(n.eid, TieRank(n.name));
  if (workload_unkeyed_) workload_stale_ = true;  // the configured workload's GPU pods can be keyed
  RefreshHot(n);
  n.bookings.clear();
  dirty_.insert(&n);
}

void GpuCache::Resync(NodeRec& n) {
  if (n.eid < 0) return;
  for (pl::PlacementId b : n.bookings) (void)cluster_.Release(b);
  n.bookings.clear();
  const pl::NodeState& s = cluster_.node(n.eid);
  for (size_t slot = 0; slot < n.slots.size(); ++slot) {
    const int idx = n.slots[slot];
    auto u = n.used.find(idx);
    auto c = n.clients.find(idx);
    const int64_t used = u == n.used.end() ? 0 : u->second * Factor(n);
    const int clients = c == n.clients.end() ? 0 : c->second;
    if (used <= 0 || clients <= 0) continue;
    // Saturate: the engine must see the GPU at least as full as the truth.
    const int64_t amount = std::min(used, s.gpu_capacity[slot]);
    int64_t bookings = std::min<int64_t>({clients, s.max_clients, amount});
    int64_t left = amount;
    while (bookings > 0) {
      const int64_t k = std::min<int64_t>(bookings, pl::kMaxGpusPerNode);
      pl::PodResources r;
      r.kind = pl::kShareKind;
      pl::GpuAssignment a;
      for (int64_t i = 0; i < k; ++i) {
        const int64_t share = (i == 0) ? left - (bookings - 1) : 1;
        r.shares.push_back(share);
        a.Add(static_cast<int>(slot));
      }
      left -= std::accumulate(r.shares.begin(), r.shares.end(), int64_t{0});
      bookings -= k;
      Result<pl::PlacementId> id = cluster_.Commit(r, n.eid, a);
      if (id.ok()) {
        n.bookings.push_back(*id);
      } else {
        Log("event=engine_sync_failed node=" + Value(n.name) + " gpu=" + std::to_string(idx) +
            " error=" + Value(id.status().message()));
        break;
      }
    }
  }
  // The CPU and memory the node's pods request (clipped: the engine must not refuse the sync).
  pl::PodResources cpu;
  cpu.cpu_milli = std::min(n.cpu_used.cpu_milli, s.cpu_free);
  cpu.memory_mib = std::min(n.cpu_used.memory_bytes >> 20, s.mem_free);
  if (cpu.cpu_milli > 0 || cpu.memory_mib > 0) {
    Result<pl::PlacementId> id = cluster_.Commit(cpu, n.eid, pl::GpuAssignment{});
    if (id.ok()) {
      n.bookings.push_back(*id);
    } else {
      Log("event=engine_sync_failed node=" + Value(n.name) +
          " error=" + Value(id.status().message()));
    }
  }
  if (policy_) policy_->OnNodeChanged(n.eid);
}

void GpuCache::CountCpu(const std::string& uid, const std::string& node, const kube::CpuMemory& r,
                        bool reserved) {
  auto it = pod_cpu_.find(uid);
  if (it != pod_cpu_.end()) {
    if (it->second.node == node && it->second.r.cpu_milli == r.cpu_milli &&
        it->second.r.memory_bytes == r.memory_bytes) {
      it->second.reserved = it->second.reserved && reserved;
      return;
    }
    NodeRec& old = NodeFor(it->second.node);
    old.cpu_used.cpu_milli -= it->second.r.cpu_milli;
    old.cpu_used.memory_bytes -= it->second.r.memory_bytes;
    if (old.eid >= 0) dirty_.insert(&old);
    pod_cpu_.erase(it);
  }
  if (node.empty() || (r.cpu_milli == 0 && r.memory_bytes == 0)) return;
  NodeRec& n = NodeFor(node);
  n.cpu_used.cpu_milli += r.cpu_milli;
  n.cpu_used.memory_bytes += r.memory_bytes;
  if (n.eid >= 0) dirty_.insert(&n);
  pod_cpu_[uid] = {node, r, reserved};
}

bool GpuCache::ConfiguredWorkload(std::vector<pl::WeightedRequest>* pods) const {
  // Keys on a node whose GPUs are all of its largest size: a fraction's key is then the same on
  // every node (EngineKey), as is a whole GPU's.
  const NodeRec* ref = nullptr;
  for (const auto& [name, n] : nodes_) {
    if (n->eid >= 0 && n->share_units > 0 && n->share_units == n->units_max) {
      ref = n.get();
      break;
    }
  }
  for (const TargetPod& p : options_.target_workload) {
    if (p.gpu_milli == 0) {
      pods->push_back({WorkloadRequest(WorkloadKey(p.cpu_milli, {})), p.count});
      continue;
    }
    if (ref == nullptr) continue;
    Result<ms::PodRequest> r = OnNode(*ref, p.request);
    if (r.ok())
      pods->push_back({WorkloadRequest(WorkloadKey(p.cpu_milli, EngineKey(*ref, *r))), p.count});
  }
  return ref != nullptr;
}

void GpuCache::RefreshPolicy() {
  engine_.reset();
  policy_.reset();
  std::vector<pl::WeightedRequest> pods;
  std::set<std::vector<int64_t>> shapes;
  int live = 0;
  if (!options_.target_workload.empty()) {
    workload_unkeyed_ = !ConfiguredWorkload(&pods);
  } else {
    for (const auto& [demands, count] : shapes_live_) {
      shapes.insert(demands);
      pods.push_back({WorkloadRequest(demands), std::max(count, 1)});
      live += count;
    }
  }
  workload_ = pl::BuildTargetWorkload(pods, cluster_);
  pl::PolicyOptions po;
  int64_t cap = 0;
  for (pl::NodeId i = 0; i < cluster_.num_nodes(); ++i) cap += cluster_.node(i).gpu_capacity_total;
  po.gpu_unit = cluster_.total_gpus() > 0 ? std::max<int64_t>(1, cap / cluster_.total_gpus()) : 1;
  Result<std::unique_ptr<pl::Policy>> p =
      pl::MakePolicy(options_.policy, cluster_, workload_, po, &rng_);
  if (!p.ok()) {
    Log("event=policy_failed policy=" + Value(options_.policy) +
        " error=" + Value(p.status().message()) + " fallback=default");
    p = pl::MakePolicy("default", cluster_, workload_, po, &rng_);
  }
  policy_ = std::move(p).value();
  engine_ = std::make_unique<pl::PlacementEngine>(cluster_, *policy_);
  workload_shapes_ = std::move(shapes);
  workload_pods_ = live;
  workload_stale_ = false;
  ++policy_refreshes_;
}

void GpuCache::Rebuild() {
  engine_.reset();
  policy_.reset();
  cluster_ = pl::ClusterState();
  to_add_.clear();
  dirty_.clear();
  const int64_t was = common_units_;
  ChooseEngineUnits();
  for (auto& [name, n] : nodes_) {
    n->eid = -1;
    n->bookings.clear();
    AddToEngine(*n);
    RefreshHot(*n);
  }
  if (common_units_ != was) {
    // The shapes' keys are in engine units: count them again in the new ones.
    shapes_live_.clear();
    for (auto& [uid, p] : pods_) {
      p->demands = PodWorkloadKey(NodeFor(p->node), *p);
      if (p->shape_counted) ++shapes_live_[p->demands];
    }
    for (const auto& [uid, cpu] : cpu_only_) ++shapes_live_[WorkloadKey(cpu, {})];
    workload_stale_ = true;
  }
  RefreshPolicy();
  for (auto& [name, n] : nodes_) Resync(*n);
  dirty_.clear();
  rebuild_ = false;
  ++rebuilds_;
}

void GpuCache::EnsureEngine() {
  if (rebuild_) {
    Rebuild();
    return;
  }
  for (const NodeRec* n : to_add_) {
    if (!EngineUnitsFit(*n)) {
      Rebuild();  // a GPU size the engine's unit does not divide
      return;
    }
  }
  if (!to_add_.empty()) {
    for (NodeRec* n : to_add_) AddToEngine(*n);
    to_add_.clear();
    if (engine_) engine_->NodesAdded();
  }
  if (workload_stale_ || !engine_) RefreshPolicy();
  for (NodeRec* n : dirty_) Resync(*n);
  dirty_.clear();
}

Result<pl::ShapeId> GpuCache::Shape(const NodeRec& n, const ms::PodRequest& request,
                                    const kube::CpuMemory& cpu) {
  if (request.unresolved())
    return Status::Internal("alibabacloud.com/gpu-milli not resolved against a node");
  const std::vector<int64_t> engine_key = EngineKey(n, request);
  if (const std::vector<int64_t> key = WorkloadKey(cpu.cpu_milli, engine_key);
      options_.target_workload.empty() && cpu.cpu_milli > 0 && !workload_shapes_.count(key) &&
      !shapes_live_.count(key) && shapes_live_.size() < kMaxAskedShapes) {
    // A shape never seen (asked with its CPU: prioritize): it joins the target workload at the
    // next decision, so that the policy's prices know it (counted once until pods with it are
    // placed).
    shapes_live_[key] += 0;
    workload_stale_ = true;
  }
  pl::PodRequest r = EngineRequest(engine_key, cpu.cpu_milli);
  r.memory_mib = cpu.memory_bytes >> 20;
  return engine_->Intern(r);
}

Result<ms::PodRequest> GpuCache::OnNode(const NodeRec& n, const ms::PodRequest& request) const {
  if (!request.unresolved()) return request;
  if (n.share_units <= 0)
    return Status::FailedPrecondition(
        n.slots.empty()
            ? "no GPU here serves memory shares"
            : "this node's memory-share GPUs differ in size; " + std::string(ms::kMilliResource) +
                  " (fractions and whole GPUs) needs GPUs of one size");
  return request.Resolve(n.share_units);
}

namespace {

NodeVerdict Verdict(NodeVerdict::Kind kind, std::string_view code, std::string reason) {
  NodeVerdict v;
  v.kind = kind;
  v.code = code;
  v.reason = std::move(reason);
  return v;
}

}  // namespace

size_t GpuCache::ExcludedSlots(const NodeRec& n, const GpuSelector& selector,
                               std::vector<char>* excluded) const {
  if (excluded != nullptr) excluded->assign(n.slots.size(), 0);
  if (selector.empty()) return 0;
  size_t count = 0;
  for (size_t slot = 0; slot < n.slots.size(); ++slot) {
    const ms::InventoryGpu* g = n.inv.FindByIndex(n.slots[slot]);
    if (g == nullptr || selector.Allows(g->model, g->uuid)) continue;
    ++count;
    if (excluded != nullptr) (*excluded)[slot] = 1;
  }
  return count;
}

std::vector<std::string> GpuCache::Exclusions(const NodeRec& n, const GpuSelector& selector) const {
  std::vector<std::string> out(n.slots.size());
  if (selector.empty()) return out;
  for (size_t slot = 0; slot < n.slots.size(); ++slot) {
    const ms::InventoryGpu* g = n.inv.FindByIndex(n.slots[slot]);
    if (g == nullptr) continue;
    if (std::optional<std::string> why = selector.Excludes(g->model, g->uuid)) out[slot] = *why;
  }
  return out;
}

namespace {

// "GPU 0: <why>; GPU 1: <why>" for the excluded slots, at most four GPUs, then how many more.
std::string ExclusionList(const std::vector<int>& slots, const std::vector<std::string>& why) {
  std::string out;
  size_t listed = 0, more = 0;
  for (size_t slot = 0; slot < why.size(); ++slot) {
    if (why[slot].empty()) continue;
    if (listed == 4) {
      ++more;
      continue;
    }
    out += (listed++ ? "; GPU " : "GPU ") + std::to_string(slots[slot]) + ": " + why[slot];
  }
  if (more > 0) out += "; and " + std::to_string(more) + " more GPUs";
  return out;
}

}  // namespace

NodeVerdict GpuCache::Check(const NodeRec& n, const ms::PodRequest& request,
                            const pl::PodShape& shape, const Asker& asker) const {
  const size_t excluded = request.selector.empty() || !n.exists || !n.has_inventory || n.eid < 0
                              ? 0
                              : ExcludedSlots(n, request.selector);
  if (excluded > 0 && excluded == n.slots.size())
    return Verdict(NodeVerdict::Kind::kUnresolvable, reasons::kGpuExcluded,
                   "the pod's GPU choice excludes every GPU here: " +
                       ExclusionList(n.slots, Exclusions(n, request.selector)));
  NodeVerdict v = CheckRoom(n, request, shape, asker);
  if (v.kind != NodeVerdict::Kind::kFits && excluded > 0)
    v.reason += "; the pod's GPU choice excludes " +
                ExclusionList(n.slots, Exclusions(n, request.selector));
  return v;
}

GpuCache::Masked GpuCache::Mask(const GpuSelector& selector,
                                const std::vector<const NodeRec*>& nodes) {
  Masked m;
  if (selector.empty()) return m;
  std::unordered_set<pl::NodeId> seen;
  std::vector<char> excluded;
  for (const NodeRec* n : nodes) {
    if (n == nullptr || n->eid < 0 || !seen.insert(n->eid).second) continue;
    const size_t count = ExcludedSlots(*n, selector, &excluded);
    if (count == 0) continue;
    if (count == excluded.size()) {
      m.blocked.insert(n);
      continue;
    }
    for (size_t slot = 0; slot < excluded.size(); ++slot) {
      const int64_t free = cluster_.node(n->eid).gpu_free[slot];
      if (!excluded[slot] || free <= 0) continue;
      pl::PodResources r;
      r.kind = pl::kShareKind;
      r.shares = {free};
      pl::GpuAssignment a;
      a.Add(static_cast<int>(slot));
      // Refused only where the GPU serves its ceiling of clients: nothing fits it anyway.
      if (Result<pl::PlacementId> id = cluster_.Commit(r, n->eid, a); id.ok())
        m.fillers.push_back(*id);
    }
  }
  return m;
}

NodeVerdict GpuCache::CheckAlone(const NodeRec& n, const ms::PodRequest& request,
                                 const pl::PodShape& shape, const Asker& asker) {
  Masked masked = Mask(request.selector, {&n});
  NodeVerdict v = Check(n, request, shape, asker);
  Unmask(masked);
  return v;
}

GpuCache::Masked GpuCache::MaskNamed(const GpuSelector& selector,
                                     const std::vector<std::string_view>& names) {
  if (selector.empty()) return {};
  std::vector<const NodeRec*> nodes;
  nodes.reserve(names.size());
  for (std::string_view name : names)
    if (const int32_t id = node_index_.Find(name); id != NameIndex::kNone)
      nodes.push_back(by_id_[static_cast<size_t>(id)]);
  return Mask(selector, nodes);
}

void GpuCache::Unmask(Masked& masked) {
  for (auto it = masked.fillers.rbegin(); it != masked.fillers.rend(); ++it)
    if (Status st = cluster_.Release(*it); !st.ok())
      Log("event=engine_unmask_failed error=" + Value(st.message()));
  masked.fillers.clear();
  masked.blocked.clear();
}

NodeVerdict GpuCache::CheckRoom(const NodeRec& n, const ms::PodRequest& request,
                                const pl::PodShape& shape, const Asker& asker) const {
  using K = NodeVerdict::Kind;
  const ms::MemoryUnit unit = options_.unit;
  if (!n.exists)
    return Verdict(K::kUnresolvable, reasons::kNodeUnknown,
                   "node is not in gpushare-scheduler's cache (not seen by its node informer)");
  if (!n.has_inventory || n.slots.empty() || n.eid < 0)
    return Verdict(K::kUnresolvable, n.problem_code, n.problem);
  if (n.held_back > 0) return HeldBack(n);
  // Preemption's holds that this pod is exempt from (its own, lower priorities') are free for it.
  std::optional<pl::NodeState> lifted;
  if (!n.nominees.empty()) {
    const std::map<int, ms::GpuUse> exempt = Exempt(n, asker);
    if (!exempt.empty()) lifted = StateWithout(n, exempt);
  }
  if (lifted && !request.selector.empty()) {  // a hold lifted on an excluded GPU stays shut
    std::vector<char> excluded;
    ExcludedSlots(n, request.selector, &excluded);
    for (size_t slot = 0; slot < excluded.size(); ++slot)
      if (excluded[slot]) lifted->gpu_free[slot] = 0;
    pl::RefreshTotals(*lifted);
  }
  const pl::NodeState& s = lifted ? *lifted : cluster_.node(n.eid);
  if (pl::CheckFit(s, shape) == pl::Rejection::kNone) return Clash(n, request);
  // Why not, in words (the slow path: only refused nodes get here). Amounts in thousandths of
  // a unit; the engine's are those x Factor(n).
  const std::vector<int64_t> demands = request.InMilliUnits(n.share_units).Demands();
  const std::vector<std::string> owners = request.DemandContainers();
  const int64_t factor = Factor(n);
  const auto milli = [factor](int64_t engine) { return engine / factor; };
  int64_t largest_cap = 0;
  int most_free = 0;  // the slot with the most free units
  for (int g = 0; g < s.num_gpus; ++g) {
    largest_cap = std::max(largest_cap, milli(s.gpu_capacity[g]));
    if (s.gpu_free[g] > s.gpu_free[most_free]) most_free = g;
  }
  const int64_t largest_demand = *std::max_element(demands.begin(), demands.end());
  // A GPU out of service (unhealthy) that would have room for the largest container: that is
  // what the node lacks, rather than memory.
  std::string unhealthy;
  for (const ms::InventoryGpu& g : n.inv.gpus) {
    const int64_t cap = g.units * ms::kMilliPerGpu;
    if (g.healthy || g.mode != ms::kMemoryMode || cap < largest_demand) continue;
    const auto used = n.used.find(g.index);
    if (cap - (used == n.used.end() ? 0 : used->second) < largest_demand) continue;
    unhealthy = "GPU " + std::to_string(g.index) + " (" + g.uuid + ") would have room for " +
                MilliUnits(largest_demand, unit) + " but is unhealthy";
    break;
  }
  std::string free_list;
  for (int g = 0; g < s.num_gpus; ++g)
    free_list += (g ? "," : "") + std::to_string(n.slots[g]) + ":" +
                 MilliNumber(milli(s.gpu_free[g])) + "/" + MilliNumber(milli(s.gpu_capacity[g]));
  std::string held;  // preemption's holds that count for this pod
  for (const std::string& uid : n.nominees) {
    const auto h = nominations_.find(uid);
    if (h == nominations_.end() || uid == asker.uid || h->second.priority < asker.priority)
      continue;
    std::string gpus;
    for (const auto& [g, u] : h->second.use) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    held += "; GPU " + gpus + " held for pending pod " + h->second.key + " (preemption)";
  }
  const std::string free_text = " (free/total " + std::string(ms::MemoryUnitName(unit)) +
                                " per GPU " + free_list + held + ")";
  // "the most free is GPU 2 (GPU-ab12) with 3 GiB of 16 GiB"
  const ms::InventoryGpu* best = n.inv.FindByIndex(n.slots[most_free]);
  const std::string best_text =
      "the most free is GPU " + std::to_string(n.slots[most_free]) +
      (best != nullptr && !best->uuid.empty() ? " (" + best->uuid + ")" : std::string()) +
      " with " + MilliUnits(milli(s.gpu_free[most_free]), unit) + " free of " +
      MilliUnits(milli(s.gpu_capacity[most_free]), unit);
  for (size_t i = 0; i < demands.size(); ++i) {
    if (demands[i] > largest_cap)
      return Verdict(K::kUnresolvable,
                     unhealthy.empty() ? reasons::kGpuMemoryInsufficient : reasons::kGpuUnhealthy,
                     "container " + owners[i] + " asks " + MilliUnits(demands[i], unit) +
                         ", more than any GPU here has (largest: " + MilliUnits(largest_cap, unit) +
                         ")" + (unhealthy.empty() ? "" : "; " + unhealthy));
  }
  if (pl::CheckFit(Emptied(s), shape) != pl::Rejection::kNone) {
    return Verdict(K::kUnresolvable, reasons::kNoGpuFitsContainer,
                   "the pod's " + std::to_string(demands.size()) + " GPU containers (" +
                       DemandList(demands, unit) +
                       ") cannot fit on this node's GPUs even when they are empty" + free_text);
  }
  const pl::Rejection r = pl::CheckFit(s, shape);
  if (r == pl::Rejection::kClientLimit)
    return Verdict(K::kFailed, reasons::kClientCeilingReached,
                   "the GPUs with room already serve " + std::to_string(s.max_clients) +
                       " containers each (maxClientsPerGpu)" + free_text);
  const std::string_view memory_code =
      !unhealthy.empty() ? reasons::kGpuUnhealthy : reasons::kGpuMemoryInsufficient;
  if (demands.size() == 1)
    return Verdict(K::kFailed, memory_code,
                   "no GPU has " + MilliUnits(demands[0], unit) + " free for container " +
                       owners[0] + ": " + best_text + (unhealthy.empty() ? "" : "; " + unhealthy) +
                       free_text);
  // Several containers: the largest alone does not fit anywhere (memory), or each would fit
  // some GPU alone but not all of them at once.
  const bool largest_fits = milli(s.gpu_free[most_free]) >= largest_demand;
  return Verdict(K::kFailed, largest_fits ? reasons::kNoGpuFitsContainer : memory_code,
                 "the pod's containers (" + DemandList(demands, unit) +
                     ") do not fit on the GPUs' free memory: " + best_text +
                     (unhealthy.empty() ? "" : "; " + unhealthy) + free_text);
}

NodeVerdict GpuCache::HeldBack(const NodeRec& n) const {
  size_t waiting = 0;
  for (const NodeRec::Guard& g : n.guards)
    if (g.whole_node) waiting += g.waiting.size();
  return Verdict(NodeVerdict::Kind::kFailed, reasons::kNodeHeldBack,
                 "gpushare-scheduler started recently and takes no new shares here until the " +
                     std::to_string(waiting) +
                     " pods bound here before its start are admitted and confirmed by "
                     "gpushare-node");
}

NodeVerdict GpuCache::Clash(const NodeRec& n, const ms::PodRequest& request) const {
  if (n.pending == 0) return {};
  const std::vector<ms::SlotKey> keys = ms::SlotKeys(request);
  if (n.odd_pending == 0 &&
      std::none_of(keys.begin(), keys.end(), [](const ms::SlotKey& k) { return k.odd(); }))
    return {};
  std::optional<std::string> why = ms::FreshConflict(keys, n.pending_keys, options_.unit);
  if (!why) return {};
  return Verdict(NodeVerdict::Kind::kFailed, reasons::kPendingSlotConflict, *why);
}

// --- decisions ---------------------------------------------------------------------------------

std::vector<NodeVerdict> GpuCache::Filter(const ms::PodRequest& request,
                                          const std::vector<std::string_view>& names,
                                          const Asker& asker) {
  MutexLock l(&mu_);
  std::vector<NodeVerdict> out(names.size());
  EnsureEngine();
  // Requests resolve per GPU size (fractions and whole GPUs into units) and become engine units
  // per node scale: one resolved request and shape per (size, scale).
  struct Sized {
    Result<ms::PodRequest> request = Status::Internal("unset");
    Result<pl::ShapeId> shape = Status::Internal("unset");
    bool odd = false;
  };
  std::map<std::pair<int64_t, int64_t>, Sized> sized;
  Masked masked = MaskNamed(request.selector, names);
  const uint64_t visit = ++visit_;
  std::unordered_set<std::string_view> unknown;  // names not in the cache, for their repeats
  for (size_t i = 0; i < names.size(); ++i) {
    const int32_t id = node_index_.Find(names[i]);
    if (id == NameIndex::kNone) {
      out[i] = Verdict(NodeVerdict::Kind::kUnresolvable, reasons::kNodeUnknown,
                       "node is not in gpushare-scheduler's cache (not seen by its node informer)");
      out[i].repeat = !unknown.insert(names[i]).second;
      continue;
    }
    NodeHot& h = hot_[static_cast<size_t>(id)];
    if (h.visit == visit) {
      out[i].repeat = true;
      continue;
    }
    h.visit = visit;
    const NodeRec& rec = *by_id_[static_cast<size_t>(id)];
    if (rec.eid < 0 || masked.blocked.count(&rec) > 0) {  // the node's own reason, or GpuExcluded
      out[i] = Check(rec, request, pl::PodShape{}, asker);
      continue;
    }
    if (request.unresolved() && rec.share_units <= 0) {
      out[i] = Verdict(NodeVerdict::Kind::kUnresolvable, reasons::kNoSharedGpu,
                       OnNode(rec, request).status().message());
      continue;
    }
    auto [at, fresh] = sized.try_emplace({request.unresolved() ? rec.share_units : 0, Factor(rec)});
    Sized& z = at->second;
    if (fresh) {
      z.request =
          request.unresolved() ? request.Resolve(rec.share_units) : Result<ms::PodRequest>(request);
      z.shape = z.request.ok() ? Shape(rec, *z.request) : Result<pl::ShapeId>(z.request.status());
      if (z.request.ok()) {
        const std::vector<ms::SlotKey> keys = ms::SlotKeys(*z.request);
        z.odd = std::any_of(keys.begin(), keys.end(), [](const ms::SlotKey& k) { return k.odd(); });
      }
    }
    if (!z.shape.ok()) {
      out[i] = Verdict(NodeVerdict::Kind::kUnresolvable, reasons::kInvalidRequest,
                       z.shape.status().message());
    } else if (const pl::PodShape& fast = engine_->shape(*z.shape);
               h.eid < 0 || pl::CheckFit(cluster_.node(h.eid), fast) != pl::Rejection::kNone) {
      // The reason, in words (and the room this pod has where preemption holds GPUs).
      out[i] = Check(rec, *z.request, fast, asker);
    } else if (rec.held_back > 0) {
      out[i] = HeldBack(rec);
    } else if (rec.odd_pending > 0 || z.odd) {
      out[i] = Clash(rec, *z.request);
    }  // else: it fits (the verdict's default)
  }
  Unmask(masked);
  return out;
}

std::vector<int64_t> GpuCache::Score(const ms::PodRequest& request,
                                     const std::vector<std::string_view>& names,
                                     const kube::CpuMemory& cpu) {
  MutexLock l(&mu_);
  std::vector<int64_t> out(names.size(), 0);
  EnsureEngine();
  // One group per engine shape: the request resolves per GPU size and node scale, and the
  // resolutions that are the same shape in engine units (a fraction on every size when the
  // sizes share a unit) are evaluated together, so the policy chooses among all of them.
  struct Group {
    std::vector<pl::NodeId> ids;
    std::vector<size_t> where;
  };
  std::map<std::pair<int64_t, int64_t>, Result<pl::ShapeId>> shapes;
  std::map<pl::ShapeId, Group> groups;
  Masked masked = MaskNamed(request.selector, names);
  const uint64_t visit = ++visit_;
  std::unordered_set<std::string_view> unknown;  // names not in the cache, for their repeats
  for (size_t i = 0; i < names.size(); ++i) {
    const int32_t id = node_index_.Find(names[i]);
    NodeHot* h = id == NameIndex::kNone ? nullptr : &hot_[static_cast<size_t>(id)];
    if (h != nullptr ? h->visit == visit : !unknown.insert(names[i]).second) {
      out[i] = -1;
      continue;
    }
    if (h == nullptr) continue;
    h->visit = visit;
    if (h->eid < 0) continue;  // cannot take the pod: 0
    const NodeRec& rec = *by_id_[static_cast<size_t>(id)];
    if (masked.blocked.count(&rec) > 0) continue;  // every GPU excluded: 0
    const int64_t size = request.unresolved() ? rec.share_units : 0;
    if (request.unresolved() && size <= 0) continue;
    auto [at, fresh] = shapes.try_emplace({size, Factor(rec)}, Status::Internal("unset"));
    if (fresh) {
      Result<ms::PodRequest> r = request.Resolve(size);
      at->second = r.ok() ? Shape(rec, *r, cpu) : Result<pl::ShapeId>(r.status());
    }
    if (!at->second.ok()) continue;
    Group& g = groups[*at->second];
    g.ids.push_back(h->eid);
    g.where.push_back(i);
  }
  // Each group evaluated with its shape; the scores scaled over all of them together.
  std::vector<pl::Verdict> verdicts;
  std::vector<pl::NodeId> ids;
  std::vector<size_t> where;
  std::vector<pl::NodeId> choices;  // each group's own choice
  for (auto& [shape, g] : groups) {
    std::vector<pl::Verdict> v = engine_->Evaluate(shape, g.ids);
    const pl::Decision d = engine_->ChooseEvaluated(shape, v);
    if (d.node >= 0) choices.push_back(d.node);
    verdicts.insert(verdicts.end(), v.begin(), v.end());
    ids.insert(ids.end(), g.ids.begin(), g.ids.end());
    where.insert(where.end(), g.where.begin(), g.where.end());
  }
  Unmask(masked);
  // Min-max of the policy's value; when every value ties, of its tiebreak.
  const std::vector<int> scaled = pl::PlacementEngine::ScaleScores(verdicts, 10);
  if (std::none_of(scaled.begin(), scaled.end(), [](int x) { return x >= 0; })) return out;
  for (size_t k = 0; k < scaled.size(); ++k)
    if (scaled[k] >= 0) out[where[k]] = scaled[k];
  // The engine's own choice (its tie rank breaks ties) is the only 10; across GPU sizes, the
  // group choice with the best scaled score (the first size on a tie).
  pl::NodeId best = -1;
  int best_score = -1;
  for (pl::NodeId c : choices)
    for (size_t k = 0; k < ids.size(); ++k)
      if (ids[k] == c && scaled[k] > best_score) {
        best = c;
        best_score = scaled[k];
      }
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] == best) {
      out[where[k]] = 10;
    } else if (out[where[k]] == 10) {
      out[where[k]] = 9;
    }
  }
  return out;
}

Result<Reservation> GpuCache::Reserve(const kube::Pod& pod, const ms::PodRequest& asked,
                                      const std::string& node, int64_t now_ns,
                                      std::string_view* code) {
  MutexLock l(&mu_);
  std::string_view ignored;
  std::string_view& why = code != nullptr ? *code : ignored;
  why = reasons::kBindConflict;
  if (!synced_) {
    why = reasons::kSchedulerNotReady;
    return Status::Unavailable("cache not synced");
  }
  const std::string& uid = pod.metadata.uid;
  const std::string key = pod.metadata.namespace_ + "/" + pod.metadata.name;
  auto it = pods_.find(uid);
  if (it != pods_.end() && it->second->state != PodRec::State::kExpired) {
    PodRec& p = *it->second;
    if (p.state == PodRec::State::kReserved)
      return Status::Aborted("a bind of pod " + key + " is already in progress (node " + p.node +
                             ")");
    if (p.node != node)
      return Status::FailedPrecondition("pod " + key + " is already assigned to node " + p.node +
                                        " (" + std::string(StateName(static_cast<int>(p.state))) +
                                        ")");
    Reservation r;
    r.already = true;
    r.request = p.request;
    r.containers = p.gpus;
    r.assume_ns = p.assume_ns;
    for (const std::string& c : p.request.DemandContainers()) {
      auto g = p.gpus.find(c);
      r.demand_gpus.push_back(g == p.gpus.end() ? -1 : g->second);
    }
    return r;
  }
  EnsureEngine();
  NodeRec* found = FindNode(node);
  if (found == nullptr || found->eid < 0) {
    why = found == nullptr ? reasons::kNodeUnknown : found->problem_code;
    return Status::FailedPrecondition(
        "node " + node + ": " +
        (found == nullptr ? std::string("not in gpushare-scheduler's cache") : found->problem));
  }
  NodeRec& n = *found;
  Result<ms::PodRequest> on_node = OnNode(n, asked);
  if (!on_node.ok()) {
    why = reasons::kNoSharedGpu;
    return Status::FailedPrecondition("node " + node + ": " + on_node.status().message());
  }
  const ms::PodRequest& request = *on_node;
  // Its own hold: the GPUs preemption freed for it, when they still have room.
  if (auto nom = nominations_.find(uid); nom != nominations_.end()) {
    const Nomination own = nom->second;
    DropNomination(uid, own.node == node ? "binding" : "binding to another node");
    if (own.node == node && n.held_back == 0 &&
        Clash(n, request).kind == NodeVerdict::Kind::kFits) {
      std::vector<int> held;
      for (const std::string& c : request.DemandContainers()) {
        const auto g = own.gpus.find(c);
        held.push_back(g == own.gpus.end() ? -1 : g->second);
      }
      Result<Reservation> r = Book(pod, request, n, held, now_ns);
      if (r.ok()) return r;
      Log("event=nomination_unusable pod=" + Value(key) + " node=" + Value(node) +
          " gpus=" + Value(GpuList(own.gpus)) + " error=" + Value(r.status().message()));
    }
  }
  EnsureEngine();
  GPUSHARE_ASSIGN_OR_RETURN(pl::ShapeId shape, Shape(n, request));
  NodeVerdict v = CheckAlone(n, request, engine_->shape(shape));
  if (v.kind == NodeVerdict::Kind::kFailed && !n.nominees.empty()) {
    // Holds of lower priority do not stop this pod (kube-scheduler counted them only for pods of
    // lower or equal priority): where it needs their GPUs, they end.
    std::vector<std::string> lower;
    for (const std::string& other : n.nominees) {
      const auto h = nominations_.find(other);
      if (h != nominations_.end() && h->second.priority < pod.spec.priority) lower.push_back(other);
    }
    if (!lower.empty()) {
      for (const std::string& other : lower)
        DropNomination(other, "a pod of higher priority (" + key + ") needs its GPUs");
      EnsureEngine();
      GPUSHARE_ASSIGN_OR_RETURN(shape, Shape(n, request));
      v = CheckAlone(n, request, engine_->shape(shape));
    }
  }
  if (v.kind != NodeVerdict::Kind::kFits) {
    // No room any more is a conflict with what was booked since the filter; a node that cannot
    // take the pod at all keeps its own code.
    if (v.kind == NodeVerdict::Kind::kUnresolvable) why = v.code;
    return v.kind == NodeVerdict::Kind::kFailed
               ? Status::ResourceExhausted("node " + node + ": " + v.reason)
               : Status::FailedPrecondition("node " + node + ": " + v.reason);
  }
  GPUSHARE_ASSIGN_OR_RETURN(const std::vector<int> gpus, Choose(n, request, shape));
  return Book(pod, request, n, gpus, now_ns);
}

Result<std::vector<int>> GpuCache::Choose(const NodeRec& n, const ms::PodRequest& request,
                                          pl::ShapeId shape) {
  Masked masked = Mask(request.selector, {&n});
  const std::vector<pl::Verdict> verdicts = engine_->Evaluate(shape, {n.eid});
  Unmask(masked);
  if (verdicts.empty() || verdicts[0].rejection != pl::Rejection::kNone)
    return Status::ResourceExhausted("node " + n.name + ": no GPU choice fits");
  const pl::GpuAssignment& a = verdicts[0].choice.gpus;
  const std::vector<int64_t> demands = EngineKey(n, request);
  if (a.count != demands.size())
    return Status::Internal("engine returned " + std::to_string(a.count) + " GPUs for " +
                            std::to_string(demands.size()) + " demands");
  const std::vector<size_t> order = ShapeOrder(demands);
  std::vector<int> gpus(demands.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) gpus[order[i]] = n.slots[a.gpu[i]];
  return gpus;
}

Status GpuCache::Pick(const kube::Pod& pod, const ms::PodRequest& asked, const std::string& node,
                      int64_t now_ns) {
  MutexLock l(&mu_);
  if (!synced_) return Status::Unavailable("cache not synced");
  const std::string& uid = pod.metadata.uid;
  if (auto p = pods_.find(uid); p != pods_.end() && p->second->state != PodRec::State::kExpired)
    return Status::Ok();  // booked already: its booking is what counts
  if (auto h = nominations_.find(uid); h != nominations_.end()) {
    if (!h->second.pick) return Status::Ok();  // preemption's hold: the GPUs freed for it
    DropNomination(uid, "picked again");
  }
  EnsureEngine();
  NodeRec* found = FindNode(node);
  if (found == nullptr || found->eid < 0)
    return Status::FailedPrecondition(
        "node " + node + ": " +
        (found == nullptr ? std::string("not in the cache") : found->problem));
  NodeRec& n = *found;
  GPUSHARE_ASSIGN_OR_RETURN(const ms::PodRequest request, OnNode(n, asked));
  GPUSHARE_ASSIGN_OR_RETURN(const pl::ShapeId shape, Shape(n, request));
  const NodeVerdict v = CheckAlone(n, request, engine_->shape(shape), Asker::Of(pod));
  if (v.kind != NodeVerdict::Kind::kFits)
    return v.kind == NodeVerdict::Kind::kFailed
               ? Status::ResourceExhausted("node " + node + ": " + v.reason)
               : Status::FailedPrecondition("node " + node + ": " + v.reason);
  GPUSHARE_ASSIGN_OR_RETURN(const std::vector<int> gpus, Choose(n, request, shape));
  Nomination h;
  h.uid = uid;
  h.key = pod.metadata.namespace_ + "/" + pod.metadata.name;
  h.node = node;
  h.priority = pod.spec.priority;
  h.gpus = ms::AssignContainers(request, gpus);
  h.use = MilliUsage(n.share_units, request, h.gpus);
  h.pick = true;
  h.since_ns = now_ns;
  AddNomination(std::move(h));
  return Status::Ok();
}

Result<Reservation> GpuCache::Book(const kube::Pod& pod, const ms::PodRequest& request, NodeRec& n,
                                   const std::vector<int>& gpus, int64_t now_ns) {
  const std::string& uid = pod.metadata.uid;
  const std::string key = pod.metadata.namespace_ + "/" + pod.metadata.name;
  const std::string& node = n.name;
  Reservation r;
  r.request = request;
  r.demand_gpus = gpus;
  for (int g : gpus) {
    if (g < 0 || n.SlotOf(g) < 0)
      return Status::FailedPrecondition("node " + node + ": GPU " + std::to_string(g) +
                                        " does not serve memory shares");
    const ms::InventoryGpu* inv = n.inv.FindByIndex(g);
    if (std::optional<std::string> why =
            inv == nullptr ? std::nullopt : request.selector.Excludes(inv->model, inv->uuid))
      return Status::FailedPrecondition("node " + node + ": GPU " + std::to_string(g) + ": " +
                                        *why);
  }
  r.containers = ms::AssignContainers(request, gpus);
  r.assume_ns = now_ns;
  // Belt and braces: the authoritative usage must have room, whatever the engine thinks.
  const std::map<int, ms::GpuUse> use = MilliUsage(n.share_units, request, r.containers);
  for (const auto& [g, u] : use) {
    const ms::InventoryGpu* gpu = n.inv.FindByIndex(g);
    const int64_t used = n.used.count(g) ? n.used.at(g) : 0;
    const int clients = n.clients.count(g) ? n.clients.at(g) : 0;
    if (gpu == nullptr || used + u.units > gpu->units * ms::kMilliPerGpu ||
        clients + u.clients > n.inv.max_clients_per_gpu)
      return Status::Internal("node " + node + ": GPU " + std::to_string(g) +
                              " would be over-committed (" + MilliUnits(used, options_.unit) +
                              " + " + MilliUnits(u.units, options_.unit) + " of " +
                              std::to_string(gpu ? gpu->units : 0) + "); refusing");
  }
  r.dev_units = n.inv.FindByIndex(gpus[0])->units;
  r.token = next_token_++;
  if (pods_.count(uid) != 0) RemovePod(uid);  // an expired booking is replaced
  auto rec = std::make_unique<PodRec>();
  rec->uid = uid;
  rec->key = key;
  rec->node = node;
  rec->request = request;
  rec->gpus = r.containers;
  rec->planned = r.containers;
  rec->use = use;
  rec->plan_use = use;
  rec->keys = ms::SlotKeys(request);
  rec->state = PodRec::State::kReserved;
  rec->assume_ns = now_ns;
  rec->token = r.token;
  rec->TakeFacts(pod);
  rec->demands = PodWorkloadKey(n, *rec);
  PodRec& p = *rec;
  pods_.emplace(uid, std::move(rec));
  AddUse(p);
  SetPodShape(p, true);
  if (auto c = pod_cpu_.find(uid); c == pod_cpu_.end() || c->second.node != node)
    CountCpu(uid, node, kube::PodCpuMemoryRequests(pod), /*reserved=*/true);
  return r;
}

void GpuCache::Commit(const std::string& pod_uid, uint64_t token) {
  MutexLock l(&mu_);
  auto it = pods_.find(pod_uid);
  if (it != pods_.end() && it->second->token == token &&
      it->second->state == PodRec::State::kReserved)
    it->second->state = PodRec::State::kBound;
}

void GpuCache::Rollback(const std::string& pod_uid, uint64_t token) {
  MutexLock l(&mu_);
  auto it = pods_.find(pod_uid);
  if (it != pods_.end() && it->second->token == token &&
      it->second->state == PodRec::State::kReserved) {
    RemovePod(pod_uid);
    if (auto c = pod_cpu_.find(pod_uid); c != pod_cpu_.end() && c->second.reserved)
      CountCpu(pod_uid, "", {});
  }
}

std::vector<ExpiredPod> GpuCache::ExpireAssumed(int64_t now_ns, int64_t timeout_ns) {
  MutexLock l(&mu_);
  std::vector<ExpiredPod> out;
  for (auto& [name, n] : nodes_) {
    for (NodeRec::Guard& g : n->guards) {
      if (!g.whole_node) continue;
      if (g.since_ns == 0) g.since_ns = now_ns;
      if (now_ns - g.since_ns < options_.restart_hold_ns) continue;
      Log("event=node_hold_timed_out node=" + Value(name) +
          " still_pending=" + std::to_string(g.waiting.size()));
      g.waiting.clear();
    }
    SettleGuards(*n);
  }
  for (auto& [uid, p] : pods_) {
    if (p->state != PodRec::State::kAssumed && p->state != PodRec::State::kBound) continue;
    if (!p->pending || now_ns - p->assume_ns < timeout_ns) continue;
    ExpiredPod e;
    e.key = p->key;
    e.uid = uid;
    e.node = p->node;
    e.gpus = p->gpus;
    for (const auto& [g, u] : p->use) e.units += u.units;
    e.units = CeilUnits(e.units);
    e.age_ns = now_ns - p->assume_ns;
    RemoveUse(*p);
    p->state = PodRec::State::kExpired;
    SettleGuards(NodeFor(p->node));
    out.push_back(std::move(e));
  }
  return out;
}

bool GpuCache::PlanMovable(const NodeRec& n, const PodRec& p) {
  return n.pending == 0 && n.guards.empty() && p.state == PodRec::State::kConfirmed &&
         !p.use.empty() && p.planned != p.gpus;
}

std::vector<PlanMove> GpuCache::PlanMoves() {
  MutexLock l(&mu_);
  std::vector<PlanMove> out;
  out.swap(nomination_moves_);
  for (auto& [name, n] : nodes_) {
    if (!n->guards.empty() || n->pods.empty()) continue;
    std::vector<ms::CountedPod> counted;
    std::map<std::string, PodRec*> by_key;
    for (const auto& [uid, rec] : n->pods) {
      if (!rec->counted) continue;
      PodRec& p = *rec;
      counted.push_back(
          {p.key, p.request, p.planned, p.gpus, p.state == PodRec::State::kConfirmed});
      by_key[p.key] = &p;
    }
    for (auto& [key, plan] : ms::SettledPlanMoves(counted, true)) {
      PodRec& p = *by_key.at(key);
      out.push_back({key, p.uid, name, p.planned, plan});
      RemoveUse(p);
      p.planned = plan;
      p.plan_use = KnownUsage(n->inv, n->has_inventory, n->share_units, p.request, plan);
      AddUse(p);
      Log("event=plan_moved pod=" + Value(key) + " node=" + Value(name) +
          " from=" + Value(GpuList(out.back().from)) + " to=" + Value(GpuList(plan)));
    }
  }
  return out;
}

// --- preemption --------------------------------------------------------------------------------

void PreemptionNodeView::ReserveIds(size_t pods, size_t bytes_each) {
  ids_.reserve(pods * bytes_each);
  id_at_.reserve(3 * pods);
}

void PreemptionNodeView::AddIds(std::string_view uid, std::string_view key) {
  id_at_.push_back(static_cast<uint32_t>(ids_.size()));
  id_at_.push_back(static_cast<uint32_t>(uid.size()));
  id_at_.push_back(static_cast<uint32_t>(key.size()));
  ids_.append(uid);
  ids_.append(key);
}

std::string_view PreemptionNodeView::Id(size_t pod, int which) const {
  const uint32_t at = id_at_[3 * pod], uid = id_at_[3 * pod + 1], key = id_at_[3 * pod + 2];
  return which == 0 ? std::string_view(ids_).substr(at, uid)
                    : std::string_view(ids_).substr(at + uid, key);
}

void GpuCache::AddNomination(Nomination nom) {
  NodeRec& n = NodeFor(nom.node);
  const std::string uid = nom.uid;
  AddTo(n.nominated, nom.use, +1);
  n.nominees.insert(uid);
  nominations_[uid] = std::move(nom);
  Recount(n);
}

void GpuCache::DropNomination(const std::string& uid, std::string_view why) {
  auto it = nominations_.find(uid);
  if (it == nominations_.end()) return;
  const Nomination& h = it->second;
  NodeRec& n = NodeFor(h.node);
  if (!h.pick)  // a pick ends with every bind: only its expiry is news (ExpireNominations)
    Log("event=nomination_ended pod=" + Value(h.key) + " node=" + Value(h.node) +
        " gpus=" + Value(GpuList(h.gpus)) + " reason=" + Value(std::string(why)));
  AddTo(n.nominated, h.use, -1);
  n.nominees.erase(uid);
  nominations_.erase(it);
  Recount(n);
}

std::map<int, ms::GpuUse> GpuCache::Exempt(const NodeRec& n, const Asker& asker) const {
  std::map<int, ms::GpuUse> out;
  for (const std::string& uid : n.nominees) {
    const auto h = nominations_.find(uid);
    if (h == nominations_.end()) continue;
    if (uid == asker.uid || h->second.priority < asker.priority) AddTo(out, h->second.use, +1);
  }
  return out;
}

pl::NodeState GpuCache::StateWithout(const NodeRec& n,
                                     const std::map<int, ms::GpuUse>& lifted) const {
  pl::NodeState s = cluster_.node(n.eid);
  for (size_t slot = 0; slot < n.slots.size(); ++slot) {
    const int idx = n.slots[slot];
    const auto l = lifted.find(idx);
    if (l == lifted.end()) continue;
    // As Resync books it: usage saturated at the capacity, clients at the ceiling.
    const auto u = n.used.find(idx);
    const auto c = n.clients.find(idx);
    const int64_t used =
        std::max<int64_t>(0, (u == n.used.end() ? 0 : u->second) - l->second.units) * Factor(n);
    const int clients = std::max(0, (c == n.clients.end() ? 0 : c->second) - l->second.clients);
    s.gpu_free[slot] = s.gpu_capacity[slot] - std::min(used, s.gpu_capacity[slot]);
    s.gpu_clients[slot] = static_cast<int16_t>(std::min(clients, s.max_clients));
  }
  pl::RefreshTotals(s);
  return s;
}

Result<PreemptionView> GpuCache::ViewForPreemption(const ms::PodRequest& request,
                                                   const Asker& asker,
                                                   const std::vector<std::string_view>& names) {
  MutexLock l(&mu_);
  if (!synced_) return Status::Unavailable("cache not synced");
  EnsureEngine();
  PreemptionView view;
  view.nodes.reserve(names.size());
  for (std::string_view name : names) {
    PreemptionNodeView& v = view.nodes.emplace_back();
    v.name = std::string(name);
    const NodeRec* n = FindNode(name);
    if (n == nullptr || !n->exists) {
      v.problem = "node is not in gpushare-scheduler's cache";
      continue;
    }
    if (n->eid < 0 || !n->has_inventory || n->slots.empty()) {
      v.problem = n->problem;
      continue;
    }
    if (n->held_back > 0) {
      v.problem = HeldBack(*n).reason;
      continue;
    }
    Result<ms::PodRequest> on_node = OnNode(*n, request);
    Result<pl::ShapeId> shape =
        on_node.ok() ? Shape(*n, *on_node) : Result<pl::ShapeId>(on_node.status());
    if (!shape.ok()) {
      v.problem = shape.status().message();
      continue;
    }
    std::vector<char> excluded;
    if (const size_t count = ExcludedSlots(*n, request.selector, &excluded);
        count > 0 && count == excluded.size()) {
      v.problem = "the pod's GPU choice excludes every GPU here: " +
                  ExclusionList(n->slots, Exclusions(*n, request.selector));
      continue;
    }
    v.shape = engine_->shape(*shape);
    v.usable = true;
    v.slots = n->slots;
    const std::map<int, ms::GpuUse> exempt = Exempt(*n, asker);
    v.input.node = StateWithout(*n, exempt);
    // As the scheduler counts each GPU (ms::EffectiveUsage): the larger of where slots were
    // planned and where pods are, plus the holds this pod is not exempt from. Evicting the pods
    // on a GPU frees it only where no other pod's slot is still planned there, except the slots
    // of swapped pods whose plans Nominate moves to where they are (PlanMovable): they count
    // where they are.
    // In engine units, as the node's state is.
    const int64_t f = Factor(*n);
    v.input.ledger.resize(n->slots.size());
    for (size_t slot = 0; slot < n->slots.size(); ++slot) {
      const int idx = n->slots[slot];
      pl::SlotLedger& l = v.input.ledger[slot];
      if (const auto it = n->plan.find(idx); it != n->plan.end()) {
        l.plan = it->second.units * f;
        l.plan_clients = it->second.clients;
      }
      if (const auto it = n->current.find(idx); it != n->current.end()) {
        l.current = it->second.units * f;
        l.current_clients = it->second.clients;
      }
      if (const auto it = n->nominated.find(idx); it != n->nominated.end()) {
        l.other = it->second.units * f;
        l.other_clients = it->second.clients;
      }
      if (const auto it = exempt.find(idx); it != exempt.end()) {
        l.other -= it->second.units * f;
        l.other_clients -= it->second.clients;
      }
    }
    for (const auto& [uid, rec] : n->pods) {
      if (!rec->counted || !PlanMovable(*n, *rec)) continue;
      for (const auto& [gpu, u] : rec->plan_use)
        if (const int slot = n->SlotOf(gpu); slot >= 0) {
          v.input.ledger[static_cast<size_t>(slot)].plan -= u.units * f;
          v.input.ledger[static_cast<size_t>(slot)].plan_clients -= u.clients;
        }
      for (const auto& [gpu, u] : rec->use)
        if (const int slot = n->SlotOf(gpu); slot >= 0) {
          v.input.ledger[static_cast<size_t>(slot)].plan += u.units * f;
          v.input.ledger[static_cast<size_t>(slot)].plan_clients += u.clients;
        }
    }
    // GPUs the pod may not use stay full whoever is evicted from them.
    for (size_t slot = 0; slot < excluded.size(); ++slot) {
      if (!excluded[slot]) continue;
      v.input.ledger[slot].other += v.input.node.gpu_capacity[slot];
      v.input.node.gpu_free[slot] = 0;
    }
    pl::RefreshTotals(v.input.node);
    v.input.pods.reserve(n->pods.size());
    v.input.uses.reserve(2 * n->pods.size());
    v.ReserveIds(n->pods.size(), 80);
    for (const auto& [uid, rec] : n->pods) {
      if (!rec->counted) continue;
      const PodRec& p = *rec;
      pl::PreemptionPod pod;
      pod.priority = p.priority;
      pod.start_ns = p.start_ns;
      pod.terminating = p.terminating;
      pod.evictable = p.state != PodRec::State::kReserved;
      pod.cpu_milli = p.requests.cpu_milli;
      pod.memory_bytes = p.requests.memory_bytes;
      pl::SlotUse use[pl::kMaxGpusPerNode], plan[pl::kMaxGpusPerNode];
      size_t k = 0, m = 0;
      for (const auto& [gpu, u] : p.use) {
        const int slot = n->SlotOf(gpu);
        if (slot >= 0 && k < pl::kMaxGpusPerNode) use[k++] = {slot, u.units * f, u.clients};
      }
      for (const auto& [gpu, u] : PlanMovable(*n, p) ? p.use : p.plan_use) {
        const int slot = n->SlotOf(gpu);
        if (slot >= 0 && m < pl::kMaxGpusPerNode) plan[m++] = {slot, u.units * f, u.clients};
      }
      v.input.Add(std::move(pod), use, k, plan, m);
      v.AddIds(p.uid, p.key);
    }
  }
  return view;
}

Result<Nomination> GpuCache::Nominate(const kube::Pod& pod, const ms::PodRequest& asked,
                                      const std::string& node, const pl::GpuAssignment& slots,
                                      std::vector<std::string> victims, int64_t now_ns) {
  MutexLock l(&mu_);
  NodeRec* n = FindNode(node);
  Result<ms::PodRequest> on_node =
      n != nullptr ? OnNode(*n, asked) : Result<ms::PodRequest>(Status::NotFound("no node"));
  const ms::PodRequest request = on_node.ok() ? *on_node : ms::PodRequest{};
  const std::vector<int64_t> demands =
      on_node.ok() ? EngineKey(*n, request) : std::vector<int64_t>{};
  if (n == nullptr || n->eid < 0 || !on_node.ok() || slots.count != demands.size())
    return Status::FailedPrecondition("node " + node + ": cannot hold GPUs for pod " +
                                      pod.metadata.namespace_ + "/" + pod.metadata.name);
  const std::vector<size_t> order = ShapeOrder(demands);
  std::vector<int> gpus(demands.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) {
    if (slots.gpu[i] >= n->slots.size())
      return Status::InvalidArgument("GPU slot " + std::to_string(slots.gpu[i]) + " of node " +
                                     node + " does not exist");
    gpus[order[i]] = n->slots[slots.gpu[i]];
  }
  // The swapped pods whose planned slots are on the GPUs held: their plans move to where they
  // are, as ViewForPreemption counted them (PlanMovable), so that the victims' eviction frees
  // those GPUs in the scheduler's count too. Sweep writes the new plans to the pods.
  std::vector<PodRec*> movable;
  for (const auto& [uid, rec] : n->pods) {
    if (!rec->counted || !PlanMovable(*n, *rec)) continue;
    for (const auto& [gpu, u] : rec->plan_use)
      if (std::find(gpus.begin(), gpus.end(), gpu) != gpus.end()) {
        movable.push_back(rec);
        break;
      }
  }
  for (PodRec* p : movable) {
    nomination_moves_.push_back({p->key, p->uid, node, p->planned, p->gpus});
    RemoveUse(*p);
    p->planned = p->gpus;
    p->plan_use = KnownUsage(n->inv, n->has_inventory, n->share_units, p->request, p->planned);
    AddUse(*p);
    Log("event=plan_moved pod=" + Value(p->key) + " node=" + Value(node) +
        " from=" + Value(GpuList(nomination_moves_.back().from)) +
        " to=" + Value(GpuList(p->planned)) + " reason=preemption");
  }
  Nomination h;
  h.uid = pod.metadata.uid;
  h.key = pod.metadata.namespace_ + "/" + pod.metadata.name;
  h.node = node;
  h.priority = pod.spec.priority;
  h.gpus = ms::AssignContainers(request, gpus);
  h.use = MilliUsage(n->share_units, request, h.gpus);
  h.victims = std::move(victims);
  h.since_ns = now_ns;
  h.seen = pod.status.nominated_node_name == node;
  DropNomination(h.uid, "nominated again");
  // kube-scheduler clears the nominations of lower-priority pods on the node it nominates.
  std::vector<std::string> lower;
  for (const std::string& other : n->nominees) {
    const auto o = nominations_.find(other);
    if (o != nominations_.end() && o->second.priority < h.priority) lower.push_back(other);
  }
  for (const std::string& other : lower)
    DropNomination(other, "pod " + h.key + " of higher priority was nominated on the node");
  Log("event=nominated pod=" + Value(h.key) + " node=" + Value(node) +
      " gpus=" + Value(GpuList(h.gpus)) + " priority=" + std::to_string(h.priority) +
      " victims=" + std::to_string(h.victims.size()));
  Nomination copy = h;
  AddNomination(std::move(h));
  return copy;
}

std::vector<Nomination> GpuCache::ExpireNominations(int64_t now_ns, int64_t timeout_ns,
                                                    int64_t pick_timeout_ns) {
  MutexLock l(&mu_);
  std::vector<Nomination> out;
  for (auto& [uid, h] : nominations_) {
    if (h.pick) {
      if (now_ns - h.since_ns >= pick_timeout_ns) out.push_back(h);
      continue;
    }
    bool victims_left = false;
    for (const std::string& v : h.victims) {
      const auto p = pods_.find(v);
      victims_left = victims_left || (p != pods_.end() && p->second->counted);
    }
    if (!victims_left && h.victims_gone_ns == 0) h.victims_gone_ns = now_ns;
    const bool never_nominated = !h.seen && now_ns - h.since_ns >= timeout_ns;
    const bool unclaimed = h.victims_gone_ns != 0 && now_ns - h.victims_gone_ns >= timeout_ns;
    if (never_nominated || unclaimed) out.push_back(h);
  }
  for (const Nomination& h : out) {
    if (h.pick) {
      ++picks_expired_;
      Log("event=pick_expired pod=" + Value(h.key) + " node=" + Value(h.node) + " gpus=" +
          Value(GpuList(h.gpus)) + " age_ms=" + std::to_string((now_ns - h.since_ns) / 1'000'000));
    }
    DropNomination(h.uid, h.seen ? "its victims are gone and it was not bound in time"
                                 : "kube-scheduler never nominated it on the node");
  }
  return out;
}

std::vector<Nomination> GpuCache::Nominations() const {
  MutexLock l(&mu_);
  std::vector<Nomination> out;
  for (const auto& [uid, h] : nominations_) out.push_back(h);
  return out;
}

// --- introspection -----------------------------------------------------------------------------

std::vector<GpuState> GpuCache::NodeGpus(const std::string& node) const {
  MutexLock l(&mu_);
  std::vector<GpuState> out;
  const NodeRec* found = FindNode(node);
  if (found == nullptr) return out;
  const NodeRec& n = *found;
  for (const auto& g : n.inv.gpus) {
    GpuState s;
    s.index = g.index;
    s.capacity = g.units;
    s.used = n.used.count(g.index) ? CeilUnits(n.used.at(g.index)) : 0;
    s.clients = n.clients.count(g.index) ? n.clients.at(g.index) : 0;
    s.usable = n.has_inventory && n.Usable(g);
    out.push_back(s);
  }
  return out;
}

CacheStats GpuCache::stats() const {
  MutexLock l(&mu_);
  CacheStats s;
  for (const auto& [name, n] : nodes_) {
    if (n->has_inventory) ++s.nodes;
    s.usable_gpus += static_cast<int>(n->slots.size());
  }
  s.unassigned = static_cast<int>(unassigned_.size());
  for (const auto& [uid, p] : pods_) {
    if (p->counted) ++s.pods;
    if (p->counted && p->Pending()) ++s.assumed;
    if (p->state == PodRec::State::kReserved) ++s.reserved;
    if (p->state == PodRec::State::kExpired) ++s.expired;
  }
  for (const auto& [uid, h] : nominations_) s.picks += h.pick ? 1 : 0;
  s.picks_expired = picks_expired_;
  s.rebuilds = rebuilds_;
  s.policy_refreshes = policy_refreshes_;
  s.workload_pods = workload_.observed_pods;
  s.workload_shapes = static_cast<int>(workload_.shapes.size());
  return s;
}

void GpuCache::VisitGpus(const std::function<void(const GpuSample&)>& visit) const {
  MutexLock l(&mu_);
  for (const auto& [name, n] : nodes_) {
    if (!n->has_inventory && n->inv.gpus.empty()) continue;
    for (const ms::InventoryGpu& g : n->inv.gpus) {
      const auto u = n->used.find(g.index);
      const auto c = n->clients.find(g.index);
      visit(GpuSample{name, g, u == n->used.end() ? 0 : CeilUnits(u->second),
                      c == n->clients.end() ? 0 : c->second, n->has_inventory && n->Usable(g)});
    }
  }
}

InspectNode GpuCache::InspectRec(const NodeRec& n) const {
  InspectNode out;
  out.name = n.name;
  out.usable = n.exists && n.has_inventory && !n.slots.empty() && n.eid >= 0;
  if (!out.usable) {
    out.problem = n.exists ? n.problem : "node was deleted or not seen by the node informer";
    out.problem_code = n.problem_code;
  } else if (n.held_back > 0) {
    const NodeVerdict v = HeldBack(n);
    out.problem = v.reason;
    out.problem_code = v.code;
  }
  out.max_clients_per_gpu = n.inv.max_clients_per_gpu;
  std::map<int, size_t> at;  // GPU index -> position in out.gpus
  for (const ms::InventoryGpu& g : n.inv.gpus) {
    at[g.index] = out.gpus.size();
    InspectGpu& o = out.gpus.emplace_back();
    o.gpu = g;
    const auto u = n.used.find(g.index);
    const auto c = n.clients.find(g.index);
    o.used_units = u == n.used.end() ? 0 : CeilUnits(u->second);
    o.clients = c == n.clients.end() ? 0 : c->second;
    o.usable = n.has_inventory && n.Usable(g);
  }
  std::vector<const PodRec*> pods;
  for (const auto& [uid, p] : n.pods)
    if (p->counted) pods.push_back(p);
  std::sort(pods.begin(), pods.end(),
            [](const PodRec* a, const PodRec* b) { return a->key < b->key; });
  for (const PodRec* p : pods) {
    const size_t slash = p->key.find('/');
    InspectPod base;
    base.namespace_ = p->key.substr(0, slash);
    base.name = p->key.substr(slash + 1);
    base.uid = p->uid;
    base.confirmed = p->state == PodRec::State::kConfirmed;
    base.bind_in_flight = p->state == PodRec::State::kReserved;
    const std::vector<int64_t> demands = p->request.Demands();
    const std::vector<std::string> owners = p->request.DemandContainers();
    for (const auto& [gpu, use] : p->use) {
      const auto pos = at.find(gpu);
      if (pos == at.end()) continue;
      InspectPod on = base;
      on.units = CeilUnits(use.units);
      for (size_t i = 0; i < owners.size() && i < demands.size(); ++i) {
        const auto g = p->gpus.find(owners[i]);
        if (g != p->gpus.end() && g->second == gpu) on.containers[owners[i]] += demands[i];
      }
      out.gpus[pos->second].pods.push_back(std::move(on));
    }
    if (p->Pending()) {
      InspectPod pending = base;
      for (size_t i = 0; i < owners.size() && i < demands.size(); ++i)
        pending.containers[owners[i]] += demands[i];
      for (const auto& [gpu, use] : p->use) pending.units += use.units;
      pending.units = CeilUnits(pending.units);
      pending.gpus = p->gpus;
      out.pending.push_back(std::move(pending));
    }
  }
  for (const std::string& uid : n.nominees) {
    const auto h = nominations_.find(uid);
    if (h != nominations_.end()) out.nominated.push_back(h->second);
  }
  return out;
}

std::vector<std::string> GpuCache::GpuModels() const {
  MutexLock l(&mu_);
  std::set<std::string> models;
  for (const auto& [name, n] : nodes_)
    if (n->exists && n->has_inventory)
      for (const ms::InventoryGpu& g : n->inv.gpus)
        if (!g.model.empty()) models.insert(g.model);
  return {models.begin(), models.end()};
}

std::vector<InspectNode> GpuCache::Inspect() const {
  MutexLock l(&mu_);
  std::vector<InspectNode> out;
  out.reserve(nodes_.size());
  for (const auto& [name, n] : nodes_)
    if (n->exists) out.push_back(InspectRec(*n));
  return out;
}

std::optional<InspectNode> GpuCache::InspectOne(std::string_view node) const {
  MutexLock l(&mu_);
  const NodeRec* n = FindNode(node);
  if (n == nullptr || !n->exists) return std::nullopt;
  return InspectRec(*n);
}

ms::ContainerGpus GpuCache::PodGpus(const std::string& pod_uid) const {
  MutexLock l(&mu_);
  auto it = pods_.find(pod_uid);
  if (it == pods_.end() || !it->second->counted) return {};
  return it->second->gpus;
}

}  // namespace gpushare::scheduler
