// See metrics_service.h.
#include "node/metrics_service.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>

#include "base/logfmt.h"
#include "kube/authz.h"
#include "kube/event_recorder.h"
#include "node/allocate_events.h"
#include "node/memshare_service.h"
#include "node/metrics_scrape.h"
#include "node/metrics_server.h"

namespace gpushare::node {

using logfmt::Value;

namespace {

class Service final : public MetricsService {
 public:
  std::shared_ptr<NodeMetrics> metrics() override { return metrics_; }
  std::shared_ptr<AllocateEvents> allocate_events() override { return events_; }
  int port() const override { return server_ ? server_->port() : 0; }

  std::shared_ptr<NodeMetrics> metrics_;
  std::shared_ptr<kube::EventRecorder> recorder_;
  std::shared_ptr<AllocateEvents> events_;
  std::shared_ptr<MetricsScraper> scraper_;
  std::unique_ptr<MetricsServer> server_;  // last: stopped first
};

}  // namespace

Result<std::unique_ptr<MetricsService>> StartMetricsService(MetricsServiceOptions o) {
  if (o.settings.listen.empty()) {
    spdlog::info("event=metrics_disabled reason=\"gpushare.metrics.listen is empty\"");
    return std::unique_ptr<MetricsService>();
  }
  GPUSHARE_ASSIGN_OR_RETURN(MetricNames names, ParseMetricNames(o.settings.names));
  GPUSHARE_ASSIGN_OR_RETURN(MetricsAuth auth, ParseMetricsAuth(o.settings.auth));
  GPUSHARE_ASSIGN_OR_RETURN(ListenAddress addr, ParseListenAddress(o.settings.listen));
  if (auth == MetricsAuth::kNone && !IsLoopback(addr.host)) {
    return Status::InvalidArgument(
        "--metrics-auth=none: only allowed with a loopback --metrics-listen address (such as "
        "127.0.0.1:9445), got \"" +
        o.settings.listen +
        "\"; use --metrics-auth=kubernetes so that callers are authenticated and authorized");
  }
  // Events name the Node object: only with the node's real name (--node-name, $NODE_NAME).
  const bool events = !o.node_name.empty();
  if (o.node_name.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) o.node_name = host;
  }
  auto s = std::make_unique<Service>();
  NodeMetricsOptions mo;
  mo.names = names;
  mo.version = o.version;
  mo.commit = o.commit;
  s->metrics_ = std::make_shared<NodeMetrics>(mo);

  // The API: callers' tokens, and the Events of refusals.
  kube::ClientOptions co;
  co.request_timeout = std::chrono::milliseconds(5000);
  // Bounds the pod list of a refusal's lookup (the pods of one node) and every other reply.
  co.max_response_bytes = size_t{32} << 20;
  Result<std::shared_ptr<kube::Client>> client = MakeApiClient(o.kubeconfig, "metrics", co);
  std::shared_ptr<kube::RequestAuthorizer> authorizer;
  if (client.ok()) {
    authorizer =
        std::make_shared<kube::RequestAuthorizer>(*client, kube::AuthorizerOptions{}, RealClock());
  }
  if (client.ok() && events) {
    kube::EventRecorderOptions eo;
    eo.component = "gpushare-node";
    eo.host = o.node_name;
    s->recorder_ = std::make_shared<kube::EventRecorder>(*client, eo);
    AllocateEventsOptions ao;
    ao.node_name = o.node_name;
    ao.pods = NodePodLister(*client, o.node_name);  // the pod a refusal was for
    s->events_ = std::make_shared<AllocateEvents>(s->recorder_, std::move(ao), RealClock());
  }
  if (!client.ok()) {
    spdlog::warn("event=metrics_without_api error={} effect=\"no Events for refused Allocates{}\"",
                 Value(client.status().message()),
                 auth == MetricsAuth::kKubernetes
                     ? "; /metrics answers 503 (callers cannot be checked)"
                     : "");
  }

  ScrapeSources src;
  src.node_name = o.node_name;
  src.pod_resources_socket = o.pod_resources_socket;
  if (o.interposer_paths) {
    src.extra_state_dirs = [paths = o.interposer_paths] { return paths->Get().state_dirs; };
  }
  s->scraper_ = std::make_shared<MetricsScraper>(s->metrics_, src);

  MetricsServerOptions so;
  so.listen = o.settings.listen;
  so.auth = auth;
  so.authorizer = authorizer;
  MetricsHandlers h;
  h.metrics = [scraper = s->scraper_] { return scraper->Scrape(); };
  h.healthz = [m = s->metrics_, clock = o.clock] { return m->Healthz(clock->NowMs()); };
  h.readyz = [m = s->metrics_] { return m->Readyz(); };
  if (auth == MetricsAuth::kKubernetes && !authorizer) {
    // Fail closed: the probes work, /metrics cannot be authorized.
    so.auth = MetricsAuth::kNone;
    const std::string why = client.status().message();
    h.metrics = nullptr;
    so.unavailable_metrics = "cannot check callers without the Kubernetes API: " + why;
  }
  Result<std::unique_ptr<MetricsServer>> server = MetricsServer::Start(so, std::move(h));
  if (!server.ok()) {
    if (server.status().code() == StatusCode::kInvalidArgument) return server.status();
    spdlog::error("event=metrics_not_served error={}", Value(server.status().message()));
  } else {
    s->server_ = std::move(*server);
  }
  return std::unique_ptr<MetricsService>(std::move(s));
}

}  // namespace gpushare::node
