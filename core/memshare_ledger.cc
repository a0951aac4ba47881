// See memshare_ledger.h.
#include "core/memshare_ledger.h"

#include <algorithm>
#include <tuple>

namespace gpushare::memshare {

// --- slots -------------------------------------------------------------------------------------

std::vector<SlotKey> SlotKeys(const PodRequest& request) {
  const std::vector<int64_t> demands = request.Demands();
  std::vector<SlotKey> out;
  out.reserve(demands.size());
  for (size_t i = 0; i < demands.size(); ++i) {
    int64_t fresh = demands[i];
    if (i == 0)
      fresh = request.init.empty() ? request.app.front().units : request.init.front().units;
    const int64_t core = i < request.app.size() ? request.app[i].core : 0;
    out.push_back({fresh, demands[i], core});
  }
  return out;
}

std::string SlotKeyText(const SlotKey& key, MemoryUnit unit) {
  const std::string u = " " + std::string(MemoryUnitName(unit));
  const std::string core = key.core > 0 ? ", compute " + std::to_string(key.core) + "/100" : "";
  if (!key.odd()) return std::to_string(key.demand) + u + core;
  return std::to_string(key.fresh) + u + " first, " + std::to_string(key.demand) + u + " in all" +
         core;
}

// --- the scheduler's count ---------------------------------------------------------------------

std::map<int, GpuUse> EffectiveUsage(const std::map<int, GpuUse>& plan,
                                     const std::map<int, GpuUse>& current,
                                     const std::map<int, int64_t>& capacity) {
  std::map<int, GpuUse> out = current;
  int64_t plan_total = 0, current_total = 0;
  for (const auto& [g, u] : plan) plan_total += u.units;
  for (const auto& [g, u] : current) current_total += u.units;
  for (const auto& [g, u] : plan) {
    GpuUse& o = out[g];
    o.units = std::max(o.units, u.units);
    o.clients = std::max(o.clients, u.clients);
    o.core = std::max(o.core, u.core);
  }
  // Units the per-GPU view would lose: what either sum holds beyond what the GPUs, each capped
  // at its capacity, show.
  int64_t shown = 0;
  for (const auto& [g, u] : out) {
    auto c = capacity.find(g);
    shown += c == capacity.end() ? u.units : std::min(u.units, c->second);
  }
  int64_t missing = std::max({plan_total, current_total, int64_t{0}}) - shown;
  while (missing > 0) {
    int best = -1;
    int64_t best_free = 0;
    for (const auto& [g, cap] : capacity) {
      auto it = out.find(g);
      const int64_t free = cap - (it == out.end() ? 0 : it->second.units);
      if (free > best_free) {
        best = g;
        best_free = free;
      }
    }
    if (best < 0) break;  // every GPU is full: nothing more to hide
    const int64_t take = std::min(best_free, missing);
    out[best].units += take;
    missing -= take;
  }
  for (auto it = out.begin(); it != out.end();)
    it = it->second.units == 0 && it->second.clients == 0 && it->second.core == 0 ? out.erase(it)
                                                                                  : std::next(it);
  return out;
}

std::optional<std::string> FreshConflict(const std::vector<SlotKey>& pod,
                                         const std::map<SlotKey, int>& pending, MemoryUnit unit) {
  for (const SlotKey& k : pod) {
    // Keys with the same first request are adjacent in the map's order.
    for (auto it = pending.lower_bound({k.fresh, INT64_MIN, INT64_MIN});
         it != pending.end() && it->first.fresh == k.fresh; ++it) {
      if (it->second <= 0 || (it->first.demand == k.demand && it->first.core == k.core)) continue;
      return "a pod asking " + SlotKeyText(it->first, unit) +
             " is still being admitted here and this one asks " + SlotKeyText(k, unit) +
             ": kubelet's first requests of the two look the same to gpushare-node, so this " +
             "pod waits until the other is admitted";
    }
  }
  return std::nullopt;
}

bool ReleaseNeedsGuard(const PodAssignment& last_known) {
  if (last_known.state == AssignmentState::kNone) return false;
  return last_known.state != AssignmentState::kConfirmed || last_known.gpus != last_known.planned;
}

// --- the agent's ledger ------------------------------------------------------------------------

namespace {

int GpuOfUnits(const std::vector<std::string>& ids, const Inventory& inventory) {
  int gpu = -1;
  for (const std::string& id : ids) {
    Result<UnitId> u = ParseUnitDeviceId(id);
    const Gpu* g = u.ok() ? inventory.FindByUuid(u->gpu_uuid) : nullptr;
    if (g == nullptr || (gpu >= 0 && g->index != gpu)) return -1;
    gpu = g->index;
  }
  return gpu;
}

}  // namespace

std::vector<HeldSlot> HeldSlots(
    const std::vector<PlannedPod>& plans,
    const std::map<std::string, std::vector<ObservedContainer>>& observed,
    const std::set<std::string>& foreign, const Inventory& inventory) {
  std::map<std::string, const PlannedPod*> by_key;
  for (const PlannedPod& p : plans) by_key[p.key] = &p;
  std::vector<HeldSlot> out;
  for (const auto& [key, containers] : observed) {
    auto known = by_key.find(key);
    if (known == by_key.end()) {
      if (foreign.count(key)) continue;
      for (const ObservedContainer& c : containers) {
        const int gpu = GpuOfUnits(c.unit_ids, inventory);
        const auto n = static_cast<int64_t>(c.unit_ids.size());
        if (gpu >= 0 && n > 0) out.push_back({{n, n}, gpu, key, -1, c.unit_ids});
      }
      continue;
    }
    const PlannedPod& p = *known->second;
    const std::vector<SlotKey> keys = SlotKeys(p.request);
    const std::vector<std::string> owners = p.request.DemandContainers();
    for (size_t i = 0; i < owners.size() && i < keys.size(); ++i) {
      for (const ObservedContainer& c : containers) {
        if (c.name != owners[i] || c.unit_ids.empty()) continue;
        const int gpu = GpuOfUnits(c.unit_ids, inventory);
        if (gpu >= 0) out.push_back({keys[i], gpu, key, static_cast<int>(i), c.unit_ids});
      }
    }
  }
  return out;
}

int64_t SlotLedger::Open(const SlotKey& key, int gpu) const {
  auto it = open.find({key, gpu});
  return it == open.end() ? 0 : it->second;
}

int64_t SlotLedger::Vacated(const SlotKey& key, int gpu) const {
  int64_t planned_pending = 0;
  for (const PendingSlot& p : pending) planned_pending += p.key == key && p.gpu == gpu ? 1 : 0;
  return Open(key, gpu) - planned_pending;
}

int64_t SlotLedger::PromisedUnits(int gpu) const {
  int64_t units = 0;
  for (const auto& [kg, n] : open) {
    if (kg.second == gpu && n > 0) units += n * kg.first.demand;
  }
  return units;
}

SlotLedger BuildLedger(const std::vector<PlannedPod>& plans, const std::vector<HeldSlot>& held) {
  SlotLedger out;
  std::set<std::pair<std::string, int>> held_demands;
  for (const HeldSlot& h : held) {
    --out.open[{h.key, h.gpu}];
    if (!h.pod.empty() && h.demand >= 0) held_demands.insert({h.pod, h.demand});
  }
  for (const PlannedPod& p : plans) {
    const std::vector<SlotKey> keys = SlotKeys(p.request);
    const std::vector<std::string> owners = p.request.DemandContainers();
    for (size_t i = 0; i < keys.size() && i < owners.size(); ++i) {
      auto g = p.planned.find(owners[i]);
      if (g == p.planned.end()) continue;
      ++out.open[{keys[i], g->second}];
      if (!held_demands.count({p.key, static_cast<int>(i)}))
        out.pending.push_back({p.key, owners[i], keys[i], g->second, p.assume_time});
    }
  }
  std::stable_sort(out.pending.begin(), out.pending.end(),
                   [](const PendingSlot& a, const PendingSlot& b) {
                     return std::tie(a.assume_time, a.pod) < std::tie(b.assume_time, b.pod);
                   });
  for (auto it = out.open.begin(); it != out.open.end();)
    it = it->second == 0 ? out.open.erase(it) : std::next(it);
  return out;
}

std::map<std::string, ContainerGpus> SettledPlanMoves(const std::vector<CountedPod>& pods,
                                                      bool settled) {
  std::map<std::string, ContainerGpus> out;
  if (!settled) return out;
  struct Demand {
    const CountedPod* pod;
    size_t index;
    SlotKey key;
    int planned, current;
  };
  std::set<SlotKey> pending_keys;
  std::vector<Demand> demands;
  for (const CountedPod& p : pods) {
    const std::vector<SlotKey> keys = SlotKeys(p.request);
    const std::vector<std::string> owners = p.request.DemandContainers();
    for (size_t i = 0; i < keys.size() && i < owners.size(); ++i) {
      if (!p.confirmed) {
        pending_keys.insert(keys[i]);
        continue;
      }
      auto pl = p.planned.find(owners[i]);
      auto cu = p.current.find(owners[i]);
      if (pl == p.planned.end() || cu == p.current.end()) continue;
      demands.push_back({&p, i, keys[i], pl->second, cu->second});
    }
  }
  std::map<std::pair<SlotKey, int>, int64_t> open;  // planned minus held, confirmed demands only
  for (const Demand& d : demands) {
    ++open[{d.key, d.planned}];
    --open[{d.key, d.current}];
  }
  // Only moves into a GPU over-held now, and no more of them than it is over-held: then any of
  // them, made in any order, keeps every GPU's count at or above what it holds. A chain of swaps
  // unwinds over successive calls (a move can leave its planned GPU over-held in turn).
  const std::map<std::pair<SlotKey, int>, int64_t> before = open;
  for (Demand& d : demands) {
    if (pending_keys.count(d.key) || d.planned == d.current) continue;
    if (before.at({d.key, d.current}) >= 0 || open[{d.key, d.current}] >= 0) continue;
    ContainerGpus& plan = out.try_emplace(d.pod->key, d.pod->planned).first->second;
    plan[d.pod->request.DemandContainers()[d.index]] = d.current;
    if (d.index == 0)
      for (const ContainerShare& c : d.pod->request.init) plan[c.name] = d.current;
    ++open[{d.key, d.current}];
  }
  return out;
}

// --- allocations not yet listed ----------------------------------------------------------------

void RecentAllocations::Add(const std::vector<std::string>& ids, int gpu, const SlotKey& key,
                            int64_t now_ms, bool reuse) {
  auto overlaps = [&](const Entry& e) {
    return std::any_of(ids.begin(), ids.end(),
                       [&](const std::string& id) { return e.ids.count(id) > 0; });
  };
  if (reuse) {
    for (Entry& e : entries_) {
      if (!overlaps(e)) continue;
      e.ids.insert(ids.begin(), ids.end());
      e.at_ms = now_ms;
      return;
    }
  }
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), overlaps), entries_.end());
  entries_.push_back({std::set<std::string>(ids.begin(), ids.end()), gpu, key, now_ms});
}

