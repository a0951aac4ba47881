#include "scheduler/service.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/logfmt.h"
#include "base/logging.h"
#include "base/signals.h"
#include "core/object_key.h"
#include "core/reasons.h"
#include "kube/config.h"
#include "scheduler/inspect.h"

namespace gpushare::scheduler {

using logfmt::Value;

namespace {

// Writes `port` to `path` atomically (nothing when `path` is empty).
Status WritePortFile(const std::string& path, const std::string& flag, int port) {
  if (path.empty()) return Status::Ok();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream pf(tmp);
    pf << port << "\n";
    if (!pf) return Status::Unavailable("cannot write " + flag + " " + path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Unavailable("cannot write " + flag + " " + path);
  return Status::Ok();
}

}  // namespace

Status ConfigureSchedulerLogging(const std::string& level) {
  if (ConfigureLogging(level)) return Status::Ok();
  return Status::InvalidArgument("--log-level: must be " + std::string(kLogLevels) + ", got " +
                                 level);
}

SchedulerService::SchedulerService(ServiceOptions options) : options_(std::move(options)) {}

SchedulerService::~SchedulerService() {
  Stop();
}

Status SchedulerService::Start() {
  kube::LoadOptions lo;
  lo.kubeconfig = options_.kubeconfig;
  lo.context = options_.context;
  Result<kube::ClientConfig> cfg = kube::LoadClientConfig(lo);
  if (!cfg.ok()) return cfg.status().WithContext("Kubernetes client configuration");
  for (const std::string& w : cfg->warnings)
    spdlog::warn("event=kube_config_warning detail={}", Value(w));
  kube::ClientOptions co;
  co.qps = options_.kube_qps;
  co.burst = options_.kube_burst;
  co.user_agent = "gpushare-scheduler/0.1";
  co.request_timeout = std::chrono::milliseconds(10000);
  // Requests share the client's connections (kube/http_mux.h): over HTTP/2, one. Should the API
  // server speak only HTTP/1.1, keep a connection for every request that can be in flight at once
  // (each bind thread, each server thread, the informers' lists): a connection closed after a
  // burst's request is a TLS handshake for the next (docs/benchmarks.md).
  co.max_idle_connections =
      static_cast<size_t>(std::max(1, options_.http.bind_threads) + options_.http.threads + 8);
  Result<std::shared_ptr<kube::Client>> client = kube::Client::Create(*cfg, co);
  if (!client.ok()) return client.status().WithContext("Kubernetes client");
  client_ = *client;
  spdlog::info("event=kube_client server={} source={}", Value(client_->config().server),
               Value(client_->config().source));

  CacheOptions cache_options;
  if (!options_.target_workload.empty()) {
    Result<std::vector<TargetPod>> w = LoadTargetWorkload(options_.target_workload);
    if (!w.ok()) return w.status().WithContext("--target-workload");
    cache_options.target_workload = std::move(w).value();
    spdlog::info("event=target_workload file={} pods={} kinds={}", Value(options_.target_workload),
                 TargetPodCount(cache_options.target_workload),
                 cache_options.target_workload.size());
  }
  cache_options.unit = options_.unit;
  cache_options.resource_name = options_.resource_name;
  cache_options.policy = options_.policy;
  cache_options.restart_hold_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.restart_hold).count();
  cache_options.log = [](const std::string& line) { spdlog::info("{}", line); };
  cache_ = std::make_unique<GpuCache>(cache_options);
  gpu_metrics_ = std::make_unique<GpuCollector>(*cache_, options_.unit);

  auto log = [](const std::string& line) { spdlog::warn("{}", line); };
  kube::InformerOptions no;
  no.log = log;
  nodes_ = std::make_unique<kube::NodeInformer>(client_, no);
  kube::InformerOptions po;
  po.log = log;
  // Finished pods hold nothing; when a pod finishes it leaves the selection (a DELETED event).
  po.field_selector = "status.phase!=Succeeded,status.phase!=Failed";
  pods_ = std::make_unique<kube::PodInformer>(client_, po);
  kube::InformerOptions bo;
  bo.log = log;
  budgets_ = std::make_unique<kube::PodDisruptionBudgetInformer>(client_, bo);
  GpuCache* cache = cache_.get();
  nodes_->SetHandlers({[cache](const kube::Node& n) { cache->UpsertNode(n); },
                       [cache](const kube::Node&, const kube::Node& n) { cache->UpsertNode(n); },
                       [cache](const kube::Node& n) { cache->DeleteNode(n.metadata.name); },
                       [this] { OnSynced(); }});
  pods_->SetHandlers({[cache](const kube::Pod& p) { cache->UpsertPod(p); },
                      [cache](const kube::Pod&, const kube::Pod& p) { cache->UpsertPod(p); },
                      [cache](const kube::Pod& p) { cache->DeletePod(p); },
                      [this] { OnSynced(); }});

