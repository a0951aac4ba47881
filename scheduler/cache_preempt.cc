// GpuCache: nominations and preemption views. See cache_internal.h.
#include "scheduler/cache_internal.h"

namespace gpushare::scheduler {

using logfmt::Value;
using namespace cache_internal;

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
    if (const size_t count = ExcludedSlots(*n, request, &excluded, false, asker);
        count > 0 && count == excluded.size()) {
      // Evictions free memory, not compute: a GPU without the pod's compute share left stays
      // out whoever is evicted (never an eviction for nothing).
      v.problem = (ExcludedSlots(*n, request, nullptr, true) == count
                       ? "the pod's GPU choice excludes every GPU here: "
                       : "no GPU here has the pod's compute share left: ") +
                  ExclusionList(n->slots, Exclusions(*n, request, asker));
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
    // GPUs the pod may not use (its choice, or without its compute share left) stay full whoever
    // is evicted from them.
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

}  // namespace gpushare::scheduler
