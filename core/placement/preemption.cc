#include "core/placement/preemption.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>

namespace gpushare::placement {

namespace {

// kube-scheduler reads a missing start time as "now": later than any pod that has one.
int64_t StartOf(const PreemptionPod& p) {
  return p.start_ns > 0 ? p.start_ns : std::numeric_limits<int64_t>::max();
}

// The node as the victim choice changes it: its state and, in ledger mode, each GPU's sums.
struct Work {
  NodeState s;
  std::array<SlotLedger, kMaxGpusPerNode> l{};
  bool ledger = false;

  explicit Work(const PreemptionInput& in) : s(in.node), ledger(!in.ledger.empty()) {
    if (!ledger) return;
    for (int g = 0; g < s.num_gpus && static_cast<size_t>(g) < in.ledger.size(); ++g) {
      l[static_cast<size_t>(g)] = in.ledger[static_cast<size_t>(g)];
      Sync(g);
    }
    RefreshTotals(s);
  }
  // The slot's free units and clients from its sums (ledger mode).
  void Sync(int g) {
    const SlotLedger& x = l[static_cast<size_t>(g)];
    const int64_t used = std::max(x.plan, x.current) + x.other;
    s.gpu_free[g] = s.gpu_capacity[g] - std::min(used, s.gpu_capacity[g]);
    s.gpu_clients[g] =
        static_cast<int16_t>(std::max(x.plan_clients, x.current_clients) + x.other_clients);
  }
};

// Adds (sign +1) or removes (sign -1) pod `i` from the node's counts.
void Count(const PreemptionInput& in, Work& w, size_t i, int sign) {
  const PreemptionPod& p = in.pods[i];
  for (uint32_t k = p.use_begin; k < p.use_end; ++k) {
    const SlotUse& u = in.uses[k];
    if (u.slot < 0 || u.slot >= w.s.num_gpus) continue;
    if (w.ledger) {
      w.l[static_cast<size_t>(u.slot)].current += sign * u.units;
      w.l[static_cast<size_t>(u.slot)].current_clients += sign * u.clients;
      w.Sync(u.slot);
    } else {
      w.s.gpu_free[u.slot] -= sign * u.units;
      w.s.gpu_clients[u.slot] = static_cast<int16_t>(w.s.gpu_clients[u.slot] + sign * u.clients);
    }
  }
  if (w.ledger) {
    for (uint32_t k = p.plan_begin; k < p.plan_end; ++k) {
      const SlotUse& u = in.uses[k];
      if (u.slot < 0 || u.slot >= w.s.num_gpus) continue;
      w.l[static_cast<size_t>(u.slot)].plan += sign * u.units;
      w.l[static_cast<size_t>(u.slot)].plan_clients += sign * u.clients;
      w.Sync(u.slot);
    }
  }
  w.s.pods += sign;
  RefreshTotals(w.s);
}

// Whether pod `i` counts on `slot`: it holds units there, or (ledger mode) its slot is planned
// there.
bool Uses(const PreemptionInput& in, size_t i, int slot) {
  const PreemptionPod& p = in.pods[i];
  for (uint32_t k = p.use_begin; k < p.use_end; ++k)
    if (in.uses[k].slot == slot && in.uses[k].units > 0) return true;
  if (in.ledger.empty()) return false;
  for (uint32_t k = p.plan_begin; k < p.plan_end; ++k)
    if (in.uses[k].slot == slot && in.uses[k].units > 0) return true;
  return false;
}

// kube-scheduler's FilterVictimsWithPDBViolation over `order` (most important first): a pod
// violates when decrementing one of its budgets takes it below zero.
std::vector<bool> Violating(const PreemptionInput& in, const std::vector<size_t>& order) {
  std::vector<int32_t> left = in.allowed;
  std::vector<bool> out(in.pods.size(), false);
  for (size_t i : order) {
    for (int b : in.pods[i].budgets) {
      if (b < 0 || static_cast<size_t>(b) >= left.size()) continue;
      if (--left[static_cast<size_t>(b)] < 0) {
        out[i] = true;
        break;
      }
    }
  }
  return out;
}

// The metrics of a set of victims, with where the preemptor goes on the node `after` them.
VictimSet Measure(const PreemptionInput& in, std::vector<size_t> victims, const NodeState& after,
                  const PodShape& shape) {
  VictimSet v = MeasureVictims(in, std::move(victims));
  BestFitAssignment(after, shape, &v.gpus);
  return v;
}

}  // namespace

bool MoreImportantVictim(const PreemptionPod& a, const PreemptionPod& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return StartOf(a) < StartOf(b);
}

VictimSet MeasureVictims(const PreemptionInput& in, std::vector<size_t> victims) {
  VictimSet v;
  v.victims = std::move(victims);
  const std::vector<bool> violating = Violating(in, v.victims);
  v.highest_priority = std::numeric_limits<int32_t>::min();
  for (size_t i : v.victims) {
    const PreemptionPod& p = in.pods[i];
    v.violations += violating[i] ? 1 : 0;
    v.highest_priority = std::max(v.highest_priority, p.priority);
    v.priority_sum += static_cast<int64_t>(p.priority) + (int64_t{1} << 31);
    for (uint32_t k = p.use_begin; k < p.use_end; ++k) v.freed_units += in.uses[k].units;
  }
  v.earliest_start = std::numeric_limits<int64_t>::max();
  for (size_t i : v.victims)
    if (in.pods[i].priority == v.highest_priority)
      v.earliest_start = std::min(v.earliest_start, StartOf(in.pods[i]));
  return v;
}

namespace {

// kube-scheduler's reprieve: from `start` (the node with the candidates of `order` gone), gives
// each back in `order` unless the pod would no longer fit; the ones that cannot come back are
// the victims.
std::optional<VictimSet> Reprieve(const PreemptionInput& in, const Work& start,
                                  const std::vector<size_t>& order,
                                  const std::vector<size_t>& importance, const PodShape& shape) {
  Work w = start;
  if (CheckFit(w.s, shape) != Rejection::kNone) return std::nullopt;
  std::vector<bool> victim(in.pods.size(), false);
  for (size_t i : order) {
    Count(in, w, i, +1);
    if (CheckFit(w.s, shape) != Rejection::kNone) {
      Count(in, w, i, -1);
      victim[i] = true;
    }
  }
  std::vector<size_t> victims;
  for (size_t i : importance)
    if (victim[i]) victims.push_back(i);
  if (victims.empty()) return std::nullopt;
  return Measure(in, std::move(victims), w.s, shape);
}

}  // namespace

size_t PreemptionInput::Add(PreemptionPod pod, const SlotUse* use, size_t n, const SlotUse* plan,
                            size_t m) {
  pod.use_begin = static_cast<uint32_t>(uses.size());
  uses.insert(uses.end(), use, use + n);
  pod.use_end = static_cast<uint32_t>(uses.size());
  pod.plan_begin = pod.use_end;
  if (plan != nullptr) uses.insert(uses.end(), plan, plan + m);
  pod.plan_end = static_cast<uint32_t>(uses.size());
  pods.push_back(std::move(pod));
  return pods.size() - 1;
}

bool BetterVictims(const VictimSet& a, const VictimSet& b) {
  if (a.violations != b.violations) return a.violations < b.violations;
  if (a.highest_priority != b.highest_priority) return a.highest_priority < b.highest_priority;
  if (a.priority_sum != b.priority_sum) return a.priority_sum < b.priority_sum;
  if (a.victims.size() != b.victims.size()) return a.victims.size() < b.victims.size();
  if (a.earliest_start != b.earliest_start) return a.earliest_start > b.earliest_start;
  return a.freed_units < b.freed_units;
}

std::optional<VictimSet> ChooseVictims(const PreemptionInput& in, const PodShape& shape,
                                       int32_t priority, NoVictims* why) {
  NoVictims ignored;
  NoVictims& reason = why != nullptr ? *why : ignored;
  reason = NoVictims::kNone;
  // What comes back anyway: pods whose deletion has started.
  Work base(in);
  std::vector<size_t> candidates;
  for (size_t i = 0; i < in.pods.size(); ++i) {
    const PreemptionPod& p = in.pods[i];
    if (p.terminating) {
      Count(in, base, i, -1);
    } else if (p.evictable && p.priority < priority) {
      candidates.push_back(i);
    }
  }
  if (CheckFit(base.s, shape) == Rejection::kNone) {
    reason = NoVictims::kFitsAfterTermination;
    return std::nullopt;
  }
  if (candidates.empty()) {
    reason = NoVictims::kNoLowerPriority;
    return std::nullopt;
  }
  Work emptied = base;
  for (size_t i : candidates) Count(in, emptied, i, -1);
  if (CheckFit(emptied.s, shape) != Rejection::kNone) {
    reason = NoVictims::kDoesNotFit;
    return std::nullopt;
  }
  // kube-scheduler's order: violating pods first, each group most important first.
  std::vector<size_t> importance = candidates;
  std::stable_sort(importance.begin(), importance.end(),
                   [&](size_t a, size_t b) { return MoreImportantVictim(in.pods[a], in.pods[b]); });
  const std::vector<bool> violating = Violating(in, importance);
  std::vector<size_t> kube_order;
  for (size_t i : importance)
    if (violating[i]) kube_order.push_back(i);
  for (size_t i : importance)
    if (!violating[i]) kube_order.push_back(i);

  std::optional<VictimSet> best;
  bool over_budget = false;
  auto consider = [&](const Work& start, const std::vector<size_t>& order) {
    std::optional<VictimSet> v = Reprieve(in, start, order, importance, shape);
    if (!v) return;
    if (in.mode == BudgetMode::kRespect && v->violations > 0) {
      over_budget = true;
      return;
    }
    if (!best || BetterVictims(*v, *best)) best = std::move(v);
  };
  consider(emptied, kube_order);
  // Per GPU: keep every pod that does not count on that GPU first, so that where one GPU can be
  // freed, its own pods are the victims. For a single share the others all come back (the share
  // fits that GPU once its candidates are gone, or nowhere by this order): only that GPU's
  // candidates are reprieved, from the node with the others back.
  std::vector<size_t> order;
  order.reserve(kube_order.size());
  for (int g = 0; g < in.node.num_gpus; ++g) {
    order.clear();
    if (shape.single_share()) {
      Work start = base;
      for (size_t i : kube_order)
        if (Uses(in, i, g)) {
          Count(in, start, i, -1);
          order.push_back(i);
        }
      if (!order.empty()) consider(start, order);
      continue;
    }
    for (size_t i : kube_order)
      if (!Uses(in, i, g)) order.push_back(i);
    if (order.size() == kube_order.size()) continue;  // nothing of it to free
    for (size_t i : kube_order)
      if (Uses(in, i, g)) order.push_back(i);
    consider(emptied, order);
  }
  if (!best) reason = over_budget ? NoVictims::kBudgets : NoVictims::kDoesNotFit;
  return best;
}

}  // namespace gpushare::placement
