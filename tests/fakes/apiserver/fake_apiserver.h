// FakeApiServer: an in-process double of kube-apiserver for pods, nodes, events, secrets and
// mutatingwebhookconfigurations, served over
// real HTTP (or HTTPS), for tests of the Kubernetes client and of the gpushare binaries.
//
// It behaves like the real server where gpushare depends on it, unpleasant parts included
// (../shared/reference/kubernetes-protocols.md §5):
//   - one global, monotonically increasing resourceVersion (like etcd's revision) stamped on
//     every write; a no-op patch does not bump it;
//   - list with resourceVersion ("" / "0" / N with NotOlderThan or Exact), label and field
//     selectors (pods: spec.nodeName, status.phase, ...), paging with limit/continue (a
//     continue token older than the history window is 410 Expired);
//   - watch from a resourceVersion, replaying a bounded per-resource event history; a version
//     older than the window gets HTTP 200 and then an ERROR event with a 410 "Expired" Status,
//     as the real watch cache does; watch without a version (or "0") starts with synthetic
//     ADDED events for the current state; objects that stop matching a selector arrive as
//     DELETED; BOOKMARK events when allowWatchBookmarks=true; the stream ends after
//     timeoutSeconds;
//   - JSON merge patch (RFC 7386) and JSON patch on objects and on the status subresource (the
//     main resource ignores status changes, status ignores spec changes; pod spec is immutable
//     apart from images), with metadata.resourceVersion / metadata.uid in the patch acting as
//     preconditions (409 Conflict);
//   - the pods/binding subresource: sets spec.nodeName and the PodScheduled condition, copies
//     the Binding's annotations; 409 when already bound or being deleted, 404 when missing;
//   - graceful pod deletion (a bound, running pod gets a deletionTimestamp first; unbound or
//     finished pods and gracePeriodSeconds=0 delete at once);
//   - secrets: data values must be base64 (400 otherwise, as the real decoder), a
//     kubernetes.io/tls Secret needs data tls.crt and tls.key (422), and its type is immutable;
//   - PUT replaces an object; a metadata.resourceVersion in the body that is not the stored one
//     is 409 Conflict, an absent object 404;
//   - optional bearer-token authentication (401 Unauthorized) and HTTPS with client
//     certificates;
//   - TokenReview (authentication.k8s.io/v1) and SubjectAccessReview (authorization.k8s.io/v1)
//     for non-resource URLs, as kube-rbac-proxy and kubelet use them: create-only (201 with the
//     status filled in, nothing stored), an unknown token is `authenticated: false` (not an
//     error), an empty token is 400, a review without user and groups or without exactly one of
//     resourceAttributes / nonResourceAttributes is 422; non-resource rules match the path
//     exactly or by a trailing `*` prefix, verbs exactly or `*`, for a user or a group, like RBAC.
// Test hooks: set and remove objects directly, inject faults (the next N matching requests
// fail with an HTTP error, lose their connection mid-reply, or are delayed), compact the
// history, close or expire open watches, force bookmarks, and read the request log.
//
// The same server runs as the standalone binary `fake-apiserver` (main.cc) for integration
// tests of the real binaries; there the hooks are also reachable over HTTP under /_fake/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpushare::fakes {

// Pods, nodes, events, secrets (core v1) and MutatingWebhookConfigurations
// (admissionregistration.k8s.io/v1, cluster-scoped, served under /apis).
enum class Resource {
  kPods,
  kNodes,
  kEvents,
  kSecrets,
  kMutatingWebhookConfigurations,
  kPodDisruptionBudgets
};

// "pods"/"Pod"/"PodList" and back.
std::string_view ResourceName(Resource r);
std::optional<Resource> ResourceFromName(std::string_view plural);
std::optional<Resource> ResourceFromKind(std::string_view kind);