void RecentAllocations::Observe(const std::set<std::string>& listed, int64_t list_started_ms,
                                int64_t grace_ms) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&](const Entry& e) {
                                  const bool shown = std::any_of(
                                      e.ids.begin(), e.ids.end(),
                                      [&](const std::string& id) { return listed.count(id) > 0; });
                                  return shown || e.at_ms + grace_ms < list_started_ms;
                                }),
                 entries_.end());
}

std::vector<HeldSlot> RecentAllocations::Held() const {
  std::vector<HeldSlot> out;
  for (const Entry& e : entries_)
    out.push_back({e.key, e.gpu, "", -1, {e.ids.begin(), e.ids.end()}});
  return out;
}

std::string RecentAllocations::Fingerprint() const {
  std::vector<std::string> parts;
  for (const Entry& e : entries_) {
    std::string p = std::to_string(e.gpu) + ":" + std::to_string(e.key.fresh) + "/" +
                    std::to_string(e.key.demand) + "c" + std::to_string(e.key.core) + "[";
    for (const std::string& id : e.ids) p += id + ",";
    parts.push_back(p + "]");
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const std::string& p : parts) out += p + ";";
  return out;
}

// --- the agent's account -----------------------------------------------------------------------

void KubeletHoldings::Listed(std::map<std::string, std::vector<ObservedContainer>> observed,
                             int64_t started_ms, int64_t grace_ms) {
  std::set<std::string> ids;
  for (const auto& [pod, containers] : observed)
    for (const ObservedContainer& c : containers) ids.insert(c.unit_ids.begin(), c.unit_ids.end());
  recent_.Observe(ids, started_ms, grace_ms);
  observed_ = std::move(observed);
  listed_ = true;
}

