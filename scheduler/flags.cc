#include "scheduler/flags.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "base/strings.h"
#include "config/duration.h"
#include "core/memshare.h"
#include "core/object_key.h"
#include "core/placement/policy.h"
#include "core/resource_name.h"

namespace gpushare::scheduler {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kHour = 3600 * 1000;
constexpr int64_t kDay = 24 * kHour;

Status Bad(const std::string& message) {
  return Status::InvalidArgument(message);
}

// ADDR:PORT (ADDR may be empty for every address, or [v6]).
Status ParseListen(const std::string& flag, const std::string& listen, std::string* host,
                   int* port) {
  const size_t colon = listen.rfind(':');
  const std::string p = colon == std::string::npos ? "" : listen.substr(colon + 1);
  if (p.empty() || p.size() > 5 || !IsDigits(p) || std::stoi(p) > 65535)
    return Bad(flag + ": want ADDR:PORT, got \"" + listen + "\"");
  std::string h = listen.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  *host = h.empty() ? "0.0.0.0" : h;
  *port = std::stoi(p);
  return Status::Ok();
}

// A whole number in [lo, hi].
Result<int64_t> Whole(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  const bool negative = text.size() > 1 && text[0] == '-';
  if (!IsDigits(negative ? text.substr(1) : text))
    return Bad(flag + ": want a whole number " + range + ", got \"" + text + "\"");
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < lo || v > hi)
    return Bad(flag + ": must be " + range + ", got " + text);
  return int64_t{v};
}

// A Go duration in [lo_ms, hi_ms]; `range` says so in words.
Result<milliseconds> Duration(const std::string& flag, const std::string& text, int64_t lo_ms,
                              int64_t hi_ms, const std::string& range) {
  std::optional<int64_t> ms = ParseDurationMs(text);
  if (!ms) return Bad(flag + ": want a duration like 10s or 5m, got \"" + text + "\"");
  if (*ms < lo_ms || *ms > hi_ms) return Bad(flag + ": must be " + range + ", got " + text);
  return milliseconds(*ms);
}

// A DNS-1123 label (a namespace, a Service name): lowercase alphanumerics and '-', 1..63.
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// A DNS-1123 subdomain (object names, a pod's schedulerName): labels joined by '.', up to 253.
bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  for (;;) {
    const size_t dot = s.find('.', start);
    if (!IsDnsLabel(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start)))
      return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// "a", "a and b", "a, b and c".
std::string Listed(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
  return s;
}

// The listeners, TLS and the memory-share resource.
Status CheckServing(const SchedulerFlags& f, ServiceOptions* o) {
  GPUSHARE_RETURN_IF_ERROR(ParseListen("--listen", f.listen, &o->http.host, &o->http.port));
  if (!f.health_listen.empty())
    GPUSHARE_RETURN_IF_ERROR(
        ParseListen("--health-listen", f.health_listen, &o->health_host, &o->health_port));
  if (f.metrics_auth != "kubernetes" && f.metrics_auth != "none")
    return Bad("--metrics-auth: must be kubernetes or none, got \"" + f.metrics_auth + "\"");
  if (f.metrics_auth == "none") {
    auto loopback = [](const std::string& h) {
      return h == "localhost" || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0;
    };
    if (!loopback(o->http.host) || (o->health_port >= 0 && !loopback(o->health_host)))
      return Bad(
          "--metrics-auth: none serves /metrics to anyone, so it needs loopback listen addresses "
          "(--listen " +
          f.listen + (f.health_listen.empty() ? "" : ", --health-listen " + f.health_listen) +
          "); use kubernetes");
  }
  o->metrics_auth = f.metrics_auth;
  GPUSHARE_RETURN_IF_ERROR(net::ValidateTlsOptions(o->http.tls));
  std::optional<memshare::MemoryUnit> u = memshare::ParseMemoryUnit(f.memory_unit);
  if (!u) return Bad("--memory-unit: must be GiB or MiB, got \"" + f.memory_unit + "\"");
  o->unit = *u;
  return Status::Ok();
}