struct FakeApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;               // 0: pick a free port
  std::string tls_cert_file;  // cert + key: serve HTTPS
  std::string tls_key_file;
  std::string tls_client_ca_file;   // require client certificates signed by this CA
  std::vector<std::string> tokens;  // accepted bearer tokens; empty: no authentication
  size_t history_limit = 1000;      // watch events kept per resource
  std::chrono::milliseconds bookmark_interval{60000};
  int default_watch_timeout_seconds = 1800;
  std::chrono::milliseconds too_large_rv_wait{3000};  // wait for a future version, then 504
  size_t threads = 64;                  // concurrent connections (each watch holds one)
  size_t max_request_bytes = 3u << 20;  // the real server's limit is 3 MiB
  bool test_endpoints = false;          // serve the /_fake/ hooks over HTTP
};

struct Fault {
  enum class Kind { kHttpError, kDropConnection, kDelay };
  Kind kind = Kind::kHttpError;
  int count = 1;        // matching requests it applies to
  int http_code = 500;  // kHttpError
  std::string reason;   // Status reason; default: kube::DefaultReason(http_code)
  std::string message = "injected fault";
  std::string method;                  // "" matches any
  std::string path_contains;           // "" matches any
  int watch = -1;                      // -1 any, 0 only non-watch, 1 only watch requests
  std::chrono::milliseconds delay{0};  // kDelay: then the request is served normally
};

// A user the TokenReview double knows by its token.
struct FakeIdentity {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
};

// An RBAC grant on a non-resource URL: `subject` is a user name or "group:<name>"; `path` is
// exact or ends in "*"; `verb` is exact or "*".
struct NonResourceGrant {
  std::string subject;
  std::string path;
  std::string verb;
};

struct RecordedRequest {
  std::string method;
  std::string path;
  std::string query;  // the raw query string
  bool watch = false;
  std::string bearer_token;
  std::string content_type;
  std::string body;  // a binding's (POST .../binding), else empty
  int status = 0;    // the HTTP status sent (0 for a streamed watch)
};

class FakeApiServer {
 public:
  explicit FakeApiServer(FakeApiServerOptions options = {});
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // Binds and starts serving (in background threads).
  Status Start();
  // Ends every watch and stops serving. Idempotent.
  void Stop();
  int port() const;
  std::string url() const;  // "http://127.0.0.1:PORT" or "https://..."

  // --- objects, bypassing validation and authentication; every write emits watch events ---
  // Creates or replaces an object (uid, creationTimestamp, namespace "default" for pods and
  // events filled in when missing). Returns the stored object.
  nlohmann::json Upsert(Resource r, nlohmann::json object);
  bool Remove(Resource r, std::string_view ns, std::string_view name);
  std::optional<nlohmann::json> Get(Resource r, std::string_view ns, std::string_view name) const;
  std::vector<nlohmann::json> List(Resource r) const;
  uint64_t resource_version() const;

  // --- watches ---
  // Forgets all history: a watch or continue token from an older version now gets 410.
  void Compact();
  enum class CloseMode {
    kClean,  // end the streams normally (like timeoutSeconds)
    kGone,   // send an ERROR event with a 410 Expired Status, then end
    kDrop,   // cut the connections without ending the chunked stream
  };
  void CloseWatches(CloseMode mode);
  // Sends a BOOKMARK now on every watch that allowed them.
  void SendBookmarks();
  // While held, watches queue their events (and send no bookmarks) instead of sending them: a
  // watch that lags behind the writes, as a busy API server's does. Releasing sends the queue.
  void HoldWatchEvents(bool hold);
  size_t open_watches() const;

  // --- authentication, faults, request log ---
  void SetTokens(std::vector<std::string> tokens);
  // TokenReview: the users behind tokens (not tokens the double itself accepts: SetTokens).
  void SetIdentity(std::string token, FakeIdentity identity);
  // SubjectAccessReview: what non-resource URLs who may use.
  void Grant(NonResourceGrant grant);
  void InjectFault(Fault fault);
  // Replaces all pending faults at once (no request can slip between a clear and an inject).
  void SetFaults(std::vector<Fault> faults);
  void ClearFaults();
  // A request is logged once it has been answered, so after its effect is visible: a test that
  // sees the effect waits for the count too.
  std::vector<RecordedRequest> requests() const;
  // Requests whose method matches (empty: any) and whose path contains `path_contains`;
  // watch: -1 any, 0 non-watch only, 1 watch only.
  size_t CountRequests(std::string_view method, std::string_view path_contains,
                       int watch = -1) const;
  void ClearRequests();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpushare::fakes
