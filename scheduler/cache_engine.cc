// GpuCache: the engine's view and the per-node checks. See cache_internal.h.
#include "scheduler/cache_internal.h"

namespace gpushare::scheduler {

using logfmt::Value;
using namespace cache_internal;

namespace {

constexpr size_t kMaxAskedShapes = 1024;

// A GPU of every size is 1000 x L engine units (L: the least common multiple of the GPU sizes
// in units) while L stays below this; beyond, each node counts thousandths of its unit.
constexpr int64_t kMaxCommonUnits = 10'000'000;

// Demands in thousandths of a unit: "1, 2.5 GiB".
std::string DemandList(const std::vector<int64_t>& milli, ms::MemoryUnit u) {
  std::string out;
  for (int64_t v : milli) out += (out.empty() ? "" : ", ") + MilliNumber(v);
  return out + " " + std::string(ms::MemoryUnitName(u));
}

// The engine's request for a GpuCache::EngineKey (whole GPUs negative), with `cpu_milli`.
pl::PodRequest EngineRequest(const std::vector<int64_t>& key, int64_t cpu_milli = 0) {
  pl::PodRequest r;
  r.distinct_gpus = false;
  r.cpu_milli = cpu_milli;
  for (int64_t d : key) r.gpus.push_back({d < 0 ? -d : d, d < 0});
  return r;
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

// Whether the pod may not use some GPUs: a GPU choice or a compute share.
bool Restricts(const ms::PodRequest& request) {
  return !request.selector.empty() || request.CoreSum() > 0;
}

}  // namespace

std::map<int, int64_t> GpuCache::CoreBooked(const NodeRec& n, const Asker& asker) const {
  std::map<int, int64_t> out(n.core.begin(), n.core.end());
  if (n.nominees.empty()) return out;
  for (const auto& [g, u] : Exempt(n, asker)) out[g] -= u.core;
  return out;
}

size_t GpuCache::ExcludedSlots(const NodeRec& n, const ms::PodRequest& request,
                               std::vector<char>* excluded, bool choice_only,
                               const Asker& asker) const {
  if (excluded != nullptr) excluded->assign(n.slots.size(), 0);
  if (!Restricts(request)) return 0;
  const int64_t core = choice_only ? 0 : request.CoreSum();
  const std::map<int, int64_t> booked = core > 0 ? CoreBooked(n, asker) : std::map<int, int64_t>{};
  size_t count = 0;
  for (size_t slot = 0; slot < n.slots.size(); ++slot) {
    const ms::InventoryGpu* g = n.inv.FindByIndex(n.slots[slot]);
    if (g == nullptr) continue;
    const auto b = booked.find(g->index);
    const bool out = !request.selector.Allows(g->model, g->uuid) ||
                     (core > 0 && (b == booked.end() ? 0 : b->second) + core > ms::kMaxCorePercent);
    if (!out) continue;
    ++count;
    if (excluded != nullptr) (*excluded)[slot] = 1;
  }
  return count;
}

std::vector<std::string> GpuCache::Exclusions(const NodeRec& n, const ms::PodRequest& request,
                                              const Asker& asker) const {
  std::vector<std::string> out(n.slots.size());
  if (!Restricts(request)) return out;
  const int64_t core = request.CoreSum();
  const std::map<int, int64_t> booked = core > 0 ? CoreBooked(n, asker) : std::map<int, int64_t>{};
  for (size_t slot = 0; slot < n.slots.size(); ++slot) {
    const ms::InventoryGpu* g = n.inv.FindByIndex(n.slots[slot]);
    if (g == nullptr) continue;
    const auto b = booked.find(g->index);
    const int64_t used = b == booked.end() ? 0 : b->second;
    if (std::optional<std::string> why = request.selector.Excludes(g->model, g->uuid)) {
      out[slot] = *why;
    } else if (core > 0 && used + core > ms::kMaxCorePercent) {
      // (No percent sign: kube-scheduler formats the extender's reasons into its Events.)
      out[slot] = "compute " + std::to_string(used) + "/100 booked and the pod asks " +
                  std::to_string(core) + " (" + std::string(ms::kCoreResource) + ")";
    }
  }
  return out;
}

NodeVerdict GpuCache::Check(const NodeRec& n, const ms::PodRequest& request,
                            const pl::PodShape& shape, const Asker& asker) const {
  const size_t excluded = !Restricts(request) || !n.exists || !n.has_inventory || n.eid < 0
                              ? 0
                              : ExcludedSlots(n, request, nullptr, false, asker);
  if (excluded > 0 && excluded == n.slots.size()) {
    if (ExcludedSlots(n, request, nullptr, true) == n.slots.size())
      return Verdict(NodeVerdict::Kind::kUnresolvable, reasons::kGpuExcluded,
                     "the pod's GPU choice excludes every GPU here: " +
                         ExclusionList(n.slots, Exclusions(n, request, asker)));
    return Verdict(NodeVerdict::Kind::kFailed, reasons::kGpuComputeFull,
                   "no GPU here has the pod's compute share left: " +
                       ExclusionList(n.slots, Exclusions(n, request, asker)));
  }
  NodeVerdict v = CheckRoom(n, request, shape, asker);
  if (v.kind != NodeVerdict::Kind::kFits && excluded > 0)
    v.reason +=
        (ExcludedSlots(n, request, nullptr, true) == excluded ? "; the pod's GPU choice excludes "
                                                              : "; the pod may not use ") +
        ExclusionList(n.slots, Exclusions(n, request, asker));
  return v;
}

GpuCache::Masked GpuCache::Mask(const ms::PodRequest& request,
                                const std::vector<const NodeRec*>& nodes, const Asker& asker) {
  Masked m;
  if (!Restricts(request)) return m;
  std::unordered_set<pl::NodeId> seen;
  std::vector<char> excluded;
  for (const NodeRec* n : nodes) {
    if (n == nullptr || n->eid < 0 || !seen.insert(n->eid).second) continue;
    const size_t count = ExcludedSlots(*n, request, &excluded, false, asker);
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
  Masked masked = Mask(request, {&n}, asker);
  NodeVerdict v = Check(n, request, shape, asker);
  Unmask(masked);
  return v;
}

GpuCache::Masked GpuCache::MaskNamed(const ms::PodRequest& request,
                                     const std::vector<std::string_view>& names,
                                     const Asker& asker) {
  if (!Restricts(request)) return {};
  std::vector<const NodeRec*> nodes;
  nodes.reserve(names.size());
  for (std::string_view name : names)
    if (const int32_t id = node_index_.Find(name); id != NameIndex::kNone)
      nodes.push_back(by_id_[static_cast<size_t>(id)]);
  return Mask(request, nodes, asker);
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
  if (lifted && Restricts(request)) {  // a hold lifted on an excluded GPU stays shut
    std::vector<char> excluded;
    ExcludedSlots(n, request, &excluded, false, asker);
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
      std::none_of(keys.begin(), keys.end(), [](const ms::SlotKey& k) { return !k.plain(); }))
    return {};
  std::optional<std::string> why = ms::FreshConflict(keys, n.pending_keys, options_.unit);
  if (!why) return {};
  return Verdict(NodeVerdict::Kind::kFailed, reasons::kPendingSlotConflict, *why);
}

}  // namespace gpushare::scheduler
