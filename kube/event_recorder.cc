#include "kube/event_recorder.h"

#include <algorithm>
#include <cstdio>

#include "kube/errors.h"
#include "kube/timestamps.h"

namespace gpushare::kube {

template <typename V>
V* EventRecorder::Lru<V>::Find(const std::string& key) {
  auto it = map.find(key);
  if (it == map.end()) return nullptr;
  order.splice(order.end(), order, it->second.at);
  return &it->second.value;
}

template <typename V>
V& EventRecorder::Lru<V>::Put(const std::string& key, size_t limit) {
  if (V* v = Find(key)) return *v;
  while (!order.empty() && map.size() >= std::max<size_t>(limit, 1)) {
    map.erase(order.front());
    order.pop_front();
  }
  order.push_back(key);
  Entry& e = map[key];
  e.at = std::prev(order.end());
  return e.value;
}

namespace {

constexpr std::string_view kCombined = "(combined from similar events): ";

std::string ObjectKey(const ObjectReference& o) {
  return o.api_version + "\x1f" + o.kind + "\x1f" + o.namespace_ + "\x1f" + o.name + "\x1f" + o.uid;
}

}  // namespace

EventRecorder::EventRecorder(std::shared_ptr<Client> client, EventRecorderOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  if (!options_.clock) options_.clock = RealClock();
  thread_ = std::thread([this] { Run(); });
}

EventRecorder::~EventRecorder() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void EventRecorder::Record(const ObjectReference& object, std::string type, std::string reason,
                           std::string message) {
  const auto now = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(options_.clock->UnixNs())));
  MutexLock lock(&mu_);
  if (stopping_) {
    ++stats_.dropped;
    return;
  }
  const std::string source = options_.component + "\x1f" + options_.host + "\x1f";
  const std::string object_key = source + ObjectKey(object);
  // 1. Aggregation of similar events (differing only in the message).
  const std::string similar_key = object_key + "\x1f" + type + "\x1f" + reason;
  std::string key = similar_key + "\x1f" + message;
  Similar& similar = similar_.Put(similar_key, options_.dedupe_entries);
  if (similar.messages.empty() || now - similar.first > options_.aggregate_window) {
    similar.messages.clear();
    similar.first = now;
  }
  if (similar.messages.size() < options_.aggregate_max_events) similar.messages.insert(message);
  if (similar.messages.size() >= options_.aggregate_max_events) {
    message = std::string(kCombined) + message;
    key = similar_key;  // every later similar event folds into the aggregate
    ++stats_.aggregated;
  }
  // 3. The spam filter (before queueing: a filtered event costs no API call and no memory).
  Bucket& bucket = buckets_.Put(object_key, options_.dedupe_entries);
  if (bucket.last.time_since_epoch().count() == 0) {
    bucket.tokens = options_.spam_burst;
  } else if (now > bucket.last) {
    const double refill = std::chrono::duration<double>(now - bucket.last) /
                          std::chrono::duration<double>(options_.spam_refill);
    bucket.tokens = std::min(options_.spam_burst, bucket.tokens + refill);
  }
  bucket.last = std::max(bucket.last, now);
  if (bucket.tokens < 1) {
    ++stats_.filtered;
    return;
  }
  bucket.tokens -= 1;
  if (queue_.size() >= options_.queue_limit) {
    ++stats_.dropped;
    return;
  }
  queue_.push_back(
      {object, std::move(type), std::move(reason), std::move(message), now, std::move(key)});
  cv_.NotifyAll();
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
  MutexLock lock(&mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!queue_.empty() || in_flight_ != 0) {
    if (!cv_.WaitUntil(&mu_, deadline)) return queue_.empty() && in_flight_ == 0;
  }
  return true;
}

EventRecorderStats EventRecorder::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

void EventRecorder::Run() {
  mu_.Lock();
  for (;;) {
    while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
    if (queue_.empty()) break;  // stopping and drained
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    ++in_flight_;
    mu_.Unlock();
    Send(p);
    mu_.Lock();
    --in_flight_;
    cv_.NotifyAll();
  }
  mu_.Unlock();
}

void EventRecorder::Send(const Pending& p) {
  // 2. Deduplication: a repeat patches the Event it repeats.
  const std::string& key = p.key;
  std::string now = FormatTimestamp(p.when);
  std::optional<Seen> prior;
  {
    MutexLock lock(&mu_);
    auto it = seen_.find(key);
    if (it != seen_.end() && p.when - it->second.last < options_.dedupe_window) prior = it->second;
  }
  if (prior) {
    int32_t count = prior->count + 1;
    Result<nlohmann::json> r = client_->MergePatch(
        kEvents, prior->namespace_, prior->name,
        nlohmann::json{{"count", count}, {"lastTimestamp", now}, {"message", p.message}});
    if (r.ok()) {
      MutexLock lock(&mu_);
      auto it = seen_.find(key);
      if (it != seen_.end()) {
        it->second.count = count;
        it->second.last = p.when;
      }
      ++stats_.updated;
      return;
    }
    if (!IsNotFound(r.status())) {
      MutexLock lock(&mu_);
      ++stats_.failed;
      return;
    }
    // The Event was deleted (events expire after an hour by default): create a new one.
  }
  Event e;
  e.metadata.namespace_ = p.object.namespace_.empty() ? "default" : p.object.namespace_;
  // client-go's "<name>.<hex UnixNano>", made unique: two events in the same nanosecond (a
  // coarse clock, a burst) would otherwise collide (409 AlreadyExists).
  int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(p.when.time_since_epoch()).count();
  {
    MutexLock lock(&mu_);
    ns = std::max(ns, last_name_ns_ + 1);
    last_name_ns_ = ns;
  }
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".%llx", static_cast<unsigned long long>(ns));
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
  MutexLock lock(&mu_);
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
