// MetricsServer: gpushare-node's HTTP endpoint (--metrics-listen, default :9445):
//   GET /metrics   the Prometheus text exposition (node/metrics_scrape.h), protected by
//                  --metrics-auth: `kubernetes` checks the caller's bearer token with a
//                  TokenReview and its permission (get on nonResourceURL /metrics) with a
//                  SubjectAccessReview (kube/authz.h): 401 without a valid token, 403 without the
//                  permission, 503 when the API server cannot be asked; `none` serves anyone and is
//                  accepted only on a loopback address (only local callers can reach it);
//   GET /healthz   200 "ok" while the process runs and the agent's loop turns, else 503 + why;
//   GET /readyz    200 "ok" once the inventory is read and every resource is registered with
//                  kubelet, else 503 + why.
// The probes carry no data and are open to every caller (kubelet's probes send no token).
//
// Served by civetweb's C API (libcivetweb; its C++ wrapper reports errors by throwing, and
// prometheus-cpp's Exposer neither serves other paths nor checks bearer tokens). Bounded:
// `threads` workers (default 3), no keep-alive (a connection holds a worker for one request),
// a request timeout, a 16 KiB limit on request headers and a short accept queue; anything else
// waits in the kernel's backlog.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "kube/authz.h"
#include "node/metrics.h"

struct mg_context;
struct mg_connection;

namespace gpushare::node {

enum class MetricsAuth { kKubernetes, kNone };
// "kubernetes" or "none"; kInvalidArgument naming the value otherwise.
Result<MetricsAuth> ParseMetricsAuth(std::string_view text);

// A listen address: ":PORT" (every interface), "HOST:PORT", "[V6]:PORT".
struct ListenAddress {
  std::string host;  // "" = every interface
  int port = 0;      // 0 = any free port
};
Result<ListenAddress> ParseListenAddress(std::string_view text);
// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopback(const std::string& host);

struct MetricsServerOptions {
  std::string listen = ":9445";
  MetricsAuth auth = MetricsAuth::kKubernetes;
  std::shared_ptr<kube::RequestAuthorizer> authorizer;  // required for kKubernetes
  // When set, /metrics answers 503 with this text (the probes are still served): the agent could
  // not get what it needs to authorize callers.
  std::string unavailable_metrics;
  int threads = 3;
  int request_timeout_ms = 10'000;
};

struct MetricsHandlers {
  std::function<std::string()> metrics;  // the exposition
  std::function<Probe()> healthz;
  std::function<Probe()> readyz;
};

class MetricsServer {
 public:
  // Checks the options (auth none only on loopback, an authorizer for kubernetes) and starts
  // serving. Errors name the flag.
  static Result<std::unique_ptr<MetricsServer>> Start(MetricsServerOptions options,
                                                      MetricsHandlers handlers);
  ~MetricsServer();  // stops serving (waits for requests in progress)
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsServer(MetricsServerOptions options, MetricsHandlers handlers);
  static int Handle(mg_connection* conn, void* self);
  int Serve(mg_connection* conn);

  const MetricsServerOptions options_;
  const MetricsHandlers handlers_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

}  // namespace gpushare::node
