// What each of gpushare-scheduler's listeners serves: its routes on net/'s HTTP server
// (net/http_server.h), each handed over by its owner and put together in scheduler/service.cc.
//
//   the extender's listener (--listen):
//     POST <prefix>/filter, /prioritize, /prioritize-cpu   the extender verbs (the leader's lane)
//     POST <prefix>/preempt                                 (a worker: it reads every pod)
//     POST <prefix>/bind                                    (a thread of its own: API calls)
//     GET  <prefix>/inspect[/...], <prefix>/debug/cache[/...]   (a worker; scheduler/inspect.h)
//     GET  /healthz, /readyz, /metrics                      (HealthRoutes)
//   the health listener (--health-listen): GET /healthz, /readyz, /metrics only;
//   the webhook's listener (--webhook-listen): POST /mutate-pods only (scheduler/webhook.h).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/memshare.h"
#include "net/http_server.h"
#include "scheduler/cache.h"
#include "scheduler/extender.h"
#include "scheduler/inspect.h"
#include "scheduler/wire.h"

namespace gpushare::scheduler {

// "/gpushare-scheduler/" -> "/gpushare-scheduler", "ext" -> "/ext", "/" -> "".
std::string NormalizePrefix(const std::string& prefix);

// A verb's reply (JSON) as the server sends it.
net::Reply ToReply(HttpReply reply);

// The verbs under `prefix` (normalised).
std::vector<net::Route> ExtenderRoutes(Extender& extender, const std::string& prefix);

// PREFIX/inspect (what `gpushare inspect -o json` prints, from the informers) and
// PREFIX/debug/cache (the cache's own state).
std::vector<net::Route> InspectRoutes(InspectSource source, const GpuCache& cache,
                                      memshare::MemoryUnit unit, const std::string& prefix);

struct Readiness {
  bool ready = false;
  std::string reason;  // why not (for /readyz)
};

struct HealthHandlers {
  std::function<Readiness()> readiness;  // unset: always ready
  std::function<std::string()> metrics;  // the Prometheus text (scheduler/metrics.h)
  // Who may GET /metrics: called with the request's Authorization header ("" when absent);
  // answers 200 to serve, else the status (401, 403, 503) and why. Unset: anyone.
  std::function<std::pair<int, std::string>(std::string_view authorization)> metrics_auth;
};

//   GET /healthz   200 while the process serves
//   GET /readyz    200 once the cache is synced, else 503 with the reason
//   GET /metrics   Prometheus text (a worker: its authorization may ask the API server)
std::vector<net::Route> HealthRoutes(HealthHandlers handlers);

// POST /mutate-pods (scheduler/webhook.h's kWebhookPath).
std::vector<net::Route> WebhookRoutes(std::function<HttpReply(std::string_view body)> mutate);

}  // namespace gpushare::scheduler
