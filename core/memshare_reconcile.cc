// See memshare_reconcile.h.
#include "core/memshare_reconcile.h"

#include "core/memshare_node.h"

namespace gpushare::memshare {
namespace {

// ALIYUN_COM_GPU_MEM_DEV: the units of the GPU the pod's first demand really got (-1: unknown).
int64_t DevUnits(const PodRequest& request, const ContainerGpus& actual,
                 const NodeInventory& desired) {
  const std::vector<std::string> owners = request.DemandContainers();
  if (owners.empty()) return -1;
  auto it = actual.find(owners[0]);
  if (it == actual.end()) return -1;
  const InventoryGpu* g = desired.FindByIndex(it->second);
  return g != nullptr ? g->units : -1;
}

}  // namespace

Observation PodReconciler::Observe(
    const std::map<std::string, std::vector<ObservedContainer>>& observed,
    const std::map<std::string, CachedPod>& cached, const Inventory& inventory,
    const NodeInventory& desired) {
  Observation out;
  for (const auto& [key, containers] : observed) {
    auto c = cached.find(key);
    if (c == cached.end()) {
      // kubelet knows it and our cache not yet, or it was deleted and kubelet is still tearing
      // it down: look again soon, but only for a while.
      if (++unseen_[key] <= kMaxQuickRetries) out.retry_soon = true;
      out.pods.push_back({key, PodVerdict::kNotCached, {}, {}, {}, {}, {}});
      continue;
    }
    unseen_.erase(key);
    PodDecision d = Decide(key, containers, c->second, inventory, desired);
    if (d.verdict == PodVerdict::kIncomplete) out.retry_soon = true;
    if (d.verdict != PodVerdict::kIncomplete && d.verdict != PodVerdict::kUnreadable)
      ++out.confirmed;
    out.pods.push_back(std::move(d));
  }
  Forget(observed);
  return out;
}

PodDecision PodReconciler::Decide(const std::string& key,
                                  const std::vector<ObservedContainer>& containers,
                                  const CachedPod& pod, const Inventory& inventory,
                                  const NodeInventory& desired) const {
  PodDecision d{key, PodVerdict::kUnreadable, {}, {}, {}, {}, pod.resource_version};
  if (!pod.request) {
    d.problems.push_back(pod.request_error);
    return d;
  }
  ActualPlacement actual = ActualGpus(*pod.request, containers, inventory);
  d.problems = std::move(actual.problems);
  d.actual = std::move(actual.gpus);
  if (!actual.complete) {
    d.verdict = PodVerdict::kIncomplete;
    return d;
  }
  d.changes = ReconcileChanges(pod.annotations, *pod.request, d.actual,
                               DevUnits(*pod.request, d.actual, desired));
  auto w = written_.find(key);
  const bool written = w != written_.end() && w->second.changes == d.changes &&
                       w->second.resource_version == pod.resource_version;
  d.verdict = d.changes.empty() ? PodVerdict::kTruthful
              : written         ? PodVerdict::kWritten
                                : PodVerdict::kPatch;
  if (d.verdict == PodVerdict::kPatch) d.before = ResolveAssignment(pod.annotations, *pod.request);
  return d;
}

void PodReconciler::Written(const PodDecision& decision) {
  written_[decision.key] = {decision.resource_version, decision.changes};
}

void PodReconciler::Forget(const std::map<std::string, std::vector<ObservedContainer>>& observed) {
  for (auto it = written_.begin(); it != written_.end();) {
    it = observed.count(it->first) ? std::next(it) : written_.erase(it);
  }
  for (auto it = unseen_.begin(); it != unseen_.end();) {
    it = observed.count(it->first) ? std::next(it) : unseen_.erase(it);
  }
}

}  // namespace gpushare::memshare
