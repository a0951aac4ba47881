// Extender: gpushare-scheduler's three verbs (filter, prioritize, bind) as functions from a
// request body to an HTTP reply, independent of the HTTP server (net/http_server.h,
// scheduler/routes.h).
//
//   Filter      keeps the nodes where every GPU container of the pod fits on one GPU (the
//               placement engine decides which containers share a GPU); every other node gets
//               a reason, under FailedAndUnresolvableNodes when no amount of preemption can
//               help (no memory-share GPUs, a container larger than any GPU, not in the cache).
//   Prioritize  scores the nodes 0..10 with the placement policy (GpuCache::Score).
//   Bind        refuses, with the reason, what the pod's own filter and kube-scheduler would
//               never ask for: a bind without the pod's UID or with another UID than the API's
//               pod, a pod being deleted, a pod that does not name the managed resource in any
//               container or init container, a pod already bound (to another node, or to this
//               one by another binder), a node the filter would reject (unknown, no
//               memory-share GPU, no room: GpuCache::Reserve). Then it reserves the GPU(s) in
//               the cache under its lock and creates the Binding, which carries the GPU
//               assignment (core/memshare.h BindAnnotations) as annotations and the pod's UID
//               as its precondition: one API write sets the node and the annotations together.
//               Any failure gives the reservation back (nothing was written). A retry
//               for a pod this extender already booked on that node answers success without
//               writing anything. A pod that names the resource with 0 units is bound as the
//               default binder would, to a node the informer has seen.
//
// Replies follow the wire rules of scheduler/wire.h: HTTP 400 with an Error for bodies that are
// not a valid request, HTTP 200 with an Error for requests that cannot be served (cache not
// synced, a pod whose gpu-mem request is invalid, no room at bind time). Prioritize's reply
// (HostPriorityList) has no Error field, so there those two cases are HTTP 400 (invalid request)
// and HTTP 503 (cache not synced), which kube-scheduler treats as a failed extender call.
// Nothing throws.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "core/memshare.h"
#include "kube/client.h"
#include "kube/objects.h"
#include "scheduler/cache.h"
#include "scheduler/metrics.h"
#include "scheduler/preempt.h"
#include "scheduler/wire.h"

namespace gpushare::scheduler {

struct ExtenderOptions {
  std::string resource_name = std::string(memshare::kResourceName);  // what pods ask for
  // Its wall time (UnixNs) is the ASSUME_TIME written at bind and a pick's start.
  std::shared_ptr<Clock> clock = RealClock();
  // The pod as the informer last saw it ("namespace/name"), or null; the API is asked when it
  // is missing or has another UID. Default: always ask the API.
  std::function<std::shared_ptr<const kube::Pod>(const std::string& key)> pod_lookup;
  // Whether the node informer has seen `node` (checked for pods with nothing to place, whose
  // filter passes every node). Default: not checked.
  std::function<bool(const std::string& node)> node_known;
  // Latency histograms and failure counters by reason (null: not kept).
  SchedulerMetrics* metrics = nullptr;
  // A Warning Event about a pod, with a core/reasons.h code as its reason: the filter left the
  // pod no node (FilterFailureMessage), or its bind failed. Default: none.
  std::function<void(const kube::ObjectReference& pod, std::string_view reason,
                     const std::string& message)>
      warn;
  // --filter-keep-best: 0, the filter passes every node that fits and kube-scheduler ranks them
  // with prioritize; N > 0, it passes only the N best by the policy (GpuCache::Score; the
  // engine's own choice first): with 1, kube-scheduler has one node left and neither scores nor
  // calls prioritize (one exchange per pod instead of two). Pods with soft placement preferences
  // (kube::PodSpec::placement_preferences) keep every node that fits either way.
  int filter_keep_best = 0;
  // Whether the node the policy picks for a pod (the first the filter keeps, or the one
  // prioritize ranks first) is held for it until its bind (GpuCache::Pick).
  bool pick = false;
  // The preempt verb's own options (scheduler/preempt.h); resource_name, pod_lookup, now_ns,
  // metrics and warn are taken from the fields above.
  PreemptOptions preempt;
};

// A node the filter refused, for the Event (FilterFailureMessage).
struct RefusedNode {
  std::string_view name;
  std::string_view code;
  const std::string* reason;
};
// The reason with the most refused nodes (ties: the first in core/reasons.h's placement order),
// and a message that says which GPU lacked what on the first few nodes, then "and N more",
// bounded to about kMaxEventMessage bytes:
//   "0/3 nodes can take the pod: node-1: GpuMemoryInsufficient: no GPU has 5 GiB free for
//    container main: the most free is GPU 2 (GPU-ab12) with 3 GiB free of 24 GiB (...); node-2:
//    ...; and 1 more"
inline constexpr size_t kMaxEventMessage = 1024;
std::pair<std::string_view, std::string> FilterFailureMessage(
    size_t listed, const std::vector<RefusedNode>& nodes);

struct ExtenderStats {
  uint64_t filter = 0, filter_errors = 0;
  uint64_t prioritize = 0, prioritize_errors = 0;
  uint64_t bind = 0, bind_errors = 0, bind_idempotent = 0;
  uint64_t bad_requests = 0;   // HTTP 400
  uint64_t bind_ns_total = 0;  // time spent in successful binds
};

class Extender {
 public:
  Extender(GpuCache& cache, std::shared_ptr<kube::Client> client, ExtenderOptions options = {});

