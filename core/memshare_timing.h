// WorkerSchedule: when memory mode's worker (node/memshare_service.cc) publishes the node's
// GPUs and lists kubelet's PodResources, as a pure state machine: events and the time in
// (milliseconds on any monotonic clock), the step due now and the next wake-up out. The worker
// carries out the step (an API patch, a List) and reports its outcome.
//
//   - Publish: due after every plan or health change and whenever the Node object stops saying
//     what we published; a failure is retried after 500 ms, doubling to 30 s.
//   - Reconcile (a PodResources List and the patches it calls for): every reconcile_interval,
//     after_allocate after an Allocate, at once when GetPreferredAllocation waits for the first
//     List; never two Lists within min_list_interval (kubelet allows 100/s, burst 10); every
//     not_synced_ms while the pod cache has not synced; retry_soon_ms after a round that left
//     work (a pod kubelet holds that the cache does not have yet, a failed patch); a failed
//     List backs off, short (100 ms doubling to 2 s) when kubelet's rate limit refused it,
//     long (500 ms doubling to 30 s) otherwise.
#pragma once

#include <cstdint>
#include <optional>

namespace gpushare::memshare {

struct ScheduleTiming {
  int64_t reconcile_interval_ms = 10000;
  int64_t after_allocate_ms = 50;
  int64_t min_list_interval_ms = 50;
  int64_t not_synced_ms = 100;
  int64_t retry_soon_ms = 200;
};

enum class WorkerStep {
  kWait,       // nothing due before NextWakeMs()
  kPublish,    // publish the node's GPUs; then report Published()
  kReconcile,  // a reconcile round; report NotSynced(), or ask MayList() and then
               // ListFailed()/Reconciled()
};

class WorkerSchedule {
 public:
  // The first reconcile is due at `now`.
  WorkerSchedule(ScheduleTiming timing, int64_t now) : t_(timing), reconcile_at_(now) {}

  // ---- events -----------------------------------------------------------------------------
  // A new plan (or health): publish (the publish backoff is forgotten, a pending retry time
  // stands) and reconcile at once.
  void PlanChanged(int64_t now);
  // The Node object does not say what we publish: publish. Returns false when it was due already.
  bool NodeDiffers();
  // GetPreferredAllocation waits for a List: reconcile at once.
  void ListWanted(int64_t now) { Rearm(now); }
  // Kubelet allocated units: reconcile within after_allocate.
  void Allocated(int64_t now) { Rearm(now + t_.after_allocate_ms); }

  // ---- decisions --------------------------------------------------------------------------
  // The step due at `now` (publish first). kPublish clears the publish; kReconcile arms the next
  // periodic round (events and outcomes may bring it earlier).
  WorkerStep Next(int64_t now);
  // When Next will return a step without an event.
  int64_t NextWakeMs() const;

  // ---- outcomes ---------------------------------------------------------------------------
  void Published(bool ok, int64_t now);
  // The reconcile round found the pod cache unsynced.
  void NotSynced(int64_t now) { Rearm(now + t_.not_synced_ms); }
  // Whether the round may List now (pacing); when not, the round is moved to when it may.
  bool MayList(int64_t now);
  void ListFailed(bool rate_limited, int64_t now);
  // The round ended; `retry_soon`: it left work for the next List.
  void Reconciled(bool retry_soon, int64_t now);

  int64_t publish_backoff_ms() const { return publish_backoff_ms_; }
  int64_t list_backoff_ms() const { return list_backoff_ms_; }
  bool publish_due() const { return publish_due_; }

 private:
  // The next reconcile, not later than `at`.
  void Rearm(int64_t at);

  ScheduleTiming t_;
  bool publish_due_ = false;
  int64_t publish_backoff_ms_ = 0;
  int64_t publish_retry_at_ = 0;
  int64_t reconcile_at_;
  std::optional<int64_t> last_list_;
  int64_t list_backoff_ms_ = 0;
};

}  // namespace gpushare::memshare
