// See routes.h.
#include "scheduler/routes.h"

#include "scheduler/webhook.h"

namespace gpushare::scheduler {

using net::Lane;
using net::Reply;
using net::Request;
using net::Route;

std::string NormalizePrefix(const std::string& prefix) {
  std::string p = prefix;
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty() && p.front() != '/') p.insert(p.begin(), '/');
  return p;
}

Reply ToReply(HttpReply reply) {
  return net::JsonReply(reply.code, std::move(reply.body));
}

std::vector<Route> ExtenderRoutes(Extender& extender, const std::string& prefix) {
  Extender* x = &extender;
  const std::string p = NormalizePrefix(prefix);
  auto verb = [&p](const char* path, Lane lane, HttpReply (Extender::*call)(std::string_view),
                   Extender* target) {
    return net::JsonPost(p + path, lane, [target, call](std::string_view body) {
      return ToReply((target->*call)(body));
    });
  };
  return {verb("/filter", Lane::kLeader, &Extender::Filter, x),
          verb("/prioritize", Lane::kLeader, &Extender::Prioritize, x),
          verb("/prioritize-cpu", Lane::kLeader, &Extender::PrioritizeCpuOnly, x),
          verb("/bind", Lane::kOwnThread, &Extender::Bind, x),
          verb("/preempt", Lane::kWorker, &Extender::Preempt, x)};
}

std::vector<Route> InspectRoutes(InspectSource source, const GpuCache& cache,
                                 memshare::MemoryUnit unit, const std::string& prefix) {
  const std::string p = NormalizePrefix(prefix);
  const GpuCache* view = &cache;
  return {
      net::GetRoute(
          p + "/inspect", Lane::kWorker,
          [source = std::move(source)](const Request& r) {
            return ToReply(ServeInspect(source, r.rest));
          },
          /*subtree=*/true),
      net::GetRoute(
          p + "/debug/cache", Lane::kWorker,
          [view, unit](const Request& r) { return ToReply(ServeCacheView(*view, unit, r.rest)); },
          /*subtree=*/true)};
}

std::vector<Route> HealthRoutes(HealthHandlers h) {
  auto readiness = std::move(h.readiness);
  auto metrics = std::move(h.metrics);
  auto auth = std::move(h.metrics_auth);
  return {
      net::GetRoute("/healthz", Lane::kLeader,
                    [](const Request&) { return net::TextReply(200, "ok\n"); }),
      net::GetRoute("/readyz", Lane::kLeader,
                    [readiness](const Request&) {
                      const Readiness ready = readiness ? readiness() : Readiness{true, ""};
                      return ready.ready ? net::TextReply(200, "ok\n")
                                         : net::TextReply(503, "not ready: " + ready.reason + "\n");
                    }),
      net::GetRoute("/metrics", Lane::kWorker, [metrics, auth](const Request& r) {
        if (auth) {
          auto [status, why] = auth(r.head.Header("authorization").value_or(std::string_view()));
          if (status != 200) return net::JsonReply(status, net::ErrorJson(why));
        }
        return net::TextReply(200, metrics ? metrics() : std::string(),
                              "text/plain; version=0.0.4");
      })};
}

std::vector<Route> WebhookRoutes(std::function<HttpReply(std::string_view body)> mutate) {
  return {net::JsonPost(
      std::string(kWebhookPath), Lane::kLeader,
      [mutate = std::move(mutate)](std::string_view body) { return ToReply(mutate(body)); })};
}

}  // namespace gpushare::scheduler
