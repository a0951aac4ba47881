// Preemptor: gpushare-scheduler's preempt verb (the extender API's ProcessPreemption).
//
// kube-scheduler's own preemption counts aliyun.com/gpu-mem per node: for a pending share of
// higher priority it evicts the fewest lower-priority pods that free the node's total, spread
// over several GPUs, and frees none of them enough. With `preemptVerb` set, kube-scheduler asks
// the extender before it evicts anything: the request names, per candidate node, the victims it
// chose; the reply keeps the nodes worth preempting on, each with the victims to evict there
// (any pods of that node; kube-scheduler evicts exactly those).
//
// For each candidate node the Preemptor takes the cache's GPUs and pods (GpuCache::
// ViewForPreemption), the pods' priorities, start times and labels from the pod informer and
// the PodDisruptionBudgets from theirs, and chooses the victims on the GPUs with
// placement::ChooseVictims (one GPU freed enough, or every GPU a multi-container pod needs;
// fewest and least important victims; budgets respected). The victims kube-scheduler chose for
// other resources (pods that hold no GPU share) stay victims, and where kube-scheduler's set
// freed more CPU or memory than the chosen one, its GPU-share victims are added back until it
// frees as much. The reply holds the one best node by kube-scheduler's own order of candidates
// (so the preemptor's node is known), or no node at all: then nothing is evicted, and the pod
// gets a PreemptionNotHelpful Event saying why. The chosen GPUs are held for the pod in the cache
// (GpuCache::Nominate) until it is bound there.
//
// Whole GPUs and time-sliced replicas never reach this verb (managedResources): kube-scheduler
// counts their devices itself, and its own preemption is right for them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "core/memshare.h"
#include "core/placement/preemption.h"
#include "kube/objects.h"
#include "scheduler/cache.h"
#include "scheduler/metrics.h"
#include "scheduler/wire.h"

namespace gpushare::scheduler {

struct PreemptOptions {
  std::string resource_name = std::string(memshare::kResourceName);
  placement::BudgetMode budgets = placement::BudgetMode::kRespect;
  // The pod as the informer last saw it ("namespace/name"), or null.
  std::function<std::shared_ptr<const kube::Pod>(const std::string& key)> pod_lookup;
  // Every pod the informer holds (read only when kube-scheduler names victims the cache does not
  // book: pods without GPU shares). Default: none.
  std::function<std::vector<std::shared_ptr<const kube::Pod>>()> pod_list;
  // The cluster's PodDisruptionBudgets. Default: none.
  std::function<std::vector<std::shared_ptr<const kube::PodDisruptionBudget>>()> budget_list;
  // Whether the budgets have been listed (until then the verb answers 503: kube-scheduler evicts
  // nothing rather than break a budget it cannot see). Default: always.
  std::function<bool()> budgets_synced;
  std::shared_ptr<Clock> clock = RealClock();  // its wall time (UnixNs) starts a hold
  SchedulerMetrics* metrics = nullptr;
  std::function<void(const kube::ObjectReference& pod, std::string_view reason,
                     const std::string& message)>
      warn;
};

// What the preempt verb decided.
struct PreemptDecision {
  std::string node;                  // empty: no node
  std::vector<std::string> victims;  // UIDs, most important first
  int64_t pdb_violations = 0;
  memshare::ContainerGpus gpus;                // where the pod goes on `node`
  std::map<std::string, std::string> refused;  // node -> why no victims there
};

class Preemptor {
 public:
  Preemptor(GpuCache& cache, PreemptOptions options);

  // The verb: a request body in, the reply out (HTTP 400 for a body that is not a request, 503
  // until the cache is synced; kube-scheduler then fails that preemption attempt and retries).
  HttpReply Preempt(std::string_view body);

  // The decision for a decoded request (and the hold it records in the cache).
  Result<PreemptDecision> Decide(const kube::Pod& pod, const memshare::PodRequest& request,
                                 const std::map<std::string, NodeVictims>& proposed);

 private:
  GpuCache& cache_;
  PreemptOptions options_;
};

}  // namespace gpushare::scheduler
