// Informer<T>: a local, always-current cache of one kind of object (pods, nodes), kept by
// listing once and then watching from the list's resourceVersion, with event handlers.
//
// The loop follows client-go's reflector:
//   1. LIST (paged, resourceVersion unset: a consistent read), replace the cache, and on the
//      first success mark the informer synced (on_synced runs once, after the handlers have
//      seen every listed object, so a component can report ready only once its cache is
//      rebuilt);
//   2. WATCH from the list's resourceVersion with allowWatchBookmarks=true and a randomised
//      timeoutSeconds; every event (and every BOOKMARK) advances the resourceVersion, so a
//      watch that ends normally is re-opened from where it stopped, without a relist;
//   3. "410 Gone" / "Expired" (as an HTTP 410 or as an ERROR event carrying a 410 Status)
//      means the resourceVersion fell out of the server's history: relist from scratch. The
//      relist is diffed against the cache, so handlers see adds, updates and deletes for what
//      changed while the watch was down (deletes carry the last known state);
//   4. any other error (HTTP 5xx, a dropped connection, a refused connection) waits a jittered
//      exponential backoff (kube/rate_limiter.h) before retrying; a success resets it.
// Stop() returns promptly even while a watch is blocked waiting for events: the informer's
// requests are cancelled (kube/client.h Cancellation).
//
// Handlers run on the informer's own thread, one at a time, in event order, after the cache
// has been updated (so Get() inside a handler sees the new state). They must not block for
// long and must not call Stop(). The cache may be read from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/sync.h"
#include "core/status.h"
#include "kube/client.h"
#include "kube/objects.h"
#include "kube/rate_limiter.h"

namespace gpushare::kube {

struct InformerOptions {
  std::string namespace_;  // "" watches all namespaces (ignored for cluster-scoped kinds)
  std::string label_selector;
  std::string field_selector;       // e.g. "spec.nodeName=node-1"
  int64_t page_size = 500;          // list page size; 0: one reply
  int watch_timeout_seconds = 300;  // each watch asks for a random timeout in [t, 2t)
  bool allow_bookmarks = true;
  BackoffOptions backoff;  // initial 800 ms, max 30 s, factor 2, jitter 0.5
  uint64_t seed = 0;       // for the jitter; 0: from std::random_device
  // Receives one structured line per notable event (errors, relists). Default: stderr.
  std::function<void(const std::string& line)> log;
};

template <typename T>
struct InformerHandlers {
  std::function<void(const T& obj)> on_add;
  std::function<void(const T& old_obj, const T& new_obj)> on_update;
  std::function<void(const T& last_known)> on_delete;
  std::function<void()> on_synced;  // once, after the first list has been applied
};

struct InformerStats {
  uint64_t lists = 0;                  // list attempts (successful or not)
  uint64_t watches = 0;                // watch attempts
  uint64_t relists_after_expired = 0;  // 410 Gone / Expired seen
  uint64_t errors = 0;                 // failed lists and watches (410 included)
  uint64_t events = 0;                 // ADDED/MODIFIED/DELETED applied
  uint64_t bookmarks = 0;
  uint64_t decode_errors = 0;    // objects skipped because they did not decode
  std::string resource_version;  // where the next watch starts
  std::string last_error;
  std::vector<std::chrono::milliseconds> backoff_delays;  // the most recent ones, oldest first
};

namespace detail {

// The type-independent list-then-watch loop behind Informer<T>.
class ListWatchLoop {
 public:
  class Sink {
   public:
    virtual ~Sink() = default;
    // A fresh list: the complete current set of objects.
    virtual void Replace(std::vector<nlohmann::json>&& items) = 0;
    // One ADDED, MODIFIED or DELETED event.
    virtual void Apply(WatchEventType type, nlohmann::json&& object) = 0;
    virtual void Synced() = 0;
  };

  ListWatchLoop(std::shared_ptr<Client> client, ResourceRef resource, InformerOptions options,
                Sink* sink);
  ~ListWatchLoop();

  Status Start();
  void Stop();
  bool synced() const;
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  InformerStats stats() const;
  void Log(const std::string& line) const;

 private:
  void Run();
  bool SleepBackoff(Backoff* backoff, const Status& why);
  void RecordError(const Status& s, std::string_view what);

  std::shared_ptr<Client> client_;
  ResourceRef resource_;
  InformerOptions options_;
  Sink* sink_;
  Cancellation cancel_;
  std::thread thread_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool synced_ GPUSHARE_GUARDED_BY(mu_) = false;
  InformerStats stats_ GPUSHARE_GUARDED_BY(mu_);
};

}  // namespace detail

template <typename T>
class Informer : private detail::ListWatchLoop::Sink {
 public:
  using Traits = ObjectTraits<T>;

