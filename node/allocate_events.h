// AllocateEvents: a Kubernetes Event for every Allocate gpushare-node refuses, so that
// `kubectl describe pod` (or `kubectl get events`) says why a container could not start, with
// the same core/reasons.h code as the gpushare_node_allocate_refusals_total{reason} label.
//
// Kubelet's Allocate carries no pod identity, so the pod is worked out (core/
// allocate_attribution.h): the pods bound to this node are listed (spec.nodeName=<node>, from
// the API server's cache: resourceVersion=0), and those in admission with a container that asks
// exactly the refused number of devices and holds none yet are the candidates.
//   - exactly one candidate: the Event goes on that Pod (type Warning, reason = the code, source
//     gpushare-node on this host), its message naming the resource, the container, the devices
//     (memory units as their GPU and count) and what was wrong;
//   - none, several, or the list failed: the Event goes on the Node, as before, its message also
//     saying why no pod was named (the first kMaxCandidatesNamed candidates, and how many more).
// Kubelet itself fails the pod (UnexpectedAdmissionError) with the refusal's gRPC message, which
// starts with the same code (deviceplugin/server.cc).
//
// One of the agent's Allocate observers (deviceplugin::AllocateObserver; answered containers are
// ignored). Never blocks the Allocate: Refused (called on the gRPC thread) only decides whether an
// Event is due and queues it; a worker thread of its own does the list (bounded by the client's
// request timeout and response size, cancelled at destruction) and hands the Event to kube::
// EventRecorder, which queues and sends it. At most `queue_limit` refusals wait for their lookup;
// beyond that a refusal's Event goes on the Node without one (counted in stats()).
// Not a flood: at most one Event per reason is queued per `interval` (refusals in between are
// counted and reported in the next Event's message, the way client-go's spam filter and
// aggregator keep one Event per reason), and kube/event_recorder.h folds repeats of the same
// (object, reason, message) into one Event whose count grows (PATCH).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/sync.h"
#include "core/allocate_attribution.h"
#include "core/status.h"
#include "deviceplugin/allocate_observer.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/objects.h"

namespace gpushare::node {

// Lists the pods a refusal may be for (all pods bound to the node will do; filtering is
// core's). Runs on AllocateEvents' worker; must return once `cancel` is cancelled.
using PodLister = std::function<Result<std::vector<kube::Pod>>(const kube::Cancellation* cancel)>;

// The pods bound to `node`, from the API server's watch cache (resourceVersion=0: no etcd read
// for a refusal, and the pod kubelet is admitting was seen by kubelet through that cache),
// in pages of 100; pods that do not decode are skipped.
PodLister NodePodLister(std::shared_ptr<kube::Client> client, std::string node);

struct AllocateEventsOptions {
  std::string node_name;
  int64_t interval_ms = 60'000;  // at most one Event per reason per interval
  PodLister pods;                // null: no lookup, every Event goes on the Node
  size_t queue_limit = 16;       // refusals waiting for their lookup
};

struct AllocateEventsStats {
  uint64_t pod_events = 0;     // Events put on the one candidate pod
  uint64_t node_events = 0;    // Events put on the Node (no, several or unknown candidates)
  uint64_t lookup_failed = 0;  // the pod list failed (the Event went on the Node)
  uint64_t dropped = 0;        // lookups skipped, the queue being full (Event on the Node)
  uint64_t rate_limited = 0;   // refusals within `interval` of their reason's last Event
};

// One refusal, as the Event builders see it.
struct RefusalFacts {
  std::string resource;
  std::string reason;  // the core/reasons.h code
  std::vector<std::string> device_ids;
  std::string why;          // the refusal's message (without the code)
  uint64_t suppressed = 0;  // refusals of this reason since the last Event
};

class AllocateEvents final : public deviceplugin::AllocateObserver {
 public:
  static constexpr size_t kMaxCandidatesNamed = 5;

  // `clock` paces the Events (NowMs).
  AllocateEvents(std::shared_ptr<kube::EventRecorder> recorder, AllocateEventsOptions options,
                 std::shared_ptr<Clock> clock);
  // Cancels a lookup in flight; refusals still queued get their Event on the Node.
  ~AllocateEvents() override;
  AllocateEvents(const AllocateEvents&) = delete;
  AllocateEvents& operator=(const AllocateEvents&) = delete;

  // A refused container's outcome goes to Refused; an answered one is ignored.
  void OnAllocate(const deviceplugin::AllocateOutcome& outcome) override GPUSHARE_EXCLUDES(mu_);
  // One refused container. Never blocks on the API.
  void Refused(const std::string& resource, std::string_view reason,
               const std::vector<std::string>& device_ids, const std::string& message)
      GPUSHARE_EXCLUDES(mu_);

  // Waits until every refusal queued so far has been handed to the recorder (tests, shutdown).
  bool Flush(std::chrono::milliseconds timeout) GPUSHARE_EXCLUDES(mu_);
  AllocateEventsStats stats() const GPUSHARE_EXCLUDES(mu_);

  // --- the messages (pure, for tests) ---
  // The Node Event's message: "Allocate of <resource> [<devices>] refused: <why>[ (and N more
  // refusals for this reason since the last event)]".
  static std::string Message(const std::string& resource, const std::vector<std::string>& ids,
                             const std::string& why, uint64_t suppressed);
  // The devices, memory units (core/memshare.h IDs) as "<GPU>: <n> units", others by ID; bounded.
  static std::string Devices(const std::vector<std::string>& ids);
  // The Pod Event's message: "Allocate of <resource> [<devices>] for container <c> refused:
  // <why>..." (several containers of the pod that fit: "for one of containers a, b").
  static std::string PodMessage(const RefusalFacts& f, const std::vector<std::string>& containers);
  // The Node Event's message with why no pod was named: "...; pod not identified: <because>".
  static std::string NodeMessage(const RefusalFacts& f, const std::string& because);
  // <because> for the candidates found (none or several).
  static std::string Candidates(const RefusalFacts& f, const std::string& node,
                                const std::vector<attribution::PodCandidate>& pods,
                                const std::vector<attribution::PodMatch>& matches);

 private:
  struct PerReason {
    int64_t last_ms = -1;
    uint64_t suppressed = 0;
  };
  void Run() GPUSHARE_EXCLUDES(mu_);
  void Emit(const RefusalFacts& f, bool lookup) GPUSHARE_EXCLUDES(mu_);
  void Count(uint64_t AllocateEventsStats::*field) GPUSHARE_EXCLUDES(mu_);

  std::shared_ptr<kube::EventRecorder> recorder_;
  const AllocateEventsOptions options_;
  const std::shared_ptr<Clock> clock_;
  kube::Cancellation cancel_;
  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::string, PerReason> reasons_ GPUSHARE_GUARDED_BY(mu_);
  std::deque<RefusalFacts> queue_ GPUSHARE_GUARDED_BY(mu_);
  size_t in_flight_ GPUSHARE_GUARDED_BY(mu_) = 0;
  bool stopping_ GPUSHARE_GUARDED_BY(mu_) = false;
  AllocateEventsStats stats_ GPUSHARE_GUARDED_BY(mu_);
  std::thread thread_;  // only with options_.pods
};

}  // namespace gpushare::node
