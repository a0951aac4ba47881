// GpuCache: the records of nodes and pods. See cache_internal.h.
#include "scheduler/cache_internal.h"

namespace gpushare::scheduler {

using logfmt::Value;
using namespace cache_internal;

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
      if (!k.plain()) n.odd_pending += sign;
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
  n.core.clear();
  for (const auto& [g, u] : ms::EffectiveUsage(n.plan, n.current, capacity)) {
    if (u.units != 0) n.used[g] = u.units;
    if (u.clients != 0) n.clients[g] = u.clients;
    if (u.core != 0) n.core[g] = u.core;
  }
  for (const auto& [g, u] : n.nominated) {  // preemption's holds
    if (u.units != 0) n.used[g] += u.units;
    if (u.clients != 0) n.clients[g] += u.clients;
    if (u.core != 0) n.core[g] += u.core;
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

}  // namespace gpushare::scheduler