// The assume timeout, its sweep and the restart hold.
Status CheckAssume(const SchedulerFlags& f, ServiceOptions* o) {
  GPUSHARE_ASSIGN_OR_RETURN(o->assume_timeout,
                            Duration("--assume-timeout", f.assume_timeout, 1, 7 * kDay,
                                     "a positive duration up to 168h"));
  GPUSHARE_ASSIGN_OR_RETURN(o->expiry_interval, Duration("--expiry-interval", f.expiry_interval, 1,
                                                         kDay, "a positive duration up to 24h"));
  GPUSHARE_ASSIGN_OR_RETURN(
      o->restart_hold, Duration("--restart-hold", f.restart_hold, 0, kHour, "0s (no hold)..1h"));
  if (f.preemption_budgets == "respect") {
    o->preemption_budgets = placement::BudgetMode::kRespect;
  } else if (f.preemption_budgets == "best-effort") {
    o->preemption_budgets = placement::BudgetMode::kBestEffort;
  } else {
    return Bad("--preemption-budgets: must be respect or best-effort, got \"" +
               f.preemption_budgets + "\"");
  }
  GPUSHARE_ASSIGN_OR_RETURN(o->nomination_timeout,
                            Duration("--nomination-timeout", f.nomination_timeout, 1, kHour,
                                     "a positive duration up to 1h"));
  GPUSHARE_ASSIGN_OR_RETURN(o->pick_hold,
                            Duration("--pick-hold", f.pick_hold, 0, kHour, "0s (no picks)..1h"));
  GPUSHARE_ASSIGN_OR_RETURN(const int64_t keep,
                            Whole("--filter-keep-best", f.filter_keep_best, 0, 100000));
  o->filter_keep_best = static_cast<int>(keep);
  const std::string& name = o->resource_name;
  if (const std::string p = ExtendedResourceNameProblem(name);
      !p.empty() || name.find('/') == std::string::npos)
    return Bad("--resource-name: \"" + name + "\" is not an extended resource name" +
               (p.empty() ? "" : ": " + p));
  return Status::Ok();
}

// The HTTP server's limits and timeouts.
Status CheckHttp(const SchedulerFlags& f, net::HttpServerOptions* h) {
  GPUSHARE_ASSIGN_OR_RETURN(const int64_t body,
                            Whole("--max-body-bytes", f.max_body_bytes, 1024, int64_t{1} << 30));
  h->max_body_bytes = static_cast<size_t>(body);
  GPUSHARE_ASSIGN_OR_RETURN(const int64_t threads,
                            Whole("--http-threads", f.http_threads, 2, 1024));
  h->threads = static_cast<int>(threads);
  GPUSHARE_ASSIGN_OR_RETURN(const int64_t binds, Whole("--bind-threads", f.bind_threads, 1, 4096));
  h->bind_threads = static_cast<int>(binds);
  GPUSHARE_ASSIGN_OR_RETURN(const int64_t conns,
                            Whole("--http-max-connections", f.http_max_connections, 0, 1 << 20));
  if (conns != 0 && conns < 16)
    return Bad("--http-max-connections: must be 0 (from RLIMIT_NOFILE) or 16..1048576, got " +
               f.http_max_connections);
  h->max_connections = static_cast<int>(conns);
  GPUSHARE_ASSIGN_OR_RETURN(h->header_timeout, Duration("--http-read-header-timeout",
                                                        f.header_timeout, 100, kHour, "100ms..1h"));
  GPUSHARE_ASSIGN_OR_RETURN(
      h->read_timeout, Duration("--http-read-timeout", f.read_timeout, 100, kHour, "100ms..1h"));
  GPUSHARE_ASSIGN_OR_RETURN(
      h->idle_timeout, Duration("--http-idle-timeout", f.idle_timeout, 100, kDay, "100ms..24h"));
  return Status::Ok();
}

