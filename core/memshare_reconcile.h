// PodReconciler: the pure half of memory mode's reconciler (node/memshare_service.cc). One
// PodResources List (which units each container holds, from kubelet) and the pod cache's view
// of the same pods go in; a decision per pod comes out: patch these annotations, or why not.
// The service carries the patches out (the confirm step) and reports each write back, so that
// a patch the cache has not caught up with is not written twice.
//
// A pod kubelet lists that the cache does not know is looked at again soon (retry_soon), but
// only for kMaxQuickRetries rounds: it may be a deleted pod kubelet is still tearing down.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/memshare.h"
#include "core/memshare_ledger.h"

namespace gpushare::memshare {

// What the pod cache has for one pod kubelet lists. No entry: the cache does not have it.
struct CachedPod {
  std::map<std::string, std::string> annotations;
  std::string resource_version;
  std::optional<PodRequest> request;  // nullopt: unreadable, request_error says why
  std::string request_error;
};

enum class PodVerdict {
  kNotCached,   // the cache does not have it (yet)
  kUnreadable,  // its request cannot be read (problems[0] says why)
  kIncomplete,  // kubelet is still admitting its containers
  kTruthful,    // its annotations already say the truth
  kWritten,     // our patch is written; the cache has not caught up yet
  kPatch,       // write `changes`
};

struct PodDecision {
  std::string key;  // namespace/name
  PodVerdict verdict = PodVerdict::kNotCached;
  std::vector<std::string> problems;  // what ActualGpus found wrong, or why it is unreadable
  ContainerGpus actual;               // where kubelet put the containers (complete pods)
  std::map<std::string, std::string> changes;  // kPatch
  PodAssignment before;                        // kPatch: what the annotations said
  std::string resource_version;                // kPatch: of the cached pod
};

struct Observation {
  std::vector<PodDecision> pods;  // in key order
  bool retry_soon = false;        // a pod not cached (for a while) or still being admitted
  int confirmed = 0;              // pods whose every container was seen with units
};

class PodReconciler {
 public:
  static constexpr int kMaxQuickRetries = 10;

  // The observe step: for every pod of `observed` (pod key -> its containers' units of our
  // resource, from one List), the decision. `cached` is keyed like `observed`; `desired` gives
  // ALIYUN_COM_GPU_MEM_DEV of the real GPU. Forgets what it knew of pods no longer listed.
  Observation Observe(const std::map<std::string, std::vector<ObservedContainer>>& observed,
                      const std::map<std::string, CachedPod>& cached, const Inventory& inventory,
                      const NodeInventory& desired);
  // The confirm step wrote decision.changes over the pod at decision.resource_version.
  void Written(const PodDecision& decision);

 private:
  struct Write {
    std::string resource_version;  // of the pod before our patch
    std::map<std::string, std::string> changes;
  };

  PodDecision Decide(const std::string& key, const std::vector<ObservedContainer>& containers,
                     const CachedPod& pod, const Inventory& inventory,
                     const NodeInventory& desired) const;
  void Forget(const std::map<std::string, std::vector<ObservedContainer>>& observed);

  std::map<std::string, Write> written_;
  std::map<std::string, int> unseen_;  // listed pods the cache does not have, by rounds
};

}  // namespace gpushare::memshare
