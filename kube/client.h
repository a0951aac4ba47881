// Client: a thread-safe REST client for the Kubernetes API (core/v1 pods, nodes, events and the
// pods/binding subresource), over libcurl, with JSON bodies.
//
// What it does for every request: waits for a token from the client-side rate limiter (QPS and
// burst, as client-go), sends the bearer token (re-reading a rotated token file, and retrying
// once after a 401 if the file changed), verifies TLS with the configured CA (or skips
// verification when the config says so), presents a client certificate when configured,
// enforces a timeout and a bound on the response size, and turns every failure into a Status
// (kube/errors.h: 404 -> kNotFound, 409 -> kAborted, 410 -> IsExpired, ...).
//
// Requests may run concurrently from any number of threads. Unary requests (everything but
// watches) share one set of connections, driven by one thread (kube/http_mux.h): over TLS the
// API server speaks HTTP/2, and every request in flight is a stream of one connection, as with
// client-go, instead of a connection and a TLS handshake each. A watch holds a connection of its
// own (curl handles from a small pool) for as long as it streams. A request given a Cancellation
// returns promptly (kUnavailable, "cancelled") once Cancel() is called, even while a watch is
// blocked waiting for the next event.
//
// Watch() streams the API's newline-delimited watch events (ADDED, MODIFIED, DELETED, BOOKMARK,
// ERROR) to a handler until the server ends the stream (timeoutSeconds), the handler returns
// false, or the request is cancelled. Informers (kube/informer.h) build list+watch caches on
// top of it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/sync.h"
#include "core/object_key.h"
#include "core/status.h"
#include "kube/config.h"
#include "kube/objects.h"
#include "kube/rate_limiter.h"
#include "kube/token.h"

namespace gpushare::kube {

struct ClientOptions {
  double qps = 50;  // requests per second; <= 0: unlimited
  int burst = 100;
  std::chrono::milliseconds request_timeout{30000};  // whole request (not watches)
  std::chrono::milliseconds connect_timeout{10000};
  size_t max_response_bytes = 256u << 20;    // a larger body fails with kResourceExhausted
  size_t max_watch_event_bytes = 16u << 20;  // one watch event line
  size_t max_idle_connections = 16;  // pooled curl handles (and watch connections) kept idle
  // Unary requests on the shared connections (HttpMux). false: each on a pooled handle with a
  // connection of its own (as before HTTP/2 multiplexing; kept for comparison in bench/).
  bool share_connections = true;
  std::string user_agent = "gpushare/0.1";
  // Test hooks for the rate limiter: the clock it reads and how the client waits.
  std::shared_ptr<Clock> clock = RealClock();
  std::function<void(std::chrono::nanoseconds)> sleep_for;
};

// A flag that aborts the requests it was given to, from another thread.
class Cancellation {
 public:
  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // Sleeps for `d` or until cancelled; returns false when cancelled.
  bool SleepFor(std::chrono::nanoseconds d) const;

 private:
  friend class Client;
  void Register(void* multi) const;
  void Unregister(void* multi) const;

  std::atomic<bool> cancelled_{false};
  mutable Mutex mu_;
  mutable CondVar cv_;
  // What to wake, once per request in flight.
  mutable std::multiset<void*> active_ GPUSHARE_GUARDED_BY(mu_);
};

// Which collection a call addresses.
struct ResourceRef {
  std::string_view resource;  // "pods", "nodes", "events"
  bool namespaced = true;
  // "v1" (the core group, under /api) or "<group>/<version>" (under /apis).
  std::string_view group_version = "v1";
};
inline constexpr ResourceRef kPods{"pods", true};
inline constexpr ResourceRef kNodes{"nodes", false};
inline constexpr ResourceRef kEvents{"events", true};
inline constexpr ResourceRef kPodDisruptionBudgets{"poddisruptionbudgets", true, "policy/v1"};
inline constexpr ResourceRef kSecrets{"secrets", true};
inline constexpr ResourceRef kMutatingWebhookConfigurations{"mutatingwebhookconfigurations", false,
                                                            "admissionregistration.k8s.io/v1"};

struct ListOptions {
  std::string label_selector;          // "app=x,tier!=db"
  std::string field_selector;          // "spec.nodeName=node-1,status.phase=Pending"
  std::string resource_version;        // "" (most recent), "0" (any), or a version
  std::string resource_version_match;  // "", "NotOlderThan", "Exact"
  int64_t limit = 0;                   // page size; 0: everything in one reply
  std::string continue_token;          // for ListPage only
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // start after this version; "" or "0": current state as ADDED
  bool allow_bookmarks = true;
  int timeout_seconds = 300;  // the server ends the stream after this long; 0: server default
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct WatchEvent {
  WatchEventType type;
  nlohmann::json object;  // the object, or the Status object for kError
};
// Returns false to end the watch.
using WatchHandler = std::function<bool(WatchEvent&& event)>;

struct RawList {
  std::vector<nlohmann::json> items;
  std::string resource_version;  // the list's metadata.resourceVersion (watch from here)
};

struct PatchOptions {
  std::string subresource;  // "" or "status"
  // Optimistic concurrency: when set, the patch carries metadata.resourceVersion and the API
  // server rejects it with 409 (kAborted) if the object changed since that version.
  std::string resource_version;
  // When set, the patch carries metadata.uid and the API server refuses it if the object's UID
  // differs (the object was deleted and another created under its name): 422, "metadata.uid:
  // Invalid value: ...: field is immutable".
  std::string uid;

