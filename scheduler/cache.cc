// GpuCache: decisions. See cache_internal.h.
#include "scheduler/cache_internal.h"

namespace gpushare::scheduler {

using logfmt::Value;
using namespace cache_internal;

namespace cache_internal {

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
    t.core += sign * u.core;
    if (t.units == 0 && t.clients == 0 && t.core == 0) total.erase(g);
  }
}

NodeVerdict Verdict(NodeVerdict::Kind kind, std::string_view code, std::string reason) {
  NodeVerdict v;
  v.kind = kind;
  v.code = code;
  v.reason = std::move(reason);
  return v;
}

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

}  // namespace cache_internal

namespace {

std::string_view StateName(int s) {
  static const char* names[] = {"reserved", "bound", "assumed", "confirmed", "expired"};
  return names[s];
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
  Masked masked = MaskNamed(request, names, asker);
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
        z.odd =
            std::any_of(keys.begin(), keys.end(), [](const ms::SlotKey& k) { return !k.plain(); });
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
  Masked masked = MaskNamed(request, names);
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
                                      const std::string& node, int64_t now_ns) {
  MutexLock l(&mu_);
  Result<Reservation> r = ReserveLocked(pod, asked, node, now_ns);
  // A refusal without a code of its own conflicts with what was booked since the filter.
  if (!r.ok() && r.status().reason().empty()) return r.status().WithReason(reasons::kBindConflict);
  return r;
}

Result<Reservation> GpuCache::ReserveLocked(const kube::Pod& pod, const ms::PodRequest& asked,
                                            const std::string& node, int64_t now_ns) {
  if (!synced_)
    return Status::Unavailable("cache not synced").WithReason(reasons::kSchedulerNotReady);
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
    return Status::FailedPrecondition("node " + node + ": " +
                                      (found == nullptr
                                           ? std::string("not in gpushare-scheduler's cache")
                                           : found->problem))
        .WithReason(found == nullptr ? reasons::kNodeUnknown : found->problem_code);
  }
  NodeRec& n = *found;
  Result<ms::PodRequest> on_node = OnNode(n, asked);
  if (!on_node.ok()) {
    return Status::FailedPrecondition("node " + node + ": " + on_node.status().message())
        .WithReason(reasons::kNoSharedGpu);
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
    return v.kind == NodeVerdict::Kind::kFailed
               ? Status::ResourceExhausted("node " + node + ": " + v.reason)
               : Status::FailedPrecondition("node " + node + ": " + v.reason).WithReason(v.code);
  }
  GPUSHARE_ASSIGN_OR_RETURN(const std::vector<int> gpus, Choose(n, request, shape));
  return Book(pod, request, n, gpus, now_ns);
}

Result<std::vector<int>> GpuCache::Choose(const NodeRec& n, const ms::PodRequest& request,
                                          pl::ShapeId shape) {
  Masked masked = Mask(request, {&n});
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
    const int64_t core = n.core.count(g) ? n.core.at(g) : 0;
    if (gpu == nullptr || used + u.units > gpu->units * ms::kMilliPerGpu ||
        clients + u.clients > n.inv.max_clients_per_gpu || core + u.core > ms::kMaxCorePercent)
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

}  // namespace gpushare::scheduler