  kube::EventRecorderOptions eo;
  eo.component = options_.event_component;
  events_ = std::make_unique<kube::EventRecorder>(client_, eo);

  ExtenderOptions xo;
  xo.resource_name = options_.resource_name;
  kube::PodInformer* pods = pods_.get();
  xo.pod_lookup = [pods](const std::string& key) { return pods->Get(key); };
  kube::NodeInformer* nodes = nodes_.get();
  xo.node_known = [nodes](const std::string& node) { return nodes->Get(node) != nullptr; };
  xo.preempt.pod_list = [pods] { return pods->List(); };
  kube::PodDisruptionBudgetInformer* budgets = budgets_.get();
  xo.preempt.budget_list = [budgets] { return budgets->List(); };
  xo.preempt.budgets_synced = [budgets] { return budgets->HasSynced(); };
  xo.preempt.budgets = options_.preemption_budgets;
  xo.filter_keep_best = options_.filter_keep_best;
  xo.pick = options_.pick_hold.count() > 0;
  xo.metrics = &metrics_;
  kube::EventRecorder* events = events_.get();
  xo.warn = [events](const kube::ObjectReference& pod, std::string_view reason,
                     const std::string& message) {
    events->Record(pod, "Warning", std::string(reason), message);
  };
  extender_ = std::make_unique<Extender>(*cache_, client_, xo);
  HealthHandlers health;
  health.readiness = [this] { return readiness(); };
  health.metrics = [this] { return Metrics(); };
  if (options_.metrics_auth == "kubernetes") {
    metrics_authz_ =
        std::make_unique<kube::RequestAuthorizer>(client_, kube::AuthorizerOptions{}, RealClock());
    health.metrics_auth = [this](std::string_view authorization) {
      return AuthorizeMetrics(authorization);
    };
  }
  // The extender's listener: the verbs, then (same listener, same transport;
  // scheduler/inspect.h) PREFIX/inspect, the document `gpushare inspect -o json` prints, from
  // the informers' nodes and pods, and PREFIX/debug/cache, the cache's own state; then health.
  const std::string prefix = NormalizePrefix(options_.url_prefix);
  InspectSource source;
  source.nodes = [nodes] { return nodes->List(); };
  source.pods = [pods] { return pods->List(); };
  source.synced = [nodes, pods] { return nodes->HasSynced() && pods->HasSynced(); };
  std::vector<net::Route> routes = ExtenderRoutes(*extender_, prefix);
  for (net::Route& r : InspectRoutes(source, *cache_, options_.unit, prefix))
    routes.push_back(std::move(r));
  for (net::Route& r : HealthRoutes(health)) routes.push_back(std::move(r));
  server_ = std::make_unique<net::HttpServer>(options_.http, std::move(routes));
  GPUSHARE_RETURN_IF_ERROR(server_->Start());
  spdlog::info(
      "event=serving listen={}:{} tls={} client_certs={} prefix={} resource={} unit={} policy={} "
      "assume_timeout_ms={} max_body_bytes={}",
      options_.http.host, server_->port(), options_.http.tls.enabled() ? "on" : "off",
      options_.http.tls.client_ca_file.empty() ? "no" : "required",
      Value(prefix.empty() ? "/" : prefix), Value(options_.resource_name),
      std::string(memshare::MemoryUnitName(options_.unit)), Value(options_.policy),
      options_.assume_timeout.count(), options_.http.max_body_bytes);
  if (options_.health_port >= 0) {
    net::HttpServerOptions h = options_.http;
    h.host = options_.health_host;
    h.port = options_.health_port;
    h.tls = {};
    h.threads = 2;
    h.max_connections = 64;
    health_ = std::make_unique<net::HttpServer>(h, HealthRoutes(health));
    GPUSHARE_RETURN_IF_ERROR(health_->Start().WithContext("--health-listen"));
    spdlog::info("event=serving_health listen={}:{} paths=\"/healthz, /readyz, /metrics\"", h.host,
                 health_->port());
  }
  if (options_.webhook_port >= 0) {
    if (options_.webhook_certs) {
      certs_ = std::make_unique<WebhookCertManager>(client_, *options_.webhook_certs);
      certs_->Start([this] {
        Status s = StartWebhook();
        if (!s.ok()) spdlog::warn("event=webhook_not_serving error={}", Value(s.message()));
      });
    } else {
      GPUSHARE_RETURN_IF_ERROR(StartWebhook());
    }
  }
  GPUSHARE_RETURN_IF_ERROR(WritePortFile(options_.port_file, "--port-file", server_->port()));
  if (health_)
    GPUSHARE_RETURN_IF_ERROR(
        WritePortFile(options_.health_port_file, "--health-port-file", health_->port()));
  GPUSHARE_RETURN_IF_ERROR(nodes_->Start());
  GPUSHARE_RETURN_IF_ERROR(pods_->Start());
  GPUSHARE_RETURN_IF_ERROR(budgets_->Start());
  sweeper_ = std::thread([this] { SweepLoop(); });
  return Status::Ok();
}

std::pair<int, std::string> SchedulerService::AuthorizeMetrics(std::string_view authorization) {
  const kube::AuthzDecision d = metrics_authz_->Check(authorization);
  int status = 200;
  switch (d.verdict) {
    case kube::AuthzVerdict::kAllowed:
      return {200, ""};
    case kube::AuthzVerdict::kUnauthenticated:
      status = 401;
      break;
    case kube::AuthzVerdict::kForbidden:
      status = 403;
      break;
    case kube::AuthzVerdict::kError:
      status = 503;
      break;
  }
  if (!d.cached)
    spdlog::warn("event=metrics_refused status={} user={} reason={}", status, Value(d.user),
                 Value(d.reason));
  return {status, "/metrics: " + d.reason};
}

HttpReply SchedulerService::Mutate(std::string_view body) {
  WebhookOptions wo;
  wo.resource_name = options_.resource_name;
  wo.scheduler_name = options_.webhook_scheduler_name;
  wo.hami_resources = options_.webhook_hami_resources;
  wo.unit = options_.unit;
  wo.gpu_models = [this] { return cache_->GpuModels(); };
  WebhookReply r = MutatePods(body, wo);
  switch (r.outcome) {
    case WebhookOutcome::kMutated:
      webhook_mutated_.fetch_add(1);
      spdlog::info("event=webhook_scheduler_name_set pod={} scheduler={}", Value(r.pod),
                   Value(wo.scheduler_name));
      break;
    case WebhookOutcome::kUnchanged:
      webhook_unchanged_.fetch_add(1);
      spdlog::debug("event=webhook_unchanged pod={} reason={}", Value(r.pod), Value(r.why));
      break;
    case WebhookOutcome::kDenied:
      webhook_denied_.fetch_add(1);
      spdlog::info("event=webhook_denied pod={} reason={}", Value(r.pod), Value(r.why));
      break;
    case WebhookOutcome::kInvalid:
      webhook_invalid_.fetch_add(1);
      spdlog::warn("event=webhook_bad_request error={}", Value(r.why));
      break;
  }
  return std::move(r.http);
}

Status SchedulerService::StartWebhook() {
  MutexLock l(&webhook_mu_);
  if (webhook_) return Status::Ok();
  net::HttpServerOptions h = options_.http;
  h.host = options_.webhook_host;
  h.port = options_.webhook_port;
  h.threads = std::min(options_.http.threads, 8);
  if (certs_) {
    if (!certs_->certs_in_place()) {
      webhook_error_ =
          "no serving certificate yet" +
          (certs_->stats().last_error.empty() ? "" : " (" + certs_->stats().last_error + ")");
      return Status::Unavailable("--webhook-listen: " + webhook_error_);
    }
    h.tls = {certs_->cert_file(), certs_->key_file(), ""};
  } else {
    h.tls = options_.webhook_tls;
  }
  h.tls.flag_prefix = "--webhook-";
  auto server = std::make_unique<net::HttpServer>(
      h, WebhookRoutes([this](std::string_view body) { return Mutate(body); }));
  if (Status s = server->Start(); !s.ok()) {
    webhook_error_ = s.message();
    return s.WithContext("--webhook-listen");
  }
  GPUSHARE_RETURN_IF_ERROR(
      WritePortFile(options_.webhook_port_file, "--webhook-port-file", server->port()));
  spdlog::info(
      "event=serving_webhook listen={}:{} path={} scheduler={} resource={} certificates={}", h.host,
      server->port(), kWebhookPath, Value(options_.webhook_scheduler_name),
      Value(options_.resource_name), certs_ ? "self-managed" : "files");
  webhook_ = std::move(server);
  webhook_error_.clear();
  return Status::Ok();
}

int SchedulerService::webhook_port() const {
  MutexLock l(&webhook_mu_);
  return webhook_ ? webhook_->port() : -1;
}

void SchedulerService::OnSynced() {
  if (synced_informers_.fetch_add(1) + 1 < 2) return;
  // Both informers have listed everything. Release what timed out while no scheduler watched,
  // then start deciding.
  cache_->SetSynced(true);  // first: the hold after a start is in place before any plan moves
  Sweep();
  ready_.store(true);
  const CacheStats s = cache_->stats();
  spdlog::info("event=cache_synced nodes={} usable_gpus={} pods={} expired={} unassigned={}",
               s.nodes, s.usable_gpus, s.pods, s.expired, s.unassigned);
}

Readiness SchedulerService::readiness() const {
  if (options_.webhook_port >= 0) {
    MutexLock l(&webhook_mu_);
    if (!webhook_)
      return {false, "webhook not serving: " +
                         (webhook_error_.empty() ? std::string("starting") : webhook_error_)};
  }
  if (ready_.load()) return {true, ""};
  std::string why = "cache not synced (";
  why += nodes_ && nodes_->HasSynced() ? "nodes listed" : "nodes not listed yet";
  why += ", ";
  why += pods_ && pods_->HasSynced() ? "pods listed" : "pods not listed yet";
  if (nodes_ && !nodes_->stats().last_error.empty())
    why += "; last error: " + nodes_->stats().last_error;
  else if (pods_ && !pods_->stats().last_error.empty())
    why += "; last error: " + pods_->stats().last_error;
  return {false, why + ")"};
}

void SchedulerService::Sweep() {
  // Empty planned slots nobody needs any more (core/memshare_ledger.h): the cache stops counting
  // them now; the pods' plans follow, so that gpushare-node stops offering them.
  for (const PlanMove& m : cache_->PlanMoves()) {
    // Only this pod: a pod created again under its name since (another UID) is not touched.
    Result<kube::Pod> r = client_->PatchPodAnnotations(
        ObjectKey::Of(m.key),
        {{std::string(memshare::kAssumedAnnotation), memshare::EncodeContainerGpus(m.to)}},
        kube::PatchOptions::IfUid(m.uid));
    if (r.ok()) {
      spdlog::info("event=plan_written pod={} to={}", Value(m.key),
                   Value(memshare::EncodeContainerGpus(m.to)));
    } else {
      spdlog::warn("event=plan_write_failed pod={} error={}", Value(m.key),
                   Value(r.status().message()));
    }
  }
  const int64_t timeout =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.assume_timeout).count();
  for (const ExpiredPod& e : cache_->ExpireAssumed(RealClock()->UnixNs(), timeout)) {
    expired_total_.fetch_add(1);
    const std::string msg =
        "GPU share assumed on node " + e.node + " (" + memshare::EncodeContainerGpus(e.gpus) +
        ", " + std::to_string(e.units) + " " +
        std::string(memshare::MemoryUnitName(options_.unit)) +
        ") was not confirmed by gpushare-node within " +
        std::to_string(options_.assume_timeout.count() / 1000) +
        "s and the pod is still Pending; gpushare-scheduler no longer reserves it";
    spdlog::warn("event=assume_expired pod={} node={} gpus={} units={} age_s={} detail={}",
                 Value(e.key), Value(e.node), Value(memshare::EncodeContainerGpus(e.gpus)), e.units,
                 e.age_ns / 1000000000, Value(msg));
    kube::ObjectReference ref;
    ref.api_version = "v1";
    ref.kind = "Pod";
    const ObjectKey key = ObjectKey::Of(e.key);
    ref.namespace_ = key.namespace_;
    ref.name = key.name;
    ref.uid = e.uid;
    events_->Record(ref, "Warning", std::string(reasons::kAssumeExpired), msg);
  }
}