  HttpReply Filter(std::string_view body);
  HttpReply Prioritize(std::string_view body);
  // The verb "prioritize-cpu" (a second extender entry without managedResources, so
  // kube-scheduler calls it for every pod): scores pods that ask no GPU by the policy, which
  // weighs the CPU and memory they take from each node's GPU pods (FGD's protocol: every pod
  // placed by the policy); pods asking GPU get 0 everywhere (the first entry ranks them).
  HttpReply PrioritizeCpuOnly(std::string_view body);
  HttpReply Bind(std::string_view body);
  // kube-scheduler's preemption (scheduler/preempt.h).
  HttpReply Preempt(std::string_view body) { return preemptor_.Preempt(body); }

  ExtenderStats stats() const;

 private:
  HttpReply Prioritize(std::string_view body, bool cpu_only_pods);
  // Holds the GPUs of `node` the policy chooses for the pod until its bind (options_.pick).
  void Pick(const kube::Pod& pod, const memshare::PodRequest& request, std::string_view node);
  // The bind itself: OK when the pod is bound to b.node (by this call or an earlier one), else
  // why not (the message is the Error of the reply; the code says what kind of refusal:
  // kUnavailable not synced, kNotFound, kFailedPrecondition, kResourceExhausted no room, or the
  // API's error). Each step below returns the same way, every failure with its core/reasons.h
  // code attached (Status::reason).
  Status DoBind(const BindingArgs& b);
  // The pod named by `b`, of b.pod_uid and not being deleted (the informer's copy or the API's).
  Result<std::shared_ptr<const kube::Pod>> PodToBind(const BindingArgs& b);
  // A pod that names the resource with 0 units: bound as the default binder would.
  Status BindWithoutUnits(const kube::Pod& pod, const BindingArgs& b);
  // A pod already bound to b.node: success when gpushare assigned its GPUs.
  Status RetriedBind(const kube::Pod& pod, const memshare::PodRequest& req, const BindingArgs& b);
  // Reserves GPUs and binds with the assignment in the Binding (BindOrRollback).
  Status BindWithGpus(const kube::Pod& pod, const memshare::PodRequest& req, const BindingArgs& b,
                      std::chrono::steady_clock::time_point t0);
  // Creates the Binding with the GPU assignment `annotations` and the pod's UID as its
  // precondition (one API write); on failure gives the reservation `token` back. A conflict
  // because the pod is already bound to this node with a gpushare assignment (an earlier bind
  // whose reply was lost) is success.
  Status BindOrRollback(const std::string& uid, const BindingArgs& b, uint64_t token,
                        const std::map<std::string, std::string>& annotations,
                        const memshare::PodRequest& req);

  void Warn(const kube::ObjectReference& pod, std::string_view reason, const std::string& message);
  // Counts the refusals by code and, when no node is left, records the Event.
  void FilterRefused(const kube::Pod& pod, const std::vector<std::string_view>& names,
                     const std::vector<NodeVerdict>& verdicts, size_t passed);

  GpuCache& cache_;
  std::shared_ptr<kube::Client> client_;
  ExtenderOptions options_;
  Preemptor preemptor_;
  std::atomic<uint64_t> filter_{0}, filter_errors_{0}, prioritize_{0}, prioritize_errors_{0};
  std::atomic<uint64_t> bind_{0}, bind_errors_{0}, bind_idempotent_{0}, bad_requests_{0},
      bind_ns_{0};
};

}  // namespace gpushare::scheduler
