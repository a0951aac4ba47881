// SchedulerService: gpushare-scheduler assembled: API client, informers on nodes and pods
// feeding the GpuCache, the Extender behind the HTTP server (with PREFIX/inspect, read from the
// informers, and PREFIX/debug/cache, read from the cache: scheduler/inspect.h), the
// assume-timeout sweeper and the event recorder. cli/gpushare-scheduler only parses flags into
// ServiceOptions.
//
// Start order (docs/scheduler.md): the HTTP server listens first (so /healthz answers and
// the extender verbs say "cache not synced" instead of timing out), then the informers list
// nodes and pods; once both have synced, one assume-timeout sweep runs and only then does the
// cache accept decisions and /readyz turn 200. A restart therefore rebuilds everything from
// the API before it decides anything.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "base/sync.h"
#include "core/memshare.h"
#include "core/status.h"
#include "kube/authz.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "net/http_server.h"
#include "scheduler/cache.h"
#include "scheduler/extender.h"
#include "scheduler/metrics.h"
#include "scheduler/routes.h"
#include "scheduler/webhook.h"
#include "scheduler/webhook_certs.h"

namespace gpushare::scheduler {

struct ServiceOptions {
  std::string kubeconfig;  // --kubeconfig; empty: KUBECONFIG, in-cluster, ~/.kube/config
  std::string context;
  net::HttpServerOptions http;
  std::string url_prefix = "/gpushare-scheduler";  // --url-prefix: the verbs' paths
  std::string port_file;  // written (atomically) with the listening port once serving
  // --health-listen: a second, plain-HTTP listener with only /healthz, /readyz and /metrics
  // (kubelet's probes reach a hostNetwork pod at the node's address, not at 127.0.0.1).
  // health_port < 0: none.
  std::string health_host;
  int health_port = -1;
  std::string health_port_file;  // written with the health listener's port once serving
  // --metrics-auth: who may GET /metrics on either listener. "kubernetes": a bearer token that
  // the API server authenticates (TokenReview) and authorizes for GET on the non-resource URL
  // /metrics (SubjectAccessReview), decisions cached (kube/authz.h); "none": anyone (only with
  // loopback listen addresses, checked by the flags).
  std::string metrics_auth = "kubernetes";
  memshare::MemoryUnit unit = memshare::MemoryUnit::kGiB;
  std::string resource_name = std::string(memshare::kResourceName);
  std::string policy = "default";
  // --target-workload: a CSV of the pods the cluster runs (scheduler/target_workload.h); empty:
  // the policy learns the workload from the pods it sees.
  std::string target_workload;
  std::chrono::milliseconds assume_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds expiry_interval{std::chrono::seconds(10)};
  // After the start, nodes with pods bound before it take no new shares until those pods are
  // confirmed by gpushare-node, or this long (0: not at all). See GpuCache.
  std::chrono::milliseconds restart_hold{std::chrono::seconds(30)};
  // Preemption (scheduler/preempt.h): whether a victim set may break a PodDisruptionBudget, and
  // how long a hold on the GPUs freed for a pod lasts once its victims are gone (or, when
  // kube-scheduler never nominates the pod there, from the start).
  placement::BudgetMode preemption_budgets = placement::BudgetMode::kRespect;
  int filter_keep_best = 1;  // --filter-keep-best (ExtenderOptions::filter_keep_best)
  std::chrono::milliseconds nomination_timeout{std::chrono::seconds(60)};
  // --pick-hold: how long the policy's pick for a pod is held for its bind (GpuCache::Pick);
  // 0: no picks.
  std::chrono::milliseconds pick_hold{std::chrono::seconds(30)};
  double kube_qps = 500;  // one API call per bind (and a GET when a bind conflicts)
  int kube_burst = 1000;
  std::string event_component = "gpushare-scheduler";

