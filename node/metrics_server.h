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
// Served by net/'s HTTP server (net/http_server.h), the scheduler's too: an idle or slow
// connection holds no thread; `threads` (default 3, at least 2) serve complete requests, the
// scrape on a worker (its authorization may ask the API server), the probes on the leader. Each
// request has `request_timeout_ms` for its head and for the whole of it; request heads are
// capped at 16 KiB (431), bodies at 64 KiB (413), connections at 64 (the oldest idle one gives
// way). Another path gets 404 with the served ones, another method 405, in JSON like every
// refusal of that server.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kube/authz.h"
#include "node/metrics.h"

namespace gpushare::net {
class HttpServer;
struct Route;
}  // namespace gpushare::net

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

// The routes: GET /metrics, /healthz, /readyz (checked options: MetricsServer::Start).
std::vector<net::Route> MetricsRoutes(const MetricsServerOptions& options,
                                      MetricsHandlers handlers);

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
  MetricsServer() = default;
  std::unique_ptr<net::HttpServer> server_;
  int port_ = 0;
};

}  // namespace gpushare::node