void SchedulerService::SweepNominations() {
  const int64_t timeout =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.nomination_timeout).count();
  const int64_t pick =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.pick_hold).count();
  for (const Nomination& h : cache_->ExpireNominations(RealClock()->UnixNs(), timeout, pick))
    if (!h.pick)  // the cache logs an expired pick (event=pick_expired)
      spdlog::info("event=nomination_expired pod={} node={} gpus={} seen={}", Value(h.key),
                   Value(h.node), Value(memshare::EncodeContainerGpus(h.gpus)), h.seen);
}

void SchedulerService::SweepLoop() {
  mu_.Lock();
  while (!stopping_) {
    cv_.WaitFor(&mu_, options_.expiry_interval);
    if (stopping_) break;
    if (!ready_.load()) continue;
    mu_.Unlock();
    Sweep();
    SweepNominations();
    mu_.Lock();
  }
  mu_.Unlock();
}

std::string SchedulerService::Metrics() const {
  const ExtenderStats x = extender_ ? extender_->stats() : ExtenderStats{};
  const CacheStats c = cache_ ? cache_->stats() : CacheStats{};
  const net::HttpServerStats h = server_ ? server_->stats() : net::HttpServerStats{};
  MetricsSnapshot snap;
  snap.extender = &x;
  snap.cache = &c;
  snap.http = &h;
  snap.assume_expired = expired_total_.load();
  if (client_) {
    const kube::ClientStats api = client_->stats();
    snap.api_requests = api.requests;
    snap.api_connections = api.connections;
    snap.api_throttled = api.throttled;
  }
  snap.ready = ready_.load();
  WebhookCertStats certs;
  if (options_.webhook_port >= 0) {
    MetricsSnapshot::Webhook w;
    w.mutated = webhook_mutated_.load();
    w.unchanged = webhook_unchanged_.load();
    w.invalid = webhook_invalid_.load();
    w.denied = webhook_denied_.load();
    w.serving = webhook_port() >= 0;
    if (certs_) {
      certs = certs_->stats();
      w.certs = &certs;
    }
    snap.webhook = w;
  }
  std::vector<prometheus::MetricFamily> families = StatsFamilies(snap);
  for (prometheus::MetricFamily& f : metrics_.Collect()) families.push_back(std::move(f));
  if (gpu_metrics_)
    for (prometheus::MetricFamily& f : gpu_metrics_->Collect()) families.push_back(std::move(f));
  return Serialize(std::move(families));
}