  // The admission webhook (docs/webhook.md): a separate HTTPS listener serving only POST
  // /mutate-pods. webhook_port < 0: none. Its certificate is either webhook_tls (files the
  // operator manages) or, when webhook_certs is set, created and rotated by this process.
  std::string webhook_host;
  int webhook_port = -1;
  std::string webhook_port_file;  // written with the webhook listener's port once serving
  std::string webhook_scheduler_name = std::string(kDefaultWebhookSchedulerName);
  bool webhook_hami_resources = false;  // --hami-resources: HAMi's pod spec rewritten
  net::TlsOptions webhook_tls;
  std::optional<WebhookCertOptions> webhook_certs;
};

class SchedulerService {
 public:
  explicit SchedulerService(ServiceOptions options);
  ~SchedulerService();
  SchedulerService(const SchedulerService&) = delete;
  SchedulerService& operator=(const SchedulerService&) = delete;

  Status Start() GPUSHARE_EXCLUDES(webhook_mu_);
  void Stop() GPUSHARE_EXCLUDES(mu_, webhook_mu_);

  Readiness readiness() const GPUSHARE_EXCLUDES(webhook_mu_);
  int port() const { return server_ ? server_->port() : -1; }
  int health_port() const { return health_ ? health_->port() : -1; }
  // The webhook listener's port once it serves, else -1.
  int webhook_port() const GPUSHARE_EXCLUDES(webhook_mu_);
  WebhookCertManager* webhook_certs() { return certs_.get(); }
  GpuCache& cache() { return *cache_; }
  // The /metrics text (scheduler/metrics.h).
  std::string Metrics() const GPUSHARE_EXCLUDES(webhook_mu_);
  kube::EventRecorder* events() { return events_.get(); }

 private:
  void OnSynced();
  HttpReply Mutate(std::string_view body);
  // Starts the webhook listener if it is not serving yet (self-managed: once the certificate
  // files are in place).
  Status StartWebhook() GPUSHARE_EXCLUDES(webhook_mu_);
  void SweepLoop() GPUSHARE_EXCLUDES(mu_);
  void Sweep();
  void SweepNominations();

  ServiceOptions options_;
  std::unique_ptr<GpuCache> cache_;
  std::shared_ptr<kube::Client> client_;
  std::unique_ptr<kube::NodeInformer> nodes_;
  std::unique_ptr<kube::PodInformer> pods_;
  std::unique_ptr<kube::PodDisruptionBudgetInformer> budgets_;  // for preempt only
  std::unique_ptr<kube::EventRecorder> events_;
  std::unique_ptr<kube::RequestAuthorizer> metrics_authz_;  // --metrics-auth=kubernetes
  // 200, or the refusal of a /metrics request (HealthHandlers::metrics_auth).
  std::pair<int, std::string> AuthorizeMetrics(std::string_view authorization);
  SchedulerMetrics metrics_;
  std::unique_ptr<GpuCollector> gpu_metrics_;
  std::unique_ptr<Extender> extender_;
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<net::HttpServer> health_;
  std::unique_ptr<WebhookCertManager> certs_;
  mutable Mutex webhook_mu_;
  std::unique_ptr<net::HttpServer> webhook_ GPUSHARE_GUARDED_BY(webhook_mu_);  // set once serving
  std::string webhook_error_ GPUSHARE_GUARDED_BY(webhook_mu_);  // why it does not serve yet
  std::atomic<uint64_t> webhook_mutated_{0}, webhook_unchanged_{0}, webhook_invalid_{0},
      webhook_denied_{0};
  std::atomic<int> synced_informers_{0};
  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> expired_total_{0};
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GPUSHARE_GUARDED_BY(mu_) = false;
  std::thread sweeper_;
};

// Configures the "gpushare" spdlog logger (key=value lines on stderr) at `level`.
Status ConfigureSchedulerLogging(const std::string& level);

// Runs the service until SIGINT/SIGTERM; returns the exit status (0, 1 on start failure).
// Raises the soft RLIMIT_NOFILE to the hard limit first (as Go programs do), so that the HTTP
// server's connection limit is the system's, not a shell's default of 1024.
int RunScheduler(ServiceOptions options);

}  // namespace gpushare::scheduler