std::string KubeletHoldings::Fingerprint() const {
  std::string out = listed_ ? "L{" : "-{";
  for (const auto& [pod, containers] : observed_) {
    out += pod + "(";
    for (const ObservedContainer& c : containers) {
      out += c.name + ":";
      for (const std::string& id : c.unit_ids) out += id + ",";
    }
    out += ")";
  }
  out += "}R{" + recent_.Fingerprint() + "}A{" + std::to_string(advice_.given) +
         std::to_string(advice_.reuse) + std::to_string(advice_.gpu) + "/" +
         std::to_string(advice_.size);
  if (advice_.key)
    out += "/" + std::to_string(advice_.key->fresh) + "." + std::to_string(advice_.key->demand);
  return out + "}";
}

void KubeletHoldings::Advised(int gpu, std::optional<SlotKey> key, int64_t size, bool reuse) {
  advice_ = {true, gpu, key, size, reuse};
}

std::optional<SlotKey> KubeletHoldings::Allocated(const std::vector<std::string>& ids, int gpu,
                                                  int64_t now_ms) {
  const auto n = static_cast<int64_t>(ids.size());
  std::optional<SlotKey> advised;
  if (advice_.key && advice_.gpu == gpu && advice_.size == n) advised = *advice_.key;
  const bool reuse = !advice_.given || advice_.reuse;
  advice_ = {};
  recent_.Add(ids, gpu, advised.value_or(SlotKey{n, n}), now_ms, reuse);
  return advised;
}