// The client-side rate limit towards the API server, and the placement policy.
Status CheckKubeApi(const SchedulerFlags& f, ServiceOptions* o) {
  const std::string& qps = f.kube_api_qps;
  char* end = nullptr;
  errno = 0;
  const double q = std::strtod(qps.c_str(), &end);
  if (qps.empty() || end == nullptr || *end != '\0' || errno == ERANGE || !std::isfinite(q) ||
      !(q > 0) || q > 100000)
    return Bad("--kube-api-qps: must be a number > 0 and <= 100000, got \"" + qps + "\"");
  o->kube_qps = q;
  GPUSHARE_ASSIGN_OR_RETURN(const int64_t burst,
                            Whole("--kube-api-burst", f.kube_api_burst, 1, 100000));
  o->kube_burst = static_cast<int>(burst);
  if (!placement::IsPolicyName(o->policy))
    return Bad("--policy: unknown policy \"" + o->policy +
               "\" (known: " + placement::JoinedPolicyNames() + ")");
  return Status::Ok();
}

// The webhook's certificate comes from files or is managed by gpushare.
const std::vector<std::string> kCertFiles = {"--webhook-tls-cert-file",
                                             "--webhook-tls-private-key-file"};
const std::vector<std::string> kManaged = {"--webhook-cert-dir", "--webhook-secret",
                                           "--webhook-configuration", "--webhook-service"};

std::vector<std::string> Given(const CLI::App& app, const std::vector<std::string>& flags) {
  std::vector<std::string> out;
  for (const std::string& f : flags)
    if (app.count(f) > 0) out.push_back(f);
  return out;
}

// Webhook flags given without --webhook-listen.
Status CheckNoWebhook(const CLI::App& app) {
  std::vector<std::string> any = Given(app, kCertFiles);
  for (const std::vector<std::string>& set :
       {kManaged,
        std::vector<std::string>{"--webhook-scheduler-name", "--webhook-cert-check-interval",
                                 "--webhook-port-file", "--hami-resources"}}) {
    for (const std::string& f : Given(app, set)) any.push_back(f);
  }
  return any.empty() ? Status::Ok() : Bad(Listed(any) + ": only with --webhook-listen");
}

// A certificate managed by gpushare: every flag of kManaged, each well formed.
Result<WebhookCertOptions> ManagedCerts(const CLI::App& app, const SchedulerFlags& f) {
  const std::vector<std::string> given = Given(app, kManaged);
  if (given.size() != kManaged.size()) {
    std::vector<std::string> missing;
    for (const std::string& x : kManaged)
      if (app.count(x) == 0) missing.push_back(x);
    return Bad(Listed(given) + ": a certificate managed by gpushare also needs " + Listed(missing));
  }
  WebhookCertOptions certs = f.certs;
  const ObjectKey secret = ObjectKey::Of(f.webhook_secret);  // no '/': no namespace, refused below
  certs.secret_namespace = secret.namespace_;
  certs.secret_name = secret.name;
  if (!IsDnsLabel(certs.secret_namespace) || !IsDnsSubdomain(certs.secret_name))
    return Bad("--webhook-secret: want NAMESPACE/NAME, got \"" + f.webhook_secret + "\"");
  const size_t dot = f.webhook_service.find('.');
  certs.service_name = dot == std::string::npos ? "" : f.webhook_service.substr(0, dot);
  certs.service_namespace = dot == std::string::npos ? "" : f.webhook_service.substr(dot + 1);
  if (!IsDnsLabel(certs.service_name) || !IsDnsLabel(certs.service_namespace))
    return Bad("--webhook-service: want NAME.NAMESPACE (the Service the API server calls), got \"" +
               f.webhook_service + "\"");
  if (!IsDnsSubdomain(certs.configuration))
    return Bad("--webhook-configuration: \"" + certs.configuration +
               "\" is not a valid object name");
  if (certs.cert_dir.empty()) return Bad("--webhook-cert-dir: empty");
  GPUSHARE_ASSIGN_OR_RETURN(
      certs.check_interval,
      Duration("--webhook-cert-check-interval", f.webhook_interval, 100, 7 * kDay, "100ms..168h"));
  return certs;
}