  explicit Informer(std::shared_ptr<Client> client, InformerOptions options = {})
      : loop_(std::move(client),
              ResourceRef{Traits::kResource, Traits::kNamespaced, Traits::kGroupVersion},
              std::move(options), this) {}
  ~Informer() override { loop_.Stop(); }
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Set before Start().
  void SetHandlers(InformerHandlers<T> handlers) { handlers_ = std::move(handlers); }

  // Starts the background thread. An informer runs once: Start after Stop is an error.
  Status Start() { return loop_.Start(); }
  void Stop() { loop_.Stop(); }

  bool HasSynced() const { return loop_.synced(); }
  // Waits until synced; false on timeout or when stopped first.
  bool WaitForSync(std::chrono::milliseconds timeout) const { return loop_.WaitForSync(timeout); }

  // "namespace/name" for namespaced kinds, "name" for cluster-scoped ones.
  static std::string KeyOf(const T& obj) {
    if constexpr (Traits::kNamespaced) {
      return obj.metadata.namespace_ + "/" + obj.metadata.name;
    } else {
      return obj.metadata.name;
    }
  }

  std::shared_ptr<const T> Get(const std::string& key) const {
    ReaderLock lock(&mu_);
    auto it = cache_.find(key);
    return it == cache_.end() ? nullptr : it->second;
  }

  std::vector<std::shared_ptr<const T>> List() const {
    ReaderLock lock(&mu_);
    std::vector<std::shared_ptr<const T>> out;
    out.reserve(cache_.size());
    for (const auto& [k, v] : cache_) out.push_back(v);
    return out;
  }

  size_t size() const {
    ReaderLock lock(&mu_);
    return cache_.size();
  }

  InformerStats stats() const {
    InformerStats s = loop_.stats();
    s.decode_errors = decode_errors_.load();
    return s;
  }

 private:
  using Ptr = std::shared_ptr<const T>;

  Result<Ptr> Decode(const nlohmann::json& j) {
    Result<T> v = Traits::Decode(j);
    if (!v.ok()) {
      decode_errors_.fetch_add(1);
      loop_.Log("event=decode_error error=\"" + v.status().message() + "\"");
      return v.status();
    }
    return Ptr(std::make_shared<const T>(std::move(*v)));
  }

  void Replace(std::vector<nlohmann::json>&& items) override {
    std::unordered_map<std::string, Ptr> fresh;
    for (const nlohmann::json& j : items) {
      Result<Ptr> p = Decode(j);
      if (p.ok()) fresh[KeyOf(**p)] = *p;
    }
    std::vector<Ptr> added, deleted;
    std::vector<std::pair<Ptr, Ptr>> updated;
    {
      WriterLock lock(&mu_);
      for (const auto& [k, v] : fresh) {
        auto it = cache_.find(k);
        if (it == cache_.end()) {
          added.push_back(v);
        } else if (it->second->metadata.resource_version != v->metadata.resource_version ||
                   it->second->metadata.uid != v->metadata.uid) {
          updated.emplace_back(it->second, v);
        }
      }
      for (const auto& [k, v] : cache_) {
        if (fresh.find(k) == fresh.end()) deleted.push_back(v);
      }
      cache_.swap(fresh);
    }
    for (const Ptr& p : deleted) {
      if (handlers_.on_delete) handlers_.on_delete(*p);
    }
    for (const auto& [o, n] : updated) {
      if (handlers_.on_update) handlers_.on_update(*o, *n);
    }
    for (const Ptr& p : added) {
      if (handlers_.on_add) handlers_.on_add(*p);
    }
  }

  void Apply(WatchEventType type, nlohmann::json&& object) override {
    Result<Ptr> p = Decode(object);
    if (!p.ok()) return;
    std::string key = KeyOf(**p);
    Ptr old;
    {
      WriterLock lock(&mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) old = it->second;
      if (type == WatchEventType::kDeleted) {
        if (it != cache_.end()) cache_.erase(it);
      } else {
        cache_[key] = *p;
      }
    }
    if (type == WatchEventType::kDeleted) {
      if (old && handlers_.on_delete) handlers_.on_delete(**p);
    } else if (old) {
      if (handlers_.on_update) handlers_.on_update(*old, **p);
    } else if (handlers_.on_add) {
      handlers_.on_add(**p);
    }
  }

  void Synced() override {
    if (handlers_.on_synced) handlers_.on_synced();
  }

  mutable SharedMutex mu_;
  std::unordered_map<std::string, Ptr> cache_ GPUSHARE_GUARDED_BY(mu_);
  InformerHandlers<T> handlers_;
  std::atomic<uint64_t> decode_errors_{0};
  detail::ListWatchLoop loop_;  // last: stopped (by ~Informer) before the members above go
};

using PodInformer = Informer<Pod>;
using NodeInformer = Informer<Node>;
using PodDisruptionBudgetInformer = Informer<PodDisruptionBudget>;

}  // namespace gpushare::kube
