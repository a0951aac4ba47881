// See memshare_model.h.
#include "core/memshare_model.h"

#include <algorithm>
#include <set>

#include "core/memshare_node.h"

namespace gpushare::memshare::model {
namespace {

// The grace after which an allocation a List does not show is taken as failed: in the model a
// List shows every allocation made before it that is still held, so none is needed.
constexpr int64_t kListGrace = 0;

std::string GpuUuidOf(int g) {
  return "GPU-model-" + std::to_string(g);
}

}  // namespace

std::string Event::Text() const {
  static const char* names[] = {"reserve",
                                "annotate",
                                "bind",
                                "scheduler_sees",
                                "scheduler_restart",
                                "scheduler_moves_plan",
                                "admit",
                                "delete",
                                "agent_sees",
                                "agent_list",
                                "agent_confirm",
                                "agent_restart"};
  std::string out = names[static_cast<int>(kind)];
  if (pod >= 0) out += " p" + std::to_string(pod);
  if (!demand_gpus.empty()) {
    out += " gpus";
    for (int g : demand_gpus) out += " " + std::to_string(g);
  }
  return out;
}

std::shared_ptr<const Model::Node> Model::MakeNode(Config config) {
  auto n = std::make_shared<Model::Node>();
  n->config = std::move(config);
  n->resource.name = std::string(kResourceName);
  n->resource.unit_mib = 1024;
  for (size_t g = 0; g < n->config.gpu_units.size(); ++g) {
    Gpu gpu;
    gpu.index = static_cast<int>(g);
    gpu.uuid = GpuUuidOf(gpu.index);
    gpu.memory_mib = static_cast<uint64_t>(n->config.gpu_units[g]) * 1024;
    n->inventory.gpus.push_back(gpu);
    for (int64_t j = 0; j < n->config.gpu_units[g]; ++j) {
      PlannedDevice d;
      d.id = UnitDeviceId(gpu.uuid, j);
      d.gpu_index = gpu.index;
      d.gpu_uuid = gpu.uuid;
      d.replica = static_cast<int>(j);
      d.memory_limit_mib = 1024;
      n->resource.devices.push_back(d);
      n->unit_gpu.push_back(gpu.index);
    }
  }
  return n;
}

Model::Model(Config config)
    : node_(MakeNode(std::move(config))),
      config_(node_->config),
      inventory_(node_->inventory),
      resource_(node_->resource),
      unit_gpu_(node_->unit_gpu),
      unit_owner_(unit_gpu_.size(), -1) {
  for (const PodShape& s : config_.pods) {
    Pod p;
    for (size_t i = 0; i < s.init.size(); ++i)
      p.request.init.push_back({"i" + std::to_string(i), s.init[i]});
    for (size_t i = 0; i < s.app.size(); ++i) {
      p.request.app.push_back({"a" + std::to_string(i), s.app[i]});
      if (i < s.core.size()) p.request.app.back().core = s.core[i];
    }
    p.sched = {true, p.api};  // the informers list every pod at the start
    p.agent = {true, p.api};
    pods_.push_back(std::move(p));
  }
}

Model::Model(const Model& o)
    : node_(o.node_),
      config_(node_->config),
      inventory_(node_->inventory),
      resource_(node_->resource),
      unit_gpu_(node_->unit_gpu),
      unit_owner_(o.unit_owner_),
      pods_(o.pods_),
      guards_(o.guards_),
      holdings_(o.holdings_),
      clock_(o.clock_),
      reserves_(o.reserves_),
      kubelet_changes_(o.kubelet_changes_),
      listed_changes_(o.listed_changes_),
      scheduler_restarts_(o.scheduler_restarts_),
      agent_restarts_(o.agent_restarts_),
      deletions_(o.deletions_) {}

std::string Model::UnitId(int unit) const {
  return resource_.devices[static_cast<size_t>(unit)].id;
}
int Model::GpuOfUnit(int unit) const {
  return unit_gpu_[static_cast<size_t>(unit)];
}

// Informers hand over what matters of a pod: gone, bound with its annotations, or not bound
// (whose annotations neither binary reads).
bool Model::Same(const View& v, const Api& a) {
  if (!v.seen) return false;
  if (v.pod.exists != a.exists) return false;
  if (!a.exists) return true;
  if (v.pod.bound != a.bound) return false;
  return !a.bound || v.pod.annotations == a.annotations;
}

// --- the scheduler -----------------------------------------------------------------------------

Model::Count Model::SchedulerCount() const {
  Count count;
  std::map<SlotKey, int>* pending_keys = &count.pending_keys;
  std::map<int, GpuUse> plan, current;
  auto add = [](std::map<int, GpuUse>& total, const std::map<int, GpuUse>& use) {
    for (const auto& [g, u] : use) {
      total[g].units += u.units;
      total[g].clients += u.clients;
      total[g].core += u.core;
    }
  };
  for (const Pod& p : pods_) {
    const bool seen_bound = p.sched.seen && p.sched.pod.exists && p.sched.pod.bound;
    PodAssignment a;
    if (seen_bound) a = ResolveAssignment(p.sched.pod.annotations, p.request);
    bool counted_pending = false;
    if (seen_bound && a.state != AssignmentState::kNone) {
      add(current, GpuUsage(p.request, a.gpus));
      add(plan, GpuUsage(p.request, a.planned));
      counted_pending = a.state != AssignmentState::kConfirmed;
    } else if (p.bind.stage != Stage::kNone && !(p.sched.seen && !p.sched.pod.exists)) {
      const std::map<int, GpuUse> use =
          GpuUsage(p.request, AssignContainers(p.request, p.bind.demand_gpus));
      add(current, use);
      add(plan, use);
      counted_pending = true;
    }
    if (counted_pending) {
      for (const SlotKey& k : SlotKeys(p.request)) ++(*pending_keys)[k];
    }
  }
  for (const Guard& g : guards_) {
    if (g.whole_node) count.held_back = true;
    add(plan, g.hold);
    add(current, g.hold);
  }
  std::map<int, int64_t> capacity;
  for (size_t g = 0; g < config_.gpu_units.size(); ++g)
    capacity[static_cast<int>(g)] = config_.gpu_units[g];
  count.used = config_.count_current_only ? current : EffectiveUsage(plan, current, capacity);
  return count;
}

bool Model::PendingForScheduler(const Pod& p) const {
  if (p.sched.seen && !p.sched.pod.exists) return false;
  if (p.sched.seen && p.sched.pod.bound) {
    const PodAssignment a = ResolveAssignment(p.sched.pod.annotations, p.request);
    if (a.state != AssignmentState::kNone) return a.state != AssignmentState::kConfirmed;
  }
  return p.bind.stage != Stage::kNone;
}

std::set<int> Model::PendingPods(int except) const {
  std::set<int> out;
  for (size_t i = 0; i < pods_.size(); ++i)
    if (static_cast<int>(i) != except && PendingForScheduler(pods_[i]))
      out.insert(static_cast<int>(i));
  return out;
}

std::map<std::string, ContainerGpus> Model::SchedulerPlanMoves() const {
  std::vector<CountedPod> counted;
  for (size_t i = 0; i < pods_.size(); ++i) {
    const Pod& p = pods_[i];
    if (p.sched.seen && !p.sched.pod.exists) continue;
    PodAssignment a;
    if (p.sched.seen && p.sched.pod.bound)
      a = ResolveAssignment(p.sched.pod.annotations, p.request);
    if (a.state != AssignmentState::kNone) {
      counted.push_back({PodKey(static_cast<int>(i)), p.request, a.planned, a.gpus,
                         a.state == AssignmentState::kConfirmed});
    } else if (p.bind.stage != Stage::kNone) {
      const ContainerGpus g = AssignContainers(p.request, p.bind.demand_gpus);
      counted.push_back({PodKey(static_cast<int>(i)), p.request, g, g, false});
    }
  }
  return SettledPlanMoves(counted, guards_.empty());
}

void Model::PruneGuards() {
  for (Guard& g : guards_) {
    for (auto it = g.waiting.begin(); it != g.waiting.end();)
      it = PendingForScheduler(pods_[static_cast<size_t>(*it)]) ? std::next(it)
                                                                : g.waiting.erase(it);
  }
  guards_.erase(std::remove_if(guards_.begin(), guards_.end(),
                               [](const Guard& g) { return g.waiting.empty(); }),
                guards_.end());
}

bool Model::Fits(int pod, const std::vector<int>& demand_gpus, const Count& count) const {
  const Pod& p = pods_[static_cast<size_t>(pod)];
  if (count.held_back) return false;
  std::vector<SlotKey> keys = SlotKeys(p.request);
  std::map<SlotKey, int> pending = count.pending_keys;
  if (config_.core_blind_conflicts) {
    for (SlotKey& k : keys) k.core = 0;
    pending.clear();
    for (const auto& [key, n] : count.pending_keys) {
      SlotKey k = key;
      k.core = 0;
      pending[k] += n;
    }
  }
  if (FreshConflict(keys, pending, MemoryUnit::kGiB)) return false;
  for (const auto& [g, u] : GpuUsage(p.request, AssignContainers(p.request, demand_gpus))) {
    const int64_t have = count.used.count(g) ? count.used.at(g).units : 0;
    if (have + u.units > config_.gpu_units[static_cast<size_t>(g)]) return false;
    const int64_t core = count.used.count(g) ? count.used.at(g).core : 0;
    if (core + u.core > kMaxCorePercent) return false;
  }
  return true;
}

void Model::Assignments(int pod, const Count& count, std::vector<int>* gpus,
                        std::vector<Event>* out) const {
  const size_t demands = pods_[static_cast<size_t>(pod)].request.Demands().size();
  if (gpus->size() == demands) {
    if (Fits(pod, *gpus, count)) out->push_back({EventKind::kReserve, pod, *gpus});
    return;
  }
  for (size_t g = 0; g < config_.gpu_units.size(); ++g) {
    gpus->push_back(static_cast<int>(g));
    Assignments(pod, count, gpus, out);
    gpus->pop_back();
  }
}

// --- the node agent ----------------------------------------------------------------------------

SlotLedger Model::AgentLedger(bool fresh_from_api, const std::set<std::string>* free) const {
  std::vector<PlannedPod> plans;
  std::set<std::string> foreign;
  AgentPlans(fresh_from_api, &plans, &foreign);
  return holdings_.Ledger(plans, foreign, inventory_, free);
}

void Model::AgentPlans(bool fresh_from_api, std::vector<PlannedPod>* plans,
                       std::set<std::string>* foreign) const {
  for (size_t i = 0; i < pods_.size(); ++i) {
    const Pod& p = pods_[i];
    const Api* seen = fresh_from_api ? &p.api : (p.agent.seen ? &p.agent.pod : nullptr);
    if (seen == nullptr || !seen->exists || !seen->bound) continue;
    std::optional<PlannedPod> plan = PlanOf(PodKey(static_cast<int>(i)), p.request,
                                            ResolveAssignment(seen->annotations, p.request));
    if (plan) {
      plans->push_back(std::move(*plan));
    } else {
      foreign->insert(PodKey(static_cast<int>(i)));
    }
  }
}

std::map<std::string, std::vector<ObservedContainer>> Model::PodResources() const {
  std::map<std::string, std::vector<ObservedContainer>> out;
  for (size_t i = 0; i < pods_.size(); ++i) {
    const Pod& p = pods_[i];
    if (!p.kubelet.admitted) continue;
    std::vector<ObservedContainer> cs;
    for (const ContainerShare& c : p.request.app) {  // kubelet lists app containers only
      auto it = p.kubelet.units.find(c.name);
      if (it == p.kubelet.units.end() || it->second.empty()) continue;
      ObservedContainer oc{c.name, {}};
      for (int u : it->second) oc.unit_ids.push_back(UnitId(u));
      std::sort(oc.unit_ids.begin(), oc.unit_ids.end());
      cs.push_back(std::move(oc));
    }
    if (!cs.empty()) out[PodKey(static_cast<int>(i))] = std::move(cs);
  }
  return out;
}

// Kubelet admits the pod: its containers in order (init first), each as devicesToAllocate does
// it: units reused from init containers first, then GetPreferredAllocation over what is free,
// then Allocate.
std::optional<std::string> Model::Admit(int pod) {
  Pod& p = pods_[static_cast<size_t>(pod)];
  std::vector<std::pair<const ContainerShare*, bool>> order;  // (container, is an init container)
  for (const ContainerShare& c : p.request.init) order.push_back({&c, true});
  for (const ContainerShare& c : p.request.app) order.push_back({&c, false});
  std::vector<int> reuse;  // units of init containers not yet taken by an app container
  for (const auto& [c, init] : order) {
    std::vector<int> got;
    for (int u : reuse) {
      if (static_cast<int64_t>(got.size()) == c->units) break;
      got.push_back(u);
    }
    if (static_cast<int64_t>(got.size()) < c->units) {
      std::vector<std::string> available, must;
      for (int u : got) must.push_back(UnitId(u));
      available = must;
      std::vector<int> free;
      for (size_t u = 0; u < unit_owner_.size(); ++u) {
        if (unit_owner_[u] < 0 &&
            std::find(got.begin(), got.end(), static_cast<int>(u)) == got.end()) {
          free.push_back(static_cast<int>(u));
          available.push_back(UnitId(static_cast<int>(u)));
        }
      }
      const int64_t needed = c->units - static_cast<int64_t>(got.size());
      if (static_cast<int64_t>(free.size()) < needed) {
        return "kubelet: " + PodKey(pod) + "/" + c->name + " needs " + std::to_string(needed) +
               " units, " + std::to_string(free.size()) + " free on the node";
      }
      // GetPreferredAllocation: the agent lists the node's pods from the API for a first request.
      const UnitQuery q{available, must, c->units};
      std::set<std::string> free_ids;
      for (int u : free) free_ids.insert(UnitId(u));
      Result<UnitChoice> choice =
          ChooseUnits(resource_, q, AgentLedger(/*fresh_from_api=*/must.empty(), &free_ids));
      if (!choice.ok()) return "agent: GetPreferredAllocation failed: " + choice.status().message();
      holdings_.Advised(choice->gpu, choice->key, c->units, !must.empty());
      for (const std::string& id : choice->ids) {
        if (static_cast<int64_t>(got.size()) == c->units) break;
        for (int u : free) {
          if (UnitId(u) == id && std::find(got.begin(), got.end(), u) == got.end())
            got.push_back(u);
        }
      }
      for (int u : free) {  // kubelet fills what the advice left out
        if (static_cast<int64_t>(got.size()) == c->units) break;
        if (std::find(got.begin(), got.end(), u) == got.end()) got.push_back(u);
      }
    }
    // Allocate: the agent refuses units of several GPUs.
    std::vector<const PlannedDevice*> devices;
    std::vector<std::string> ids;
    for (int u : got) {
      devices.push_back(&resource_.devices[static_cast<size_t>(u)]);
      ids.push_back(UnitId(u));
    }
    Result<UnitAllocation> a = CheckUnits(resource_, devices);
    if (!a.ok())
      return "Allocate refused " + PodKey(pod) + "/" + c->name + ": " + a.status().message();
    const std::optional<SlotKey> advised = holdings_.Allocated(ids, a->gpu, clock_);
    for (int u : got) unit_owner_[static_cast<size_t>(u)] = pod;
    p.kubelet.units[c->name] = got;
    if (!init) {
      // The compute share Allocate gives (node/memshare_service.cc): the advised slot's, else
      // the pending slots' of that first request.
      const int64_t given =
          advised ? advised->core : PendingCore(AgentLedger(/*fresh_from_api=*/true), c->units);
      if (given != c->core)
        return "Allocate gave " + PodKey(pod) + "/" + c->name + " " + std::to_string(given) +
               "% compute, it asked " + std::to_string(c->core) + "%";
      if (std::optional<std::string> over = ComputeOverBooked()) return over;
    }
    if (init) {
      for (int u : got)
        if (std::find(reuse.begin(), reuse.end(), u) == reuse.end()) reuse.push_back(u);
    } else {
      reuse.erase(
          std::remove_if(reuse.begin(), reuse.end(),
                         [&](int u) { return std::find(got.begin(), got.end(), u) != got.end(); }),
          reuse.end());
    }
  }
  p.kubelet.admitted = true;
  ++kubelet_changes_;
  return std::nullopt;
}

std::optional<std::string> Model::ComputeOverBooked() const {
  std::map<int, int64_t> core;  // GPU -> compute shares of the app containers kubelet admitted
  for (const Pod& p : pods_)
    for (const ContainerShare& c : p.request.app) {
      auto it = p.kubelet.units.find(c.name);
      if (c.core == 0 || it == p.kubelet.units.end() || it->second.empty()) continue;
      core[GpuOfUnit(it->second.front())] += c.core;
    }
  for (const auto& [g, pct] : core)
    if (pct > kMaxCorePercent)
      return "kubelet holds " + std::to_string(pct) + "% compute on GPU " + std::to_string(g);
  return std::nullopt;
}

std::optional<std::map<std::string, std::string>> Model::ConfirmChanges(int pod) const {
  const Pod& p = pods_[static_cast<size_t>(pod)];
  if (!p.agent.seen || !p.agent.pod.exists || !p.api.exists) return std::nullopt;
  auto it = holdings_.observed().find(PodKey(pod));
  if (it == holdings_.observed().end()) return std::nullopt;
  ActualPlacement actual = ActualGpus(p.request, it->second, inventory_);
  if (!actual.complete) return std::nullopt;
  int64_t dev = -1;
  const std::vector<std::string> owners = p.request.DemandContainers();
  if (!owners.empty() && actual.gpus.count(owners[0]))
    dev = config_.gpu_units[static_cast<size_t>(actual.gpus.at(owners[0]))];
  std::map<std::string, std::string> changes =
      ReconcileChanges(p.agent.pod.annotations, p.request, actual.gpus, dev);
  if (changes.empty()) return std::nullopt;
  // A patch that would change nothing in the API is not worth an event.
  bool differs = false;
  for (const auto& [k, v] : changes) {
    auto a = p.api.annotations.find(k);
    differs = differs || a == p.api.annotations.end() || a->second != v;
  }
  if (!differs) return std::nullopt;
  return changes;
}

// --- events ------------------------------------------------------------------------------------

std::vector<Event> Model::Enabled() const {
  std::vector<Event> out;
  const Count count = SchedulerCount();
  const std::map<std::string, ContainerGpus> moves = SchedulerPlanMoves();
  for (size_t i = 0; i < pods_.size(); ++i) {
    const int pod = static_cast<int>(i);
    const Pod& p = pods_[i];
    if (p.api.exists && !p.api.bound && p.bind.stage == Stage::kNone) {
      std::vector<int> gpus;
      Assignments(pod, count, &gpus, &out);
    }
    if (p.api.exists && p.bind.stage == Stage::kReserved)
      out.push_back({EventKind::kAnnotate, pod, {}});
    if (p.api.exists && p.bind.stage == Stage::kAnnotated)
      out.push_back({EventKind::kBind, pod, {}});
    if (!Same(p.sched, p.api)) out.push_back({EventKind::kSchedulerSees, pod, {}});
    if (p.api.exists && p.api.bound && !p.kubelet.admitted)
      out.push_back({EventKind::kAdmit, pod, {}});
    if (p.api.exists && p.api.bound && deletions_ < config_.deletions)
      out.push_back({EventKind::kDelete, pod, {}});
    if (!Same(p.agent, p.api)) out.push_back({EventKind::kAgentSees, pod, {}});
    if (p.kubelet.admitted && ConfirmChanges(pod))
      out.push_back({EventKind::kAgentConfirm, pod, {}});
    if (moves.count(PodKey(pod))) out.push_back({EventKind::kSchedulerMovesPlan, pod, {}});
  }
  if (kubelet_changes_ != listed_changes_ || !holdings_.listed())
    out.push_back({EventKind::kAgentList, -1, {}});
  if (scheduler_restarts_ < config_.scheduler_restarts)
    out.push_back({EventKind::kSchedulerRestart, -1, {}});
  if (agent_restarts_ < config_.agent_restarts) out.push_back({EventKind::kAgentRestart, -1, {}});
  return out;
}

std::optional<std::string> Model::Apply(const Event& e) {
  std::optional<std::string> violation = Step(e);
  PruneGuards();
  return violation;
}

std::optional<std::string> Model::Step(const Event& e) {
  ++clock_;
  Pod* p = e.pod >= 0 ? &pods_[static_cast<size_t>(e.pod)] : nullptr;
  switch (e.kind) {
    case EventKind::kReserve:
      p->bind = {Stage::kReserved, e.demand_gpus, ++reserves_};
      break;
    case EventKind::kAnnotate: {
      const int64_t dev = config_.gpu_units[static_cast<size_t>(p->bind.demand_gpus.front())];
      for (const auto& [k, v] :
           BindAnnotations(p->request, p->bind.demand_gpus, dev, p->bind.assume))
        p->api.annotations[k] = v;
      p->bind.stage = Stage::kAnnotated;
      break;
    }
    case EventKind::kBind:
      p->api.bound = true;
      p->bind.stage = Stage::kBound;
      break;
    case EventKind::kSchedulerSees: {
      // A pod released without being confirmed where it was planned: another pod may hold its
      // planned slot without the API saying so yet. Its plan stays counted until the pods
      // pending now are confirmed or gone (memshare::ReleaseNeedsGuard).
      if (!p->api.exists && p->sched.pod.exists) {
        PodAssignment a;
        if (p->sched.pod.bound) a = ResolveAssignment(p->sched.pod.annotations, p->request);
        if (a.state == AssignmentState::kNone && p->bind.stage != Stage::kNone) {  // its own bind
          a.state = AssignmentState::kAssumed;
          a.gpus = a.planned = AssignContainers(p->request, p->bind.demand_gpus);
        }
        if (ReleaseNeedsGuard(a)) {
          Guard g{GpuUsage(p->request, a.planned), false, PendingPods(e.pod)};
          if (!g.waiting.empty()) guards_.push_back(std::move(g));
        }
      }
      p->sched = {true, p->api};
      // The cache's record of the pod now comes from the informer; a bind whose pod is gone
      // is given back.
      if ((p->api.bound || !p->api.exists) && p->bind.stage == Stage::kBound) p->bind = {};
      if (!p->api.exists) p->bind = {};
      break;
    }
    case EventKind::kSchedulerRestart: {
      ++scheduler_restarts_;
      guards_.clear();
      for (Pod& q : pods_) {
        q.bind = {};
        q.sched = {true, q.api};
      }
      // What it knew of released pods is gone: no new shares on the node until the pods
      // pending now are confirmed or gone.
      Guard g{{}, true, PendingPods(-1)};
      if (!g.waiting.empty()) guards_.push_back(std::move(g));
      break;
    }
    case EventKind::kAdmit:
      return Admit(e.pod);
    case EventKind::kDelete:
      ++deletions_;
      p->api.exists = false;
      for (int& owner : unit_owner_)
        if (owner == e.pod) owner = -1;
      if (p->kubelet.admitted) ++kubelet_changes_;
      p->kubelet = {};
      p->kubelet.admitted = true;  // never again
      p->kubelet.units.clear();
      break;
    case EventKind::kAgentSees:
      p->agent = {true, p->api};
      break;
    case EventKind::kAgentList:
      holdings_.Listed(PodResources(), clock_, kListGrace);
      listed_changes_ = kubelet_changes_;
      break;
    case EventKind::kAgentConfirm: {
      std::optional<std::map<std::string, std::string>> changes = ConfirmChanges(e.pod);
      if (!changes) break;
      for (const auto& [k, v] : *changes) {
        p->api.annotations[k] = v;
      }
      break;
    }
    case EventKind::kSchedulerMovesPlan: {
      const std::map<std::string, ContainerGpus> moves = SchedulerPlanMoves();
      auto m = moves.find(PodKey(e.pod));
      if (m == moves.end()) break;
      p->api.annotations[std::string(kAssumedAnnotation)] = EncodeContainerGpus(m->second);
      p->sched = {true, p->api};  // the patch's answer
      break;
    }
    case EventKind::kAgentRestart:
      ++agent_restarts_;
      holdings_ = KubeletHoldings();
      holdings_.Listed(PodResources(), clock_,
                       kListGrace);  // the agent answers after its first List
      listed_changes_ = kubelet_changes_;
      for (Pod& q : pods_) q.agent = {true, q.api};
      break;
  }
  return std::nullopt;
}

std::string Model::Key() const {
  std::string out;
  out.reserve(1024);
  // Annotations by value only: every writer sets the same keys, in the map's order.
  auto values = [&](const std::map<std::string, std::string>& annotations) {
    std::string s;
    for (const auto& [k, v] : annotations) s += std::to_string(k.size()) + v + ";";
    return s;
  };
  auto api = [&](const Api& a) {
    if (!a.exists) return std::string("gone");
    if (!a.bound)
      return std::string(
          "unbound");  // what informers make of it: annotations of an unbound pod count nowhere
    return "{" + values(a.annotations) + "}";
  };
  for (const Pod& p : pods_) {
    out += "[" + std::string(p.api.exists ? "E" : "-") + (p.api.bound ? "B" : "-") +
           values(p.api.annotations);
    out += "|" + (p.sched.seen ? api(p.sched.pod) : "?") + "|" +
           (p.agent.seen ? api(p.agent.pod) : "?");
    out += "b" + std::to_string(static_cast<int>(p.bind.stage));
    for (int g : p.bind.demand_gpus) out += "," + std::to_string(g);
    out += "@" + std::to_string(p.bind.assume) + (p.kubelet.admitted ? "A" : "-");
    for (const auto& [c, units] : p.kubelet.units) {
      out += c + ":";
      for (int u : units) out += std::to_string(u) + ",";
    }
    out += "]";
  }
  for (const Guard& g : guards_) {
    out += "G" + std::string(g.whole_node ? "*" : "");
    for (const auto& [gpu, u] : g.hold)
      out += std::to_string(gpu) + ":" + std::to_string(u.units) + ",";
    for (int w : g.waiting) out += "w" + std::to_string(w);
  }
  out += holdings_.Fingerprint() + "|" + std::to_string(kubelet_changes_ == listed_changes_) + "|" +
         std::to_string(scheduler_restarts_) + std::to_string(agent_restarts_) +
         std::to_string(deletions_);
  return out;
}

int Model::admitted() const {
  int n = 0;
  for (const Pod& p : pods_) n += p.kubelet.admitted && p.api.exists ? 1 : 0;
  return n;
}

int Model::bound() const {
  int n = 0;
  for (const Pod& p : pods_) n += p.api.bound && p.api.exists ? 1 : 0;
  return n;
}

std::vector<int64_t> Model::HeldUnits() const {
  std::vector<int64_t> out(config_.gpu_units.size(), 0);
  for (size_t u = 0; u < unit_owner_.size(); ++u)
    if (unit_owner_[u] >= 0) ++out[static_cast<size_t>(unit_gpu_[u])];
  return out;
}

}  // namespace gpushare::memshare::model