// The admission webhook's listener and certificate.
Status CheckWebhook(const CLI::App& app, const SchedulerFlags& f, ServiceOptions* o) {
  if (f.webhook_listen.empty()) return CheckNoWebhook(app);
  GPUSHARE_RETURN_IF_ERROR(
      ParseListen("--webhook-listen", f.webhook_listen, &o->webhook_host, &o->webhook_port));
  if (!IsDnsSubdomain(o->webhook_scheduler_name))
    return Bad("--webhook-scheduler-name: \"" + o->webhook_scheduler_name +
               "\" is not a valid scheduler name (DNS-1123 subdomain)");
  const std::vector<std::string> files = Given(app, kCertFiles), managed = Given(app, kManaged);
  const std::string ways = "the webhook's certificate comes either from files (" +
                           Listed(kCertFiles) + ") or is managed by gpushare (all of " +
                           Listed(kManaged) + ")";
  if (files.empty() && managed.empty()) return Bad("--webhook-listen: " + ways);
  if (!files.empty() && !managed.empty())
    return Bad(Listed(files) + " with " + Listed(managed) + ": choose one: " + ways);
  if (files.empty()) {
    GPUSHARE_ASSIGN_OR_RETURN(o->webhook_certs, ManagedCerts(app, f));
    return Status::Ok();
  }
  if (files.size() != kCertFiles.size())
    return Bad(Listed(files) + ": needs " + Listed(kCertFiles) + " together");
  if (app.count("--webhook-cert-check-interval") > 0)
    return Bad(
        "--webhook-cert-check-interval: only with a certificate managed by gpushare "
        "(--webhook-cert-dir ...)");
  return Status::Ok();
}

void AddServingFlags(CLI::App& app, SchedulerFlags& f) {
  ServiceOptions& o = f.options;
  app.add_option("--listen", f.listen,
                 "ADDR:PORT to serve the extender on; loopback by default, beside kube-scheduler "
                 "(port 0 picks a "
                 "free one; see --port-file)")
      ->capture_default_str();
  app.add_option("--url-prefix", o.url_prefix,
                 "path prefix of the verbs: PREFIX/filter, PREFIX/prioritize, PREFIX/bind")
      ->capture_default_str();
  app.add_option("--health-listen", f.health_listen,
                 "ADDR:PORT of a second, plain-HTTP listener with only /healthz, /readyz and "
                 "/metrics (for kubelet's "
                 "probes; default: none)");
  app.add_option("--metrics-auth", f.metrics_auth,
                 "who may GET /metrics: kubernetes (a bearer token checked with TokenReview and "
                 "SubjectAccessReview, default) or none (loopback listen addresses only)")
      ->capture_default_str();
  app.add_option("--tls-cert-file", o.http.tls.cert_file,
                 "serve the extender over HTTPS with this certificate (PEM, with intermediates); "
                 "re-read when it changes");
  app.add_option("--tls-private-key-file", o.http.tls.key_file,
                 "the private key of --tls-cert-file (PEM)");
  app.add_option(
      "--client-ca-file", o.http.tls.client_ca_file,
      "require client certificates signed by one of these CAs (PEM bundle): kube-scheduler's "
      "tlsConfig.certFile/keyFile");
  app.add_option("--kubeconfig", o.kubeconfig,
                 "kubeconfig file (default: KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", o.context, "kubeconfig context (default: current-context)");
  app.add_option("--port-file", o.port_file, "write the listening port to this file once serving");
  app.add_option("--health-port-file", o.health_port_file,
                 "write the --health-listen port to this file once serving");
}

