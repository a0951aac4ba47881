#include "scheduler/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <sstream>

#include "core/reasons.h"
#include "net/http_server.h"
#include "scheduler/extender.h"
#include "scheduler/webhook_certs.h"

namespace gpushare::scheduler {

namespace pm = prometheus;
namespace rs = reasons;

namespace {

constexpr std::string_view kPrefix = "gpushare_scheduler_";

std::string Name(std::string_view suffix) {
  return std::string(kPrefix) + std::string(suffix);
}

// The codes a filter gives a node (scheduler/cache.cc Check) and a bind fails with.
constexpr std::array<std::string_view, 10> kFilterCodes = {
    rs::kNoSharedGpu,          rs::kGpuMemoryInsufficient, rs::kNoGpuFitsContainer,
    rs::kClientCeilingReached, rs::kGpuUnhealthy,          rs::kNodeUnknown,
    rs::kInvalidRequest,       rs::kNodeHeldBack,          rs::kPendingSlotConflict,
    rs::kGpuExcluded};
constexpr std::array<std::string_view, 7> kBindCodes = {
    rs::kBindConflict, rs::kBindPodChanged, rs::kBindApiError,     rs::kInvalidRequest,
    rs::kNodeUnknown,  rs::kNoSharedGpu,    rs::kSchedulerNotReady};

pm::MetricFamily Family(std::string_view suffix, std::string help, pm::MetricType type) {
  pm::MetricFamily f;
  f.name = Name(suffix);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void Add(pm::MetricFamily& f, double value, std::vector<pm::ClientMetric::Label> labels = {}) {
  pm::ClientMetric m;
  m.label = std::move(labels);
  if (f.type == pm::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

pm::MetricFamily One(std::string_view suffix, std::string help, pm::MetricType type, double value) {
  pm::MetricFamily f = Family(suffix, std::move(help), type);
  Add(f, value);
  return f;
}

double D(uint64_t v) {
  return static_cast<double>(v);
}

}  // namespace

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1,      2.5,     5,      10};
  return kBuckets;
}

SchedulerMetrics::SchedulerMetrics() : registry_(std::make_shared<pm::Registry>()) {
  auto histogram = [&](std::string_view suffix, const std::string& help) {
    return &pm::BuildHistogram()
                .Name(Name(suffix))
                .Help(help)
                .Register(*registry_)
                .Add({}, pm::Histogram::BucketBoundaries(LatencyBuckets()));
  };
  filter_ = histogram("filter_duration_seconds",
                      "Time to answer a filter request, from its body to the reply.");
  prioritize_ = histogram("prioritize_duration_seconds",
                          "Time to answer a prioritize request, from its body to the reply.");
  bind_ = histogram("bind_duration_seconds",
                    "Time to answer a bind request, API calls included, whatever the outcome.");
  preempt_ = histogram("preempt_duration_seconds",
                       "Time to answer a preempt request (kube-scheduler's preemption asking which "
                       "victims free a GPU), from its body to the reply.");
  auto& preemptions = pm::BuildCounter()
                          .Name(Name("preemptions_total"))
                          .Help(
                              "Preempt requests by result: nominated (a node and its victims "
                              "chosen), not_helpful (no node where evicting frees a GPU).")
                          .Register(*registry_);
  preempt_nominated_ = &preemptions.Add({{"result", "nominated"}});
  preempt_not_helpful_ = &preemptions.Add({{"result", "not_helpful"}});
  preempt_victims_ = &pm::BuildCounter()
                          .Name(Name("preemption_victims_total"))
                          .Help(
                              "Pods chosen as victims by the preempt verb (kube-scheduler evicts "
                              "them).")
                          .Register(*registry_)
                          .Add({});
  rejections_ = &pm::BuildCounter()
                     .Name(Name("filter_rejections_total"))
                     .Help("Nodes the filter rejected for a pod, by reason (core/reasons.h).")
                     .Register(*registry_);
  bind_failures_ = &pm::BuildCounter()
                        .Name(Name("bind_failures_total"))
                        .Help("Binds that failed, by reason (core/reasons.h).")
                        .Register(*registry_);
  for (std::string_view c : kFilterCodes)
    rejection_codes_.emplace_back(std::string(c), &rejections_->Add({{"reason", std::string(c)}}));
  for (std::string_view c : kBindCodes)
    bind_codes_.emplace_back(std::string(c), &bind_failures_->Add({{"reason", std::string(c)}}));
}

pm::Counter& SchedulerMetrics::ByReason(pm::Family<pm::Counter>& family,
                                        std::vector<std::pair<std::string, pm::Counter*>>& known,
                                        std::string_view code) {
  for (const auto& [c, counter] : known)
    if (c == code) return *counter;
  // A code without a series yet (the family is thread-safe; the vector above is only read).
  return family.Add({{"reason", std::string(code)}});
}

void SchedulerMetrics::CountFilterRejections(std::string_view code, double nodes) {
  ByReason(*rejections_, rejection_codes_, code).Increment(nodes);
}

void SchedulerMetrics::CountPreemption(bool nominated, size_t victims) {
  (nominated ? preempt_nominated_ : preempt_not_helpful_)->Increment();
  preempt_victims_->Increment(static_cast<double>(victims));
}

void SchedulerMetrics::CountBindFailure(std::string_view code) {
  ByReason(*bind_failures_, bind_codes_, code).Increment();
}

GpuCollector::Snapshot GpuCollector::Take() const {
  Snapshot s;
  cache_.VisitGpus([&](const GpuSample& g) {
    if (s.nodes.empty() || s.nodes.back() != g.node) s.nodes.push_back(g.node);
    s.gpus.push_back(
        {&s.nodes.back(), g.gpu.uuid, g.gpu.index, g.gpu.memory_mib, g.used_units, g.core});
  });
  return s;
}

std::vector<pm::MetricFamily> GpuCollector::Collect() const {
  pm::MetricFamily total =
      Family("gpu_memory_bytes",
             "Memory of each GPU as its node's inventory reports it (the GPU's framebuffer).",
             pm::MetricType::Gauge);
  pm::MetricFamily allocated =
      Family("gpu_memory_allocated_bytes",
             "Memory of each GPU booked for memory-share containers as gpushare-scheduler's "
             "cache counts it (confirmed, assumed and binds in flight).",
             pm::MetricType::Gauge);
  pm::MetricFamily core =
      Family("gpu_core_allocated_ratio",
             "Compute of each GPU booked for compute shares (aliyun.com/gpu-core.percentage, "
             "nvidia.com/gpucores), 1 = the whole GPU, as gpushare-scheduler's cache counts it.",
             pm::MetricType::Gauge);
  const double unit_bytes = static_cast<double>(memshare::UnitMiB(unit_)) * 1048576.0;
  const Snapshot snap = Take();  // (the lock is held only in here)
  total.metric.reserve(snap.gpus.size());
  allocated.metric.reserve(snap.gpus.size());
  core.metric.reserve(snap.gpus.size());
  for (const Row& g : snap.gpus) {
    std::vector<pm::ClientMetric::Label> labels = {
        {"index", std::to_string(g.index)}, {"node", *g.node}, {"uuid", g.uuid}};
    Add(total, static_cast<double>(g.memory_mib) * 1048576.0, labels);
    Add(allocated, static_cast<double>(g.used_units) * unit_bytes, labels);
    Add(core, static_cast<double>(g.core) / 100.0, std::move(labels));
  }
  std::vector<pm::MetricFamily> out;
  out.push_back(std::move(total));
  out.push_back(std::move(allocated));
  out.push_back(std::move(core));
  return out;
}

std::vector<pm::MetricFamily> StatsFamilies(const MetricsSnapshot& s) {
  using T = pm::MetricType;
  std::vector<pm::MetricFamily> out;
  const ExtenderStats x = s.extender ? *s.extender : ExtenderStats{};
  pm::MetricFamily requests =
      Family("requests_total", "Extender requests received, by verb.", T::Counter);
  pm::MetricFamily errors =
      Family("errors_total", "Extender requests answered with an error, by verb.", T::Counter);
  for (const auto& [verb, n, e] : {std::tuple{"filter", x.filter, x.filter_errors},
                                   std::tuple{"prioritize", x.prioritize, x.prioritize_errors},
                                   std::tuple{"bind", x.bind, x.bind_errors}}) {
    Add(requests, D(n), {{"verb", verb}});
    Add(errors, D(e), {{"verb", verb}});
  }
  out.push_back(std::move(requests));
  out.push_back(std::move(errors));
  out.push_back(One("bad_requests_total", "Extender requests whose body was not a valid request.",
                    T::Counter, D(x.bad_requests)));
  out.push_back(One("bind_idempotent_total",
                    "Binds answered as done because this extender had already bound the pod.",
                    T::Counter, D(x.bind_idempotent)));
  out.push_back(One("bind_seconds_total", "Time spent in successful binds.", T::Counter,
                    D(x.bind_ns_total) / 1e9));
  out.push_back(One("assume_expired_total",
                    "Assumed shares released because gpushare-node did not confirm them within "
                    "--assume-timeout.",
                    T::Counter, D(s.assume_expired)));
  const CacheStats c = s.cache ? *s.cache : CacheStats{};
  out.push_back(One("cache_nodes", "Nodes with a readable GPU inventory.", T::Gauge, c.nodes));
  out.push_back(One("cache_usable_gpus", "GPUs that take memory shares (healthy, memory mode).",
                    T::Gauge, c.usable_gpus));
  out.push_back(One("cache_pods", "Pods whose GPU memory is counted.", T::Gauge, c.pods));
  out.push_back(One("assumed_pods",
                    "Counted pods not yet confirmed by gpushare-node (binds in flight included).",
                    T::Gauge, c.assumed));
  out.push_back(One("cache_reserved_pods", "Binds in flight (booked, API calls not finished).",
                    T::Gauge, c.reserved));
  out.push_back(One("cache_picks",
                    "Pods whose GPUs the policy picked, held until their bind (--pick-hold).",
                    T::Gauge, c.picks));
  out.push_back(One("picks_expired_total",
                    "Picks that ended without their pod's bind within --pick-hold.", T::Counter,
                    D(c.picks_expired)));
  out.push_back(One("cache_unassigned_pods",
                    "Bound pods asking for the resource with no readable GPU assignment (counted "
                    "nowhere).",
                    T::Gauge, c.unassigned));
  out.push_back(One("api_requests_total", "Requests the API client sent (watches included).",
                    T::Counter, D(s.api_requests)));
  out.push_back(One("api_connections_total",
                    "Connections the API client opened (with a TLS handshake over https); over "
                    "HTTP/2 the requests in flight share one.",
                    T::Counter, D(s.api_connections)));
  out.push_back(One("api_throttled_total",
                    "API requests that waited for the client's rate limit (--kube-api-qps).",
                    T::Counter, D(s.api_throttled)));
  out.push_back(One("ready", "1 once the cache has synced and the scheduler decides.", T::Gauge,
                    s.ready ? 1 : 0));
  const net::HttpServerStats h = s.http ? *s.http : net::HttpServerStats{};
  out.push_back(One("http_connections", "Open connections to the extender listener.", T::Gauge,
                    D(h.connections)));
  out.push_back(One("http_buffered_bytes", "Request bytes held in memory now.", T::Gauge,
                    D(h.buffered_bytes)));
  out.push_back(One("http_connections_total", "Connections accepted by the extender listener.",
                    T::Counter, D(h.accepted)));
  out.push_back(One("http_refused_total",
                    "Requests answered by the HTTP layer (400, 408, 413, 431, 501, 503, 505).",
                    T::Counter, D(h.refused)));
  out.push_back(One("http_timeouts_total",
                    "Requests or replies past their deadline (408 or connection closed).",
                    T::Counter, D(h.timeouts)));
  out.push_back(One("http_evicted_total", "Connections closed to make room for others.", T::Counter,
                    D(h.evicted)));
  out.push_back(One("tls_handshake_errors_total", "TLS handshakes that failed.", T::Counter,
                    D(h.tls_handshake_errors)));
  out.push_back(One("tls_reloads_total", "Certificate files re-read after a change.", T::Counter,
                    D(h.tls_reloads)));
  out.push_back(One("tls_reload_errors_total",
                    "Certificate files that changed but did not load (the previous ones stay).",
                    T::Counter, D(h.tls_reload_errors)));
  if (s.webhook) {
    pm::MetricFamily w = Family("webhook_requests_total",
                                "Admission requests of the webhook, by result.", T::Counter);
    Add(w, D(s.webhook->mutated), {{"result", "mutated"}});
    Add(w, D(s.webhook->unchanged), {{"result", "unchanged"}});
    Add(w, D(s.webhook->invalid), {{"result", "invalid"}});
    Add(w, D(s.webhook->denied), {{"result", "denied"}});
    out.push_back(std::move(w));
    out.push_back(One("webhook_serving", "1 while the webhook listener serves.", T::Gauge,
                      s.webhook->serving ? 1 : 0));
    if (const WebhookCertStats* cs = s.webhook->certs) {
      out.push_back(One("webhook_cert_failures_total",
                        "Passes of the certificate manager that failed.", T::Counter,
                        D(cs->failures)));
      out.push_back(One("webhook_cert_secret_writes_total",
                        "Certificate Secrets created or updated by this replica.", T::Counter,
                        D(cs->secret_writes)));
      out.push_back(One("webhook_cert_file_writes_total",
                        "Certificate pairs written to the certificate directory.", T::Counter,
                        D(cs->file_writes)));
    }
  }
  return out;
}

std::string Serialize(std::vector<pm::MetricFamily> families) {
  std::stable_sort(
      families.begin(), families.end(),
      [](const pm::MetricFamily& a, const pm::MetricFamily& b) { return a.name < b.name; });
  // A registry's family keeps its series in a hash map: sort them by labels (the series built
  // at scrape time are in order already, and stay so).
  for (pm::MetricFamily& f : families) {
    if (f.metric.size() < 2 || f.metric.front().label.empty()) continue;
    if (f.metric.front().label.front().name != "reason") continue;
    std::stable_sort(
        f.metric.begin(), f.metric.end(),
        [](const pm::ClientMetric& a, const pm::ClientMetric& b) { return a.label < b.label; });
  }
  std::ostringstream out;
  pm::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace gpushare::scheduler