  // Only the object with this UID (a write for one pod that must not touch another created under
  // its name since).
  static PatchOptions IfUid(std::string uid) {
    PatchOptions o;
    o.uid = std::move(uid);
    return o;
  }
};

struct DeleteOptions {
  std::optional<int64_t> grace_period_seconds;
  std::string uid;  // a precondition: fail with 409 if the object's UID differs
};

// Annotation edits for a merge patch: a value sets the key, nullopt removes it.
using AnnotationChanges = std::map<std::string, std::optional<std::string>>;

struct HttpRequest {
  std::string method = "GET";
  std::string path_and_query;  // "/api/v1/namespaces/ns/pods?limit=5"
  std::string body;
  std::string content_type;  // set when there is a body
};

struct HttpResponse {
  long code = 0;
  std::string body;
};

struct ClientStats {
  uint64_t requests = 0;          // HTTP requests sent (including retries and watches)
  uint64_t throttled = 0;         // requests that had to wait for the rate limiter
  uint64_t throttle_wait_ns = 0;  // total time spent waiting for it
  uint64_t token_reloads = 0;     // 401s that led to a re-read token and a retry
  uint64_t watch_events = 0;
  uint64_t connections = 0;  // new connections (TCP, and TLS where used) the requests opened
};

namespace detail {
struct TlsIdentity;  // the parsed cluster CA and client certificate (client.cc)
class HttpMux;       // the shared multi handle of unary requests (http_mux.h)
}  // namespace detail

class Client {
 public:
  static Result<std::shared_ptr<Client>> Create(ClientConfig config, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientConfig& config() const { return config_; }
  ClientStats stats() const;

  // One request; any HTTP code is a success here (transport failures are errors).
  Result<HttpResponse> Do(const HttpRequest& request, const Cancellation* cancel = nullptr);

  // --- generic calls on raw JSON ---
  Result<nlohmann::json> Get(ResourceRef r, std::string_view ns, std::string_view name,
                             std::string_view subresource = "");
  // One page of a list (the raw List object).
  Result<nlohmann::json> ListPage(ResourceRef r, std::string_view ns, const ListOptions& options,
                                  const Cancellation* cancel = nullptr);
  // The whole list, following `continue` tokens when options.limit > 0. If a continue token
  // expires (410) mid-way, the list restarts once without paging, as client-go does.
  Result<RawList> List(ResourceRef r, std::string_view ns, const ListOptions& options,
                       const Cancellation* cancel = nullptr);
  // Streams watch events to `handler`. OK when the server ended the stream or the handler
  // returned false; an error for HTTP errors (410 -> IsExpired), broken streams, cancellation.
  // ERROR events are delivered to the handler, not turned into a returned error.
  Status Watch(ResourceRef r, std::string_view ns, const WatchOptions& options,
               const WatchHandler& handler, const Cancellation* cancel = nullptr);
  Result<nlohmann::json> Create(ResourceRef r, std::string_view ns, const nlohmann::json& body);
  // application/merge-patch+json (RFC 7386: null removes a key).
  Result<nlohmann::json> MergePatch(ResourceRef r, std::string_view ns, std::string_view name,
                                    nlohmann::json patch, const PatchOptions& options = {});
  Status Delete(ResourceRef r, std::string_view ns, std::string_view name,
                const DeleteOptions& options = {});
  // PUT: replaces the object. When `object` carries metadata.resourceVersion the API server
  // refuses a stale one with 409 (kAborted): re-read and decide again.
  Result<nlohmann::json> Update(ResourceRef r, std::string_view ns, std::string_view name,
                                const nlohmann::json& object);
  // application/json-patch+json (RFC 6902): `ops` is the array of operations ("test" ops act
  // as preconditions: a failed one is 422 Invalid).
  Result<nlohmann::json> JsonPatch(ResourceRef r, std::string_view ns, std::string_view name,
                                   const nlohmann::json& ops);

  // --- typed calls ---
  Result<Pod> GetPod(std::string_view ns, std::string_view name);
  Result<Node> GetNode(std::string_view name);
  Result<std::vector<Pod>> ListPods(std::string_view ns, const ListOptions& options = {});
  Result<std::vector<Node>> ListNodes(const ListOptions& options = {});
  Result<Pod> PatchPodAnnotations(std::string_view ns, std::string_view name,
                                  const AnnotationChanges& changes,
                                  const PatchOptions& options = {});
  Result<Pod> PatchPodAnnotations(const ObjectKey& pod, const AnnotationChanges& changes,
                                  const PatchOptions& options = {}) {
    return PatchPodAnnotations(pod.namespace_, pod.name, changes, options);
  }
  // Merge-patches pods/{name}/status with {"status": status_patch}.
  Result<Pod> PatchPodStatus(std::string_view ns, std::string_view name,
                             const nlohmann::json& status_patch, const PatchOptions& options = {});
  Result<Node> PatchNodeAnnotations(std::string_view name, const AnnotationChanges& changes,
                                    const PatchOptions& options = {});
  Result<Node> PatchNodeStatus(std::string_view name, const nlohmann::json& status_patch,
                               const PatchOptions& options = {});
  // POST pods/{name}/binding. 409 (kAborted) when the pod is already bound, 404 when missing.
  Status Bind(const Binding& binding);
  Result<Event> CreateEvent(const Event& event);

 private:
  struct Conn;
  struct Target;
  Client(ClientConfig config, ClientOptions options);
  Status Init();
  Conn* Acquire();
  void Release(Conn* c);
  Status Throttle(const Cancellation* cancel);
  // After a 401: re-reads a file-backed token. True when `*token` changed (worth one more try).
  bool ReloadToken(std::string* token);
  // Performs one HTTP exchange. `on_data` (optional) receives the body as it streams in and
  // returns false to stop; without it the body is collected into the response.
  Result<HttpResponse> Perform(
      const HttpRequest& request, const Cancellation* cancel, std::chrono::milliseconds timeout,
      const std::function<bool(long code, std::string_view chunk)>* on_data);
  Result<nlohmann::json> JsonCall(const HttpRequest& request, const Cancellation* cancel = nullptr);

  ClientConfig config_;
  ClientOptions options_;
  std::unique_ptr<Target> target_;
  std::shared_ptr<const detail::TlsIdentity> tls_;  // null: curl parses the PEM blobs itself
  std::shared_ptr<BearerToken> token_;
  TokenBucket limiter_;
  std::unique_ptr<detail::HttpMux> mux_;  // null: every request on a connection of its own
  Mutex pool_mu_;
  std::vector<Conn*> idle_ GPUSHARE_GUARDED_BY(pool_mu_);
  std::atomic<uint64_t> requests_{0}, throttled_{0}, throttle_wait_ns_{0}, token_reloads_{0},
      watch_events_{0}, connections_{0};
};

// Builds "/api/v1[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]" with escaping (for
// another group: "/apis/{group}/{version}/...").
std::string ResourcePath(ResourceRef r, std::string_view ns, std::string_view name = "",
                         std::string_view subresource = "");
// Percent-encodes a query value or path segment.
std::string UrlEncode(std::string_view s);
// The merge patch {"metadata":{"annotations":{...}}} for `changes`.
nlohmann::json AnnotationsPatch(const AnnotationChanges& changes);

}  // namespace gpushare::kube