void AddPlacementFlags(CLI::App& app, SchedulerFlags& f) {
  ServiceOptions& o = f.options;
  app.add_option("--memory-unit", f.memory_unit,
                 "what one aliyun.com/gpu-mem unit is: GiB or MiB (must match the nodes)")
      ->capture_default_str();
  app.add_option(
         "--resource-name", o.resource_name,
         "the memory-share resource pods ask for (gpushare-node's memoryShares.resourceName)")
      ->capture_default_str();
  app.add_option("--policy", o.policy,
                 "placement policy for prioritize and bind (default, fgd, bestfit, ...)")
      ->capture_default_str();
  app.add_option("--target-workload", o.target_workload,
                 "CSV of the pods the cluster runs (cpu_milli, num_gpu, gpu_milli[, count]; "
                 "gpushare simulate's pod list), which the policy weighs nodes against; "
                 "default: learnt from the pods bound to the nodes");
  app.add_option("--assume-timeout", f.assume_timeout,
                 "release a pod assumed at bind but not confirmed by gpushare-node (and still "
                 "Pending) after this long")
      ->capture_default_str();
  app.add_option("--expiry-interval", f.expiry_interval,
                 "how often assumed pods are checked against --assume-timeout")
      ->capture_default_str();
  app.add_option("--restart-hold", f.restart_hold,
                 "after a start, nodes with pods bound before it take no new shares until "
                 "gpushare-node confirmed "
                 "those pods, or this long (0s: no hold; at most 1h)")
      ->capture_default_str();
  app.add_option("--preemption-budgets", f.preemption_budgets,
                 "preempt: respect (never evict past a PodDisruptionBudget; no victims "
                 "instead) or best-effort (kube-scheduler's rule: fewest violations first)")
      ->capture_default_str();
  app.add_option("--nomination-timeout", f.nomination_timeout,
                 "preempt: how long the GPUs freed for a pod stay held once its victims are "
                 "gone (or, if kube-scheduler never nominates it there, from the start)")
      ->capture_default_str();
  app.add_option("--pick-hold", f.pick_hold,
                 "how long the GPUs the policy picks for a pod (the node filter keeps, or "
                 "prioritize ranks first) stay held for its bind; 0s: not held")
      ->capture_default_str();
  app.add_option("--filter-keep-best", f.filter_keep_best,
                 "N: filter passes only the N best nodes by the policy (1: kube-scheduler has one "
                 "node left, one exchange per pod), except for pods with soft placement "
                 "preferences; 0: every node that fits (kube-scheduler ranks them with "
                 "prioritize)")
      ->capture_default_str();
}

void AddLimitFlags(CLI::App& app, SchedulerFlags& f) {
  app.add_option("--max-body-bytes", f.max_body_bytes,
                 "largest request body accepted, 1024..1073741824 (larger: HTTP 413)")
      ->capture_default_str();
  app.add_option("--http-threads", f.http_threads,
                 "threads serving requests, 2..1024 (one of them watches every connection; idle or "
                 "slow ones cost no thread)")
      ->capture_default_str();
  app.add_option("--bind-threads", f.bind_threads,
                 "binds (API calls) in flight at most, 1..4096, each on a thread of its own and "
                 "never on the --http-threads (started as needed)")
      ->capture_default_str();
  app.add_option("--http-max-connections", f.http_max_connections,
                 "open connections at most, 16..1048576; the oldest idle ones are closed first (0: "
                 "from RLIMIT_NOFILE)")
      ->capture_default_str();
  app.add_option(
         "--http-read-header-timeout", f.header_timeout,
         "a request head (and a TLS handshake) must arrive within this of its first byte, else 408")
      ->capture_default_str();
  app.add_option("--http-read-timeout", f.read_timeout,
                 "a whole request, head and body, must arrive within this, else 408; also bounds "
                 "writing a reply")
      ->capture_default_str();
  app.add_option("--http-idle-timeout", f.idle_timeout,
                 "close a keep-alive connection idle this long")
      ->capture_default_str();
  app.add_option(
         "--kube-api-qps", f.kube_api_qps,
         "client-side rate limit towards the API server, 0 < Q <= 100000 (a bind takes 2 calls)")
      ->capture_default_str();
  app.add_option("--kube-api-burst", f.kube_api_burst,
                 "burst of the client-side rate limit, 1..100000")
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
}

