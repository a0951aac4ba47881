// Preemption on one node's GPUs: which running pods to evict so that a pending pod of higher
// priority fits one GPU (or every GPU its containers need), chosen the way kube-scheduler chooses
// its victims, but counting GPUs instead of the node's total.
//
// kube-scheduler's own dry run (DefaultPreemption's SelectVictimsOnNode) removes every pod of
// lower priority, checks that the preemptor fits, then gives back ("reprieves") as many pods as
// it can, most important first (PodDisruptionBudget-violating pods before the others). For a
// memory share it can only count the node's total of the resource, so it evicts pods spread over
// several GPUs and frees none of them enough. ChooseVictims runs the same reprieve against the
// GPUs themselves (placement::CheckFit on the node as it would be), once in kube-scheduler's
// order and once per GPU in an order that keeps every pod off that GPU first (so that, where one
// GPU can be freed, the victims are that GPU's pods alone), and keeps the best set by
// kube-scheduler's own order of candidates (BetterVictims). Pure: no I/O, no clocks.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "core/placement/cluster.h"
#include "core/placement/pod.h"

namespace gpushare::placement {

// What one pod holds on one GPU of the node (by slot, as NodeState counts GPUs).
struct SlotUse {
  int slot = 0;
  int64_t units = 0;
  int clients = 0;
};

// A pod running on the node, as the victim choice sees it.
struct PreemptionPod {
  int32_t priority = 0;
  int64_t start_ns = 0;      // status.startTime (0: unknown); among equals the older is kept
  bool terminating = false;  // deletion has started: what it holds comes back without eviction
  bool evictable = true;     // the caller's veto (a pod kube-scheduler does not know on the node)
  int64_t cpu_milli = 0;     // the CPU and memory it requests (what its eviction frees of them)
  int64_t memory_bytes = 0;
  uint32_t use_begin = 0, use_end = 0;    // what it holds: PreemptionInput::uses[begin, end)
  uint32_t plan_begin = 0, plan_end = 0;  // with a ledger: its slot where it was planned
  std::vector<int> budgets;  // the PodDisruptionBudgets that cover it (indexes into `allowed`)
};

// How PodDisruptionBudgets bind the choice.
enum class BudgetMode {
  kRespect,     // never a set that takes a budget below zero: no candidate instead
  kBestEffort,  // kube-scheduler's rule: fewest violations first, but a violation is allowed
};

// The scheduler's count of one GPU (core/memshare_ledger.h, EffectiveUsage): the larger of the
// sums of where pods were planned and where they are, plus what else is booked there (holds of
// preemption, guards); free = capacity - that.
struct SlotLedger {
  int64_t plan = 0, current = 0, other = 0;
  int plan_clients = 0, current_clients = 0, other_clients = 0;
};

struct PreemptionInput {
  NodeState node;  // the node's GPUs now, with every pod below counted in it
  std::vector<PreemptionPod> pods;
  std::vector<SlotUse> uses;     // every pod's, one run each (flat: one allocation per node)
  std::vector<int32_t> allowed;  // per budget: status.disruptionsAllowed
  BudgetMode mode = BudgetMode::kRespect;
  // Per slot, when the node is counted as the scheduler counts it: a pod frees its current use
  // where it is and its planned slot where it was planned, and a GPU is as free as the larger of
  // the two sums allows (so evicting the pods on a GPU frees nothing while other pods' slots are
  // still planned there). Empty: uses count directly in `node`.
  std::vector<SlotLedger> ledger;

  // Appends `pod` holding `use` (already counted in `node`), planned at `plan` (ledger mode);
  // returns its index.
  size_t Add(PreemptionPod pod, const SlotUse* use, size_t n, const SlotUse* plan = nullptr,
             size_t m = 0);
  size_t Add(PreemptionPod pod, std::initializer_list<SlotUse> use = {}) {
    return Add(std::move(pod), use.begin(), use.size());
  }
};

// One way to make room: the pods to evict and what kube-scheduler compares candidates by.
struct VictimSet {
  std::vector<size_t> victims;  // indexes into PreemptionInput::pods, most important first
  int violations = 0;           // victims that take one of their budgets below zero
  int32_t highest_priority = 0;
  int64_t priority_sum = 0;    // sum of (priority + 2^31), as kube-scheduler sums them
  int64_t earliest_start = 0;  // the earliest start among the highest-priority victims
  int64_t freed_units = 0;     // units the victims free
  GpuAssignment gpus;          // where the preemptor goes once they are gone (BestFitAssignment)
};

// Why a node offers no victim set.
enum class NoVictims {
  kNone = 0,
  kFitsAfterTermination,  // pods already being deleted free enough: nothing to evict
  kNoLowerPriority,       // no evictable pod of lower priority
  kDoesNotFit,            // even with every lower-priority pod gone the pod fits no GPU
  kBudgets,               // every set that frees enough violates a budget (kRespect)
};

// The best victim set on the node for a pod of `shape` and `priority`, or why there is none
// (`why`, when given).
std::optional<VictimSet> ChooseVictims(const PreemptionInput& in, const PodShape& shape,
                                       int32_t priority, NoVictims* why = nullptr);

// The figures of a given set of victims (indexes into in.pods): violations counted over the set
// in the order given (most important first, as kube-scheduler lists victims), freed units, and
// no GPU assignment. For a set the caller widened beyond ChooseVictims' (other resources' victims).
VictimSet MeasureVictims(const PreemptionInput& in, std::vector<size_t> victims);

// The order kube-scheduler lists victims in (MoreImportantPod): higher priority first, then the
// earlier start (an unknown start counts as the latest).
bool MoreImportantVictim(const PreemptionPod& a, const PreemptionPod& b);

// kube-scheduler's order of preemption candidates (pickOneNodeForPreemption): fewer budget
// violations, then a lower highest victim priority, a smaller sum of priorities, fewer victims,
// a later earliest start of the highest-priority victims; then fewer units freed. True when `a`
// is strictly better than `b`.
bool BetterVictims(const VictimSet& a, const VictimSet& b);

}  // namespace gpushare::placement