void SchedulerService::Stop() {
  {
    MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (sweeper_.joinable()) sweeper_.join();
  if (certs_) certs_->Stop();
  {
    MutexLock l(&webhook_mu_);
    if (webhook_) webhook_->Stop();
  }
  if (health_) health_->Stop();
  if (server_) server_->Stop();
  if (budgets_) budgets_->Stop();
  if (pods_) pods_->Stop();
  if (nodes_) nodes_->Stop();
  events_.reset();
}

int RunScheduler(ServiceOptions options) {
  rlimit fds{};
  if (::getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur < fds.rlim_max) {
    fds.rlim_cur = fds.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &fds) != 0)
      spdlog::warn("event=rlimit_nofile_unchanged error={}", Value(std::strerror(errno)));
  }
  std::signal(SIGPIPE,
              SIG_IGN);  // a client that went away is an EPIPE, never the end of the process
  // Before any thread starts, so that every thread inherits the mask and the signals wait here.
  const UniqueFd signals = BlockSignals({SIGINT, SIGTERM});
  if (!signals) {
    spdlog::error("event=start_failed error={}",
                  Value(std::string("blocking signals: ") + std::strerror(errno)));
    return 1;
  }
  SchedulerService service(std::move(options));
  Status s = service.Start();
  if (!s.ok()) {
    spdlog::error("event=start_failed error={}", Value(s.message()));
    service.Stop();
    return 1;
  }
  const int sig = WaitSignal(signals);
  spdlog::info("event=stopping signal={}", sig == SIGTERM  ? "SIGTERM"
                                           : sig == SIGINT ? "SIGINT"
                                                           : "none (poll failed)");
  service.Stop();
  return 0;
}

}  // namespace gpushare::scheduler
