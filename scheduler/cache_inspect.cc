// GpuCache: introspection. See cache_internal.h.
#include "core/object_key.h"
#include "scheduler/cache_internal.h"

namespace gpushare::scheduler {

using logfmt::Value;
using namespace cache_internal;

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
    s.core = n.CoreOn(g.index);
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
                      c == n->clients.end() ? 0 : c->second, n->has_inventory && n->Usable(g),
                      n->CoreOn(g.index)});
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
    o.core = n.CoreOn(g.index);
    o.usable = n.has_inventory && n.Usable(g);
  }
  std::vector<const PodRec*> pods;
  for (const auto& [uid, p] : n.pods)
    if (p->counted) pods.push_back(p);
  std::sort(pods.begin(), pods.end(),
            [](const PodRec* a, const PodRec* b) { return a->key < b->key; });
  for (const PodRec* p : pods) {
    const ObjectKey key = ObjectKey::Of(p->key);
    InspectPod base;
    base.namespace_ = key.namespace_;
    base.name = key.name;
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
