// EventRecorder: posts core/v1 Events about pods and nodes, so operators see gpushare's
// refusals and failures in `kubectl describe` and `kubectl get events`.
//
// Recording never blocks the caller: events go to a bounded queue that a background thread
// sends (a full queue drops the event and counts it). Like client-go's recorder, a repeat of
// the same event (same object, type, reason and message) within `dedupe_window` does not
// create a new object: the existing Event's count and lastTimestamp are merge-patched instead
// (and if it was garbage-collected meanwhile, a new one is created). Event names follow
// client-go: "<object name>.<hex nanoseconds>"; events about cluster-scoped objects (nodes) go
// to the "default" namespace.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/objects.h"

namespace gpushare::kube {

struct EventRecorderOptions {
  std::string component = "gpushare";  // source.component / reportingComponent
  std::string host;                    // source.host (the node name for the node agent)
  size_t queue_limit = 1000;
  std::chrono::seconds dedupe_window{600};
  size_t dedupe_entries = 4096;  // remembered events (oldest forgotten first)
};

struct EventRecorderStats {
  uint64_t created = 0;  // new Event objects
  uint64_t updated = 0;  // repeats folded into an existing Event (count + 1)
  uint64_t dropped = 0;  // queue full
  uint64_t failed = 0;   // the API refused or was unreachable
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
  };
  struct Seen {
    std::string name, namespace_;
    int32_t count = 0;
    std::chrono::system_clock::time_point last;
    std::list<std::string>::iterator lru;
  };
  void Run();
  void Send(const Pending& p);

  std::shared_ptr<Client> client_;
  EventRecorderOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  size_t in_flight_ = 0;
  std::map<std::string, Seen> seen_;
  std::list<std::string> lru_;  // most recent at the back
  EventRecorderStats stats_;
  std::thread thread_;
};

}  // namespace gpushare::kube
