// EventRecorder: posts core/v1 Events about pods and nodes, so operators see gpushare's
// refusals and failures in `kubectl describe` and `kubectl get events`.
//
// Recording never blocks the caller: events go to a bounded queue that a background thread
// sends (a full queue drops the event and counts it). Before queueing, each event goes through
// the same three steps as client-go's EventCorrelator (tools/record/events_cache.go):
//   1. aggregation: events that differ only in their message (same object, type and reason)
//      are counted per `aggregate_window`; from the `aggregate_max_events`-th distinct message
//      on, they become ONE event whose message is "(combined from similar events): <latest>";
//   2. deduplication: a repeat of the same event (same object, type, reason and message, or
//      the same aggregate) within `dedupe_window` does not create a new object: the existing
//      Event's count, lastTimestamp and message are merge-patched (and if it was
//      garbage-collected meanwhile, a new one is created);
//   3. a spam filter per object (source and involved object): a token bucket of `spam_burst`
//      events refilled at one per `spam_refill`; an event without a token is dropped and
//      counted (`filtered`), creations and count updates alike.
// Event names follow client-go: "<object name>.<hex nanoseconds>"; events about
// cluster-scoped objects (nodes) go to the "default" namespace.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/sync.h"
#include "kube/client.h"
#include "kube/objects.h"

namespace gpushare::kube {

struct EventRecorderOptions {
  std::string component = "gpushare";  // source.component / reportingComponent
  std::string host;                    // source.host (the node name for the node agent)
  size_t queue_limit = 1000;
  std::chrono::seconds dedupe_window{600};
  size_t dedupe_entries = 4096;  // remembered events, aggregates and objects (oldest forgotten)
  // client-go's defaults: 10 distinct messages in 10 minutes aggregate; 25 events per object at
  // once, then one per 5 minutes.
  size_t aggregate_max_events = 10;
  std::chrono::seconds aggregate_window{600};
  double spam_burst = 25;
  std::chrono::seconds spam_refill{300};
  // Its wall time (UnixNs) stamps a recorded event (tests pass a simulated clock).
  std::shared_ptr<Clock> clock = RealClock();
};

struct EventRecorderStats {
  uint64_t created = 0;     // new Event objects
  uint64_t updated = 0;     // repeats folded into an existing Event (count + 1)
  uint64_t dropped = 0;     // queue full
  uint64_t filtered = 0;    // over the per-object rate (spam filter)
  uint64_t aggregated = 0;  // recorded as "(combined from similar events): ..."
  uint64_t failed = 0;      // the API refused or was unreachable
};

class EventRecorder {
 public:
  EventRecorder(std::shared_ptr<Client> client, EventRecorderOptions options);
  ~EventRecorder();  // sends what is queued (bounded by the client's timeouts), then stops
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // type: "Normal" or "Warning"; reason: UpperCamelCase ("FailedAllocate").
  void Record(const ObjectReference& object, std::string type, std::string reason,
              std::string message);
  void RecordPod(const Pod& pod, std::string type, std::string reason, std::string message);
  void RecordNode(const Node& node, std::string type, std::string reason, std::string message);

  // Waits until everything queued so far was sent (for tests and shutdown).
  bool Flush(std::chrono::milliseconds timeout);
  EventRecorderStats stats() const;

 private:
  struct Pending {
    ObjectReference object;
    std::string type, reason, message;
    std::chrono::system_clock::time_point when;
    std::string key;  // what repeats share (the message's, or the aggregate's)
  };
  // A map with least-recently-used eviction (client-go's lru caches).
  template <typename V>
  struct Lru {
    struct Entry {
      V value;
      std::list<std::string>::iterator at;
    };
    std::map<std::string, Entry> map;
    std::list<std::string> order;  // most recent at the back
    V* Find(const std::string& key);
    V& Put(const std::string& key, size_t limit);
  };
  struct Similar {  // aggregation: the distinct messages of one object/type/reason
    std::chrono::system_clock::time_point first;
    std::set<std::string> messages;
  };
  struct Bucket {  // spam filter: tokens of one object
    double tokens = 0;
    std::chrono::system_clock::time_point last;
  };
  struct Seen {
    std::string name, namespace_;
    int32_t count = 0;
    std::chrono::system_clock::time_point last;
    std::list<std::string>::iterator lru;
  };
  void Run() GPUSHARE_EXCLUDES(mu_);
  void Send(const Pending& p) GPUSHARE_EXCLUDES(mu_);

  std::shared_ptr<Client> client_;
  EventRecorderOptions options_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Pending> queue_ GPUSHARE_GUARDED_BY(mu_);
  bool stopping_ GPUSHARE_GUARDED_BY(mu_) = false;
  size_t in_flight_ GPUSHARE_GUARDED_BY(mu_) = 0;
  std::map<std::string, Seen> seen_ GPUSHARE_GUARDED_BY(mu_);
  std::list<std::string> lru_ GPUSHARE_GUARDED_BY(mu_);  // most recent at the back
  Lru<Similar> similar_ GPUSHARE_GUARDED_BY(mu_);
  int64_t last_name_ns_ GPUSHARE_GUARDED_BY(mu_) = 0;  // the suffix of the last Event name
  Lru<Bucket> buckets_ GPUSHARE_GUARDED_BY(mu_);
  EventRecorderStats stats_ GPUSHARE_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gpushare::kube