void AddWebhookFlags(CLI::App& app, SchedulerFlags& f) {
  ServiceOptions& o = f.options;
  app.add_option("--webhook-listen", f.webhook_listen,
                 "ADDR:PORT of the mutating admission webhook (HTTPS only, POST /mutate-pods and "
                 "nothing else); "
                 "default: no webhook");
  app.add_option("--webhook-scheduler-name", o.webhook_scheduler_name,
                 "the spec.schedulerName the webhook sets on pods that request --resource-name")
      ->capture_default_str();
  app.add_flag("--hami-resources", o.webhook_hami_resources,
               "rewrite HAMi's pod spec (nvidia.com/gpu with nvidia.com/gpumem, "
               "gpumem-percentage or gpucores) into gpushare's resources at admission, and take "
               "schedulerName hami-scheduler as unset");
  app.add_option("--webhook-port-file", o.webhook_port_file,
                 "write the --webhook-listen port to this file once serving");
  app.add_option(
      "--webhook-tls-cert-file", o.webhook_tls.cert_file,
      "the webhook's serving certificate (PEM), managed by the operator; re-read when it changes");
  app.add_option("--webhook-tls-private-key-file", o.webhook_tls.key_file,
                 "the private key of --webhook-tls-cert-file");
  app.add_option("--webhook-cert-dir", f.certs.cert_dir,
                 "self-managed certificate: the directory (an emptyDir) where tls.crt and tls.key "
                 "are written");
  app.add_option("--webhook-secret", f.webhook_secret,
                 "self-managed certificate: NAMESPACE/NAME of the kubernetes.io/tls Secret holding "
                 "it and its CA, "
                 "shared by all replicas");
  app.add_option("--webhook-configuration", f.certs.configuration,
                 "self-managed certificate: the MutatingWebhookConfiguration whose webhooks' "
                 "caBundle is kept current");
  app.add_option("--webhook-service", f.webhook_service,
                 "self-managed certificate: NAME.NAMESPACE of the Service the API server calls "
                 "(the certificate's names)");
  app.add_option("--webhook-cert-check-interval", f.webhook_interval,
                 "self-managed certificate: how often the Secret is checked and rotated when due")
      ->capture_default_str();
}

}  // namespace

SchedulerFlags::SchedulerFlags() {
  options.url_prefix = "/gpushare-scheduler";
}

void AddSchedulerFlags(CLI::App& app, SchedulerFlags& flags) {
  AddServingFlags(app, flags);
  AddPlacementFlags(app, flags);
  AddLimitFlags(app, flags);
  AddWebhookFlags(app, flags);
}

Result<ServiceOptions> CheckSchedulerFlags(const CLI::App& app, const SchedulerFlags& flags) {
  ServiceOptions o = flags.options;
  GPUSHARE_RETURN_IF_ERROR(CheckServing(flags, &o));
  GPUSHARE_RETURN_IF_ERROR(CheckAssume(flags, &o));
  GPUSHARE_RETURN_IF_ERROR(CheckHttp(flags, &o.http));
  GPUSHARE_RETURN_IF_ERROR(CheckKubeApi(flags, &o));
  GPUSHARE_RETURN_IF_ERROR(CheckWebhook(app, flags, &o));
  return o;
}

Result<ServiceOptions> ParseSchedulerFlags(CLI::App& app, const SchedulerFlags& flags,
                                           const std::vector<std::string>& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) throw;  // --help, --version: the caller prints them
    return Status::InvalidArgument(e.what());
  }
  return CheckSchedulerFlags(app, flags);
}

}  // namespace gpushare::scheduler
