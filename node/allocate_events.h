// AllocateEvents: a Kubernetes Event for every Allocate gpushare-node refuses, so that
// `kubectl get events` (and `kubectl describe node`) say why a container could not start, with
// the same core/reasons.h code as the gpushare_node_allocate_refusals_total{reason} label.
//
// Kubelet's Allocate carries no pod identity, and a refused Allocate leaves the pod out of
// PodResources, so the Event is recorded on the Node object (type Warning, source
// gpushare-node on this host), its message naming the resource, the devices and the refusal.
// Kubelet itself puts the Allocate error on the pod (UnexpectedAdmissionError), so the pod's
// view already has the words; the Node Event carries the code.
// Not a flood: kube/event_recorder.h folds repeats of the same (object, reason, message) into
// one Event whose count grows (PATCH), and here at most one Event per reason is queued per
// `interval` (refusals in between are counted and reported in the next Event's message, the
// way client-go's spam filter and aggregator keep one Event per reason).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/sync.h"
#include "kube/event_recorder.h"

namespace gpushare::node {

struct AllocateEventsOptions {
  std::string node_name;
  int64_t interval_ms = 60'000;  // at most one Event per reason per interval
};

class AllocateEvents {
 public:
  using NowMs = std::function<int64_t()>;
  AllocateEvents(std::shared_ptr<kube::EventRecorder> recorder, AllocateEventsOptions options,
                 NowMs now_ms);

  // One refused container (NodeMetrics::RefusalSink).
  void Refused(const std::string& resource, std::string_view reason,
               const std::vector<std::string>& device_ids, const std::string& message)
      GPUSHARE_EXCLUDES(mu_);

  // The message of an Event (pure, for tests).
  static std::string Message(const std::string& resource, const std::vector<std::string>& ids,
                             const std::string& why, uint64_t suppressed);

 private:
  struct PerReason {
    int64_t last_ms = -1;
    uint64_t suppressed = 0;
  };
  std::shared_ptr<kube::EventRecorder> recorder_;
  const AllocateEventsOptions options_;
  const NowMs now_ms_;
  Mutex mu_;
  std::map<std::string, PerReason> reasons_ GPUSHARE_GUARDED_BY(mu_);
};

}  // namespace gpushare::node
