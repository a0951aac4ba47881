#include "kube/event_recorder.h"

#include <cstdio>

#include "kube/errors.h"
#include "kube/timestamps.h"

namespace gpushare::kube {

EventRecorder::EventRecorder(std::shared_ptr<Client> client, EventRecorderOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  thread_ = std::thread([this] { Run(); });
}

EventRecorder::~EventRecorder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EventRecorder::Record(const ObjectReference& object, std::string type, std::string reason,
                           std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || queue_.size() >= options_.queue_limit) {
    ++stats_.dropped;
    return;
  }
  queue_.push_back({object, std::move(type), std::move(reason), std::move(message),
                    std::chrono::system_clock::now()});
  cv_.notify_all();
}

void EventRecorder::RecordPod(const Pod& pod, std::string type, std::string reason,
                              std::string message) {
  ObjectReference ref{"v1",
                      "Pod",
                      pod.metadata.namespace_,
                      pod.metadata.name,
                      pod.metadata.uid,
                      pod.metadata.resource_version,
                      ""};
  Record(ref, std::move(type), std::move(reason), std::move(message));
}

void EventRecorder::RecordNode(const Node& node, std::string type, std::string reason,
                               std::string message) {
  // Node events reference the node by name as its UID, as kubelet does.
  ObjectReference ref{"v1",
                      "Node",
                      "",
                      node.metadata.name,
                      node.metadata.uid.empty() ? node.metadata.name : node.metadata.uid,
                      "",
                      ""};
  Record(ref, std::move(type), std::move(reason), std::move(message));
}

bool EventRecorder::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return queue_.empty() && in_flight_ == 0; });
}

EventRecorderStats EventRecorder::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void EventRecorder::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping and drained
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    ++in_flight_;
    lock.unlock();
    Send(p);
    lock.lock();
    --in_flight_;
    cv_.notify_all();
  }
}

void EventRecorder::Send(const Pending& p) {
  std::string key = p.object.kind + "/" + p.object.namespace_ + "/" + p.object.name + "/" +
                    p.object.uid + "/" + p.type + "/" + p.reason + "/" + p.message;
  std::string now = FormatTimestamp(p.when);
  std::optional<Seen> prior;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = seen_.find(key);
    if (it != seen_.end() && p.when - it->second.last < options_.dedupe_window) prior = it->second;
  }
  if (prior) {
    int32_t count = prior->count + 1;
    Result<nlohmann::json> r =
        client_->MergePatch(kEvents, prior->namespace_, prior->name,
                            nlohmann::json{{"count", count}, {"lastTimestamp", now}});
    if (r.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = seen_.find(key);
      if (it != seen_.end()) {
        it->second.count = count;
        it->second.last = p.when;
      }
      ++stats_.updated;
      return;
    }
    if (!IsNotFound(r.status())) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.failed;
      return;
    }
    // The Event was deleted (events expire after an hour by default): create a new one.
  }
  Event e;
  e.metadata.namespace_ = p.object.namespace_.empty() ? "default" : p.object.namespace_;
  char suffix[32];
  std::snprintf(
      suffix, sizeof(suffix), ".%llx",
      static_cast<unsigned long long>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(p.when.time_since_epoch()).count()));
  e.metadata.name = p.object.name + suffix;
  e.involved_object = p.object;
  e.reason = p.reason;
  e.message = p.message;
  e.type = p.type;
  e.source_component = options_.component;
  e.source_host = options_.host;
  e.reporting_instance = options_.host;
  e.first_timestamp = now;
  e.last_timestamp = now;
  e.count = 1;
  Result<Event> created = client_->CreateEvent(e);
  std::lock_guard<std::mutex> lock(mu_);
  if (!created.ok()) {
    ++stats_.failed;
    return;
  }
  ++stats_.created;
  auto it = seen_.find(key);
  if (it != seen_.end()) {
    lru_.erase(it->second.lru);
    seen_.erase(it);
  }
  lru_.push_back(key);
  seen_[key] = Seen{e.metadata.name, e.metadata.namespace_, 1, p.when, std::prev(lru_.end())};
  while (seen_.size() > options_.dedupe_entries && !lru_.empty()) {
    seen_.erase(lru_.front());
    lru_.pop_front();
  }
}

}  // namespace gpushare::kube
