// WebhookCertManager: the I/O loop around webhook_cert.h's decision (docs/webhook.md).
//
// At the start and then every check_interval (sooner, with backoff from 1 s to 30 s, after a
// pass that did not finish), one pass:
//   1. GET the Secret (404: absent); decide (DecideCert, at now());
//   2. when it must change: absent -> POST it (409 AlreadyExists: another replica won the race;
//      read theirs and decide again); present -> PUT it with its resourceVersion (409
//      Conflict: re-read and decide again). Every replica thus ends up serving the Secret's one
//      certificate;
//   3. write tls.crt and tls.key into cert_dir when they differ from what is there, atomically
//      (both files at once, through a symlink swap as kubelet does for Secret volumes): the
//      TLS server picks them up by its own reload (tls.h);
//   4. GET the MutatingWebhookConfiguration and JSON-patch every webhooks[i].clientConfig.
//      caBundle that differs from the bundle (a "test" of each webhook's name guards against a
//      concurrent reorder); absent: logged, and retried with the backoff.
// API calls it makes (the RBAC the chart grants): secrets get, create, update (in the Secret's
// namespace); mutatingwebhookconfigurations get, patch (resourceNames: the one configuration).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/sync.h"
#include "core/status.h"
#include "kube/client.h"
#include "scheduler/webhook_cert.h"

namespace gpushare::scheduler {

struct WebhookCertOptions {
  std::string cert_dir;          // --webhook-cert-dir
  std::string secret_namespace;  // --webhook-secret NAMESPACE/NAME
  std::string secret_name;
  std::string configuration;  // --webhook-configuration
  std::string service_name;   // --webhook-service NAME.NAMESPACE
  std::string service_namespace;
  std::chrono::milliseconds check_interval{std::chrono::hours(1)};  // --webhook-cert-check-interval
  std::chrono::milliseconds max_retry{std::chrono::seconds(30)};  // backoff cap after a failed pass
  CertPolicy policy;
  std::shared_ptr<Clock> clock = RealClock();  // its wall time (UnixNs) dates the certificates
};

struct WebhookCertStats {
  uint64_t passes = 0;
  uint64_t failures = 0;
  uint64_t secret_writes = 0;   // Secrets created or updated by this replica
  uint64_t conflicts = 0;       // 409s answered by re-reading
  uint64_t file_writes = 0;     // certificate pairs written into cert_dir
  uint64_t bundle_patches = 0;  // configuration patches
  std::string last_error;
  std::string last_action;  // CertActionName of the last decision
};

class WebhookCertManager {
 public:
  WebhookCertManager(std::shared_ptr<kube::Client> client, WebhookCertOptions options);
  ~WebhookCertManager();
  WebhookCertManager(const WebhookCertManager&) = delete;
  WebhookCertManager& operator=(const WebhookCertManager&) = delete;

  // One pass (steps 1-4). OK when the certificate files are in place and the configuration
  // carries the bundle.
  Status SyncOnce() GPUSHARE_EXCLUDES(mu_);
  // Runs passes on a thread until Stop(); `after_pass` (optional) is called after each one.
  void Start(std::function<void()> after_pass = {});
  void Stop() GPUSHARE_EXCLUDES(mu_);

  std::string cert_file() const { return options_.cert_dir + "/tls.crt"; }
  std::string key_file() const { return options_.cert_dir + "/tls.key"; }
  // Whether cert_file() and key_file() hold a certificate (written by a pass, or left by an
  // earlier run of this pod).
  bool certs_in_place() const;
  WebhookCertStats stats() const GPUSHARE_EXCLUDES(mu_);

 private:
  Result<CertMaterial> ReconcileSecret() GPUSHARE_EXCLUDES(mu_);
  Status WriteFiles(const CertMaterial& m) GPUSHARE_EXCLUDES(mu_);
  Status PatchConfiguration(const std::string& bundle) GPUSHARE_EXCLUDES(mu_);
  void Loop(std::function<void()> after_pass) GPUSHARE_EXCLUDES(mu_);
  int64_t Now() const;

  std::shared_ptr<kube::Client> client_;
  WebhookCertOptions options_;
  std::vector<std::string> dns_names_;
  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ GPUSHARE_GUARDED_BY(mu_) = false;
  WebhookCertStats stats_ GPUSHARE_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace gpushare::scheduler