std::vector<HeldSlot> KubeletHoldings::Held(const std::vector<PlannedPod>& plans,
                                            const std::set<std::string>& foreign,
                                            const Inventory& inventory,
                                            const std::set<std::string>* free) const {
  std::vector<HeldSlot> held = HeldSlots(plans, observed_, foreign, inventory);
  // A unit has one holder: a listed container whose units kubelet has allocated again since the
  // List (its pod is gone, and the next admission got them) holds nothing any more. Counting both
  // closed the slot the new holder came for, and steered a pod away from its own plan.
  const std::vector<HeldSlot> recent = recent_.Held();
  std::set<std::string> reallocated;
  for (const HeldSlot& h : recent) reallocated.insert(h.ids.begin(), h.ids.end());
  held.erase(std::remove_if(held.begin(), held.end(),
                            [&](const HeldSlot& h) {
                              return std::any_of(
                                  h.ids.begin(), h.ids.end(),
                                  [&](const std::string& id) { return reallocated.count(id) > 0; });
                            }),
             held.end());
  held.insert(held.end(), recent.begin(), recent.end());
  if (free != nullptr) {
    held.erase(std::remove_if(held.begin(), held.end(),
                              [&](const HeldSlot& h) {
                                return std::any_of(
                                    h.ids.begin(), h.ids.end(),
                                    [&](const std::string& id) { return free->count(id) > 0; });
                              }),
               held.end());
  }
  return held;
}

SlotLedger KubeletHoldings::Ledger(const std::vector<PlannedPod>& plans,
                                   const std::set<std::string>& foreign, const Inventory& inventory,
                                   const std::set<std::string>* free) const {
  return BuildLedger(plans, Held(plans, foreign, inventory, free));
}

std::optional<PlannedPod> PlanOf(const std::string& key, const PodRequest& request,
                                 const PodAssignment& assignment) {
  if (request.empty() || assignment.state == AssignmentState::kNone) return std::nullopt;
  return PlannedPod{key, request, assignment.planned, assignment.assume_time.value_or(0)};
}

}  // namespace gpushare::memshare
