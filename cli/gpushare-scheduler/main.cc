// gpushare-scheduler: the kube-scheduler HTTP extender for aliyun.com/gpu-mem memory shares.
//
//   gpushare-scheduler [--listen 127.0.0.1:12345] [--url-prefix PREFIX] [--health-listen ADDR:PORT]
//                      [--tls-cert-file F --tls-private-key-file F [--client-ca-file F]]
//                      [--kubeconfig F] [--context C] [--port-file F] [--health-port-file F]
//                      [--memory-unit GiB|MiB] [--resource-name R] [--policy default]
//                      [--assume-timeout 5m] [--expiry-interval 10s] [--max-body-bytes N]
//                      [--http-threads N] [--http-max-connections N] [--http-read-header-timeout D]
//                      [--http-read-timeout D] [--http-idle-timeout D] [--kube-api-qps Q]
//                      [--kube-api-burst B] [--log-level L]
//                      [--webhook-listen ADDR:PORT [--webhook-scheduler-name NAME] [--webhook-port-file F]
//                       (--webhook-tls-cert-file F --webhook-tls-private-key-file F |
//                        --webhook-cert-dir DIR --webhook-secret NS/NAME --webhook-configuration NAME
//                        --webhook-service NAME.NS [--webhook-cert-check-interval 1h])]
//
// Serves PREFIX/filter, PREFIX/prioritize, PREFIX/bind, /healthz, /readyz, /metrics (see
// docs/scheduler.md), and with --webhook-listen the admission webhook POST /mutate-pods on a
// separate HTTPS listener (docs/webhook.md). Exit status: 0 after SIGINT/SIGTERM, 1 when it cannot start, 2 for bad
// flags (every number and duration is range-checked, and the message names the flag).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/version.h"
#include "config/duration.h"
#include "core/memshare.h"
#include "core/placement/policy.h"
#include "core/resource_name.h"
#include "scheduler/service.h"

namespace {

constexpr int kExitInvalid = 2;

bool SplitListen(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) return false;
  std::string h = listen.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string p = listen.substr(colon + 1);
  for (char c : p)
    if (c < '0' || c > '9') return false;
  if (p.size() > 5) return false;
  const int v = std::stoi(p);
  if (v > 65535) return false;
  *host = h.empty() ? "0.0.0.0" : h;
  *port = v;
  return true;
}

// A whole number in [lo, hi], or the message that says why not (naming the flag).
std::string ParseWhole(const std::string& flag, const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  bool digits = !text.empty();
  for (size_t i = 0; i < text.size(); ++i)
    if (!(text[i] >= '0' && text[i] <= '9') && !(i == 0 && text[i] == '-' && text.size() > 1)) digits = false;
  if (!digits) return flag + ": want a whole number " + range + ", got \"" + text + "\"";
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < lo || v > hi) return flag + ": must be " + range + ", got " + text;
  *out = v;
  return "";
}

// A Go duration in [lo_ms, hi_ms].
std::string ParseDuration(const std::string& flag, const std::string& text, int64_t lo_ms, int64_t hi_ms,
                          const std::string& range, int64_t* out_ms) {
  std::optional<int64_t> ms = gpushare::ParseDurationMs(text);
  if (!ms) return flag + ": want a duration like 10s or 5m, got \"" + text + "\"";
  if (*ms < lo_ms || *ms > hi_ms) return flag + ": must be " + range + ", got " + text;
  *out_ms = *ms;
  return "";
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
    if (!IsDnsLabel(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// The webhook flags into `o` ("" when fine, else the message naming the flags).
std::string WebhookFlags(CLI::App& app, const std::string& listen, const std::string& secret,
                         const std::string& service, const std::string& interval,
                         gpushare::scheduler::WebhookCertOptions certs, gpushare::scheduler::ServiceOptions* o) {
  const std::vector<std::string> files = {"--webhook-tls-cert-file", "--webhook-tls-private-key-file"};
  const std::vector<std::string> managed = {"--webhook-cert-dir", "--webhook-secret", "--webhook-configuration",
                                            "--webhook-service"};
  auto given = [&app](const std::vector<std::string>& flags) {
    std::vector<std::string> out;
    for (const std::string& f : flags)
      if (app.count(f) > 0) out.push_back(f);
    return out;
  };
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
    return s;
  };
  std::vector<std::string> any = given(files), m = given(managed);
  any.insert(any.end(), m.begin(), m.end());
  for (const std::string& f : given({"--webhook-scheduler-name", "--webhook-cert-check-interval", "--webhook-port-file"}))
    any.push_back(f);
  if (listen.empty()) {
    if (!any.empty()) return join(any) + ": only with --webhook-listen";
    return "";
  }
  if (!SplitListen(listen, &o->webhook_host, &o->webhook_port))
    return "--webhook-listen: want ADDR:PORT, got \"" + listen + "\"";
  if (!IsDnsSubdomain(o->webhook_scheduler_name))
    return "--webhook-scheduler-name: \"" + o->webhook_scheduler_name + "\" is not a valid scheduler name (DNS-1123 subdomain)";
  const std::vector<std::string> f = given(files), g = given(managed);
  const std::string ways = "the webhook's certificate comes either from files (" + join(files) +
                           ") or is managed by gpushare (all of " + join(managed) + ")";
  if (f.empty() && g.empty()) return "--webhook-listen: " + ways;
  if (!f.empty() && !g.empty()) return join(f) + " with " + join(g) + ": choose one: " + ways;
  if (!f.empty()) {
    if (f.size() != files.size()) return join(f) + ": needs " + join(files) + " together";
    if (app.count("--webhook-cert-check-interval") > 0)
      return "--webhook-cert-check-interval: only with a certificate managed by gpushare (--webhook-cert-dir ...)";
    return "";
  }
  if (g.size() != managed.size()) {
    std::vector<std::string> missing;
    for (const std::string& x : managed)
      if (app.count(x) == 0) missing.push_back(x);
    return join(g) + ": a certificate managed by gpushare also needs " + join(missing);
  }
  const size_t slash = secret.find('/');
  certs.secret_namespace = slash == std::string::npos ? "" : secret.substr(0, slash);
  certs.secret_name = slash == std::string::npos ? "" : secret.substr(slash + 1);
  if (!IsDnsLabel(certs.secret_namespace) || !IsDnsSubdomain(certs.secret_name))
    return "--webhook-secret: want NAMESPACE/NAME, got \"" + secret + "\"";
  const size_t dot = service.find('.');
  certs.service_name = dot == std::string::npos ? "" : service.substr(0, dot);
  certs.service_namespace = dot == std::string::npos ? "" : service.substr(dot + 1);
  if (!IsDnsLabel(certs.service_name) || !IsDnsLabel(certs.service_namespace))
    return "--webhook-service: want NAME.NAMESPACE (the Service the API server calls), got \"" + service + "\"";
  if (!IsDnsSubdomain(certs.configuration))
    return "--webhook-configuration: \"" + certs.configuration + "\" is not a valid object name";
  if (certs.cert_dir.empty()) return "--webhook-cert-dir: empty";
  int64_t ms = 0;
  if (std::string why = ParseDuration("--webhook-cert-check-interval", interval, 100, 7 * 24 * 3600 * 1000LL,
                                      "100ms..168h", &ms);
      !why.empty())
    return why;
  certs.check_interval = std::chrono::milliseconds(ms);
  o->webhook_certs = std::move(certs);
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpushare;
  CLI::App app{"gpushare-scheduler: kube-scheduler extender for aliyun.com/gpu-mem memory shares"};
  app.set_version_flag("--version", cli::VersionLine("gpushare-scheduler"));
  scheduler::ServiceOptions o;
  std::string listen = "127.0.0.1:12345", health_listen, unit = "GiB", assume_timeout = "5m", expiry_interval = "10s";
  std::string restart_hold = "30s";
  std::string max_body = "8388608", threads = "16", max_connections = "0", header_timeout = "10s", read_timeout = "30s",
              idle_timeout = "60s", qps = "500", burst = "1000";
  std::string log_level = "info";
  o.http.url_prefix = "/gpushare-scheduler";
  app.add_option("--listen", listen,
                 "ADDR:PORT to serve the extender on; loopback by default, beside kube-scheduler (port 0 picks a "
                 "free one; see --port-file)")
      ->capture_default_str();
  app.add_option("--url-prefix", o.http.url_prefix, "path prefix of the verbs: PREFIX/filter, PREFIX/prioritize, PREFIX/bind")
      ->capture_default_str();
  app.add_option("--health-listen", health_listen,
                 "ADDR:PORT of a second, plain-HTTP listener with only /healthz, /readyz and /metrics (for kubelet's "
                 "probes; default: none)");
  app.add_option("--tls-cert-file", o.http.tls.cert_file,
                 "serve the extender over HTTPS with this certificate (PEM, with intermediates); re-read when it changes");
  app.add_option("--tls-private-key-file", o.http.tls.key_file, "the private key of --tls-cert-file (PEM)");
  app.add_option("--client-ca-file", o.http.tls.client_ca_file,
                 "require client certificates signed by one of these CAs (PEM bundle): kube-scheduler's "
                 "tlsConfig.certFile/keyFile");
  app.add_option("--kubeconfig", o.kubeconfig, "kubeconfig file (default: KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", o.context, "kubeconfig context (default: current-context)");
  app.add_option("--port-file", o.port_file, "write the listening port to this file once serving");
  app.add_option("--health-port-file", o.health_port_file, "write the --health-listen port to this file once serving");
  app.add_option("--memory-unit", unit, "what one aliyun.com/gpu-mem unit is: GiB or MiB (must match the nodes)")
      ->capture_default_str();
  app.add_option("--resource-name", o.resource_name,
                 "the memory-share resource pods ask for (gpushare-node's memoryShares.resourceName)")
      ->capture_default_str();
  app.add_option("--policy", o.policy, "placement policy for prioritize and bind (default, fgd, bestfit, ...)")
      ->capture_default_str();
  app.add_option("--assume-timeout", assume_timeout,
                 "release a pod assumed at bind but not confirmed by gpushare-node (and still Pending) after this long")
      ->capture_default_str();
  app.add_option("--expiry-interval", expiry_interval, "how often assumed pods are checked against --assume-timeout")
      ->capture_default_str();
  app.add_option("--restart-hold", restart_hold,
                 "after a start, nodes with pods bound before it take no new shares until gpushare-node confirmed "
                 "those pods, or this long (0s: no hold; at most 1h)")
      ->capture_default_str();
  app.add_option("--max-body-bytes", max_body, "largest request body accepted, 1024..1073741824 (larger: HTTP 413)")
      ->capture_default_str();
  app.add_option("--http-threads", threads, "threads serving requests, 2..1024 (one of them watches every connection; idle or slow ones cost no thread)")
      ->capture_default_str();
  app.add_option("--http-max-connections", max_connections,
                 "open connections at most, 16..1048576; the oldest idle ones are closed first (0: from RLIMIT_NOFILE)")
      ->capture_default_str();
  app.add_option("--http-read-header-timeout", header_timeout,
                 "a request head (and a TLS handshake) must arrive within this of its first byte, else 408")
      ->capture_default_str();
  app.add_option("--http-read-timeout", read_timeout,
                 "a whole request, head and body, must arrive within this, else 408; also bounds writing a reply")
      ->capture_default_str();
  app.add_option("--http-idle-timeout", idle_timeout, "close a keep-alive connection idle this long")
      ->capture_default_str();
  app.add_option("--kube-api-qps", qps, "client-side rate limit towards the API server, 0 < Q <= 100000 (a bind takes 2 calls)")
      ->capture_default_str();
  app.add_option("--kube-api-burst", burst, "burst of the client-side rate limit, 1..100000")->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")->capture_default_str();
  std::string webhook_listen, webhook_secret, webhook_service, webhook_interval = "1h";
  scheduler::WebhookCertOptions certs;
  app.add_option("--webhook-listen", webhook_listen,
                 "ADDR:PORT of the mutating admission webhook (HTTPS only, POST /mutate-pods and nothing else); "
                 "default: no webhook");
  app.add_option("--webhook-scheduler-name", o.webhook_scheduler_name,
                 "the spec.schedulerName the webhook sets on pods that request --resource-name")
      ->capture_default_str();
  app.add_option("--webhook-port-file", o.webhook_port_file, "write the --webhook-listen port to this file once serving");
  app.add_option("--webhook-tls-cert-file", o.webhook_tls.cert_file,
                 "the webhook's serving certificate (PEM), managed by the operator; re-read when it changes");
  app.add_option("--webhook-tls-private-key-file", o.webhook_tls.key_file, "the private key of --webhook-tls-cert-file");
  app.add_option("--webhook-cert-dir", certs.cert_dir,
                 "self-managed certificate: the directory (an emptyDir) where tls.crt and tls.key are written");
  app.add_option("--webhook-secret", webhook_secret,
                 "self-managed certificate: NAMESPACE/NAME of the kubernetes.io/tls Secret holding it and its CA, "
                 "shared by all replicas");
  app.add_option("--webhook-configuration", certs.configuration,
                 "self-managed certificate: the MutatingWebhookConfiguration whose webhooks' caBundle is kept current");
  app.add_option("--webhook-service", webhook_service,
                 "self-managed certificate: NAME.NAMESPACE of the Service the API server calls (the certificate's names)");
  app.add_option("--webhook-cert-check-interval", webhook_interval,
                 "self-managed certificate: how often the Secret is checked and rotated when due")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help (rc 0) or the problem
    return rc == 0 ? 0 : kExitInvalid;
  }

  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "gpushare-scheduler: %s\n", m.c_str());
    return kExitInvalid;
  };
  if (!SplitListen(listen, &o.http.host, &o.http.port)) return fail("--listen: want ADDR:PORT, got \"" + listen + "\"");
  if (!health_listen.empty() && !SplitListen(health_listen, &o.health_host, &o.health_port))
    return fail("--health-listen: want ADDR:PORT, got \"" + health_listen + "\"");
  if (Status s = scheduler::ValidateTlsOptions(o.http.tls); !s.ok()) return fail(s.message());
  std::optional<memshare::MemoryUnit> u = memshare::ParseMemoryUnit(unit);
  if (!u) return fail("--memory-unit: must be GiB or MiB, got \"" + unit + "\"");
  o.unit = *u;
  constexpr int64_t kDay = 24 * 3600 * 1000;
  int64_t v = 0;
  std::string why;
  if (!(why = ParseDuration("--assume-timeout", assume_timeout, 1, 7 * kDay, "a positive duration up to 168h", &v)).empty())
    return fail(why);
  o.assume_timeout = std::chrono::milliseconds(v);
  if (!(why = ParseDuration("--expiry-interval", expiry_interval, 1, kDay, "a positive duration up to 24h", &v)).empty())
    return fail(why);
  o.expiry_interval = std::chrono::milliseconds(v);
  if (!(why = ParseDuration("--restart-hold", restart_hold, 0, 3600 * 1000, "0s (no hold)..1h", &v)).empty())
    return fail(why);
  o.restart_hold = std::chrono::milliseconds(v);
  if (const std::string p = ExtendedResourceNameProblem(o.resource_name); !p.empty() || o.resource_name.find('/') == std::string::npos)
    return fail("--resource-name: \"" + o.resource_name + "\" is not an extended resource name" + (p.empty() ? "" : ": " + p));
  if (!(why = ParseWhole("--max-body-bytes", max_body, 1024, int64_t{1} << 30, &v)).empty()) return fail(why);
  o.http.max_body_bytes = static_cast<size_t>(v);
  if (!(why = ParseWhole("--http-threads", threads, 2, 1024, &v)).empty()) return fail(why);
  o.http.threads = static_cast<int>(v);
  if (!(why = ParseWhole("--http-max-connections", max_connections, 0, 1 << 20, &v)).empty()) return fail(why);
  if (v != 0 && v < 16) return fail("--http-max-connections: must be 0 (from RLIMIT_NOFILE) or 16..1048576, got " + max_connections);
  o.http.max_connections = static_cast<int>(v);
  const std::string timeout_range = "100ms..1h";
  if (!(why = ParseDuration("--http-read-header-timeout", header_timeout, 100, 3600 * 1000, timeout_range, &v)).empty())
    return fail(why);
  o.http.header_timeout = std::chrono::milliseconds(v);
  if (!(why = ParseDuration("--http-read-timeout", read_timeout, 100, 3600 * 1000, timeout_range, &v)).empty())
    return fail(why);
  o.http.read_timeout = std::chrono::milliseconds(v);
  if (!(why = ParseDuration("--http-idle-timeout", idle_timeout, 100, kDay, "100ms..24h", &v)).empty()) return fail(why);
  o.http.idle_timeout = std::chrono::milliseconds(v);
  {
    char* end = nullptr;
    errno = 0;
    const double q = std::strtod(qps.c_str(), &end);
    if (qps.empty() || end == nullptr || *end != '\0' || errno == ERANGE || !std::isfinite(q) || !(q > 0) || q > 100000)
      return fail("--kube-api-qps: must be a number > 0 and <= 100000, got \"" + qps + "\"");
    o.kube_qps = q;
  }
  if (!(why = ParseWhole("--kube-api-burst", burst, 1, 100000, &v)).empty()) return fail(why);
  o.kube_burst = static_cast<int>(v);
  if (!placement::IsPolicyName(o.policy))
    return fail("--policy: unknown policy \"" + o.policy + "\" (known: " + placement::JoinedPolicyNames() + ")");
  if (!(why = WebhookFlags(app, webhook_listen, webhook_secret, webhook_service, webhook_interval, certs, &o)).empty())
    return fail(why);
  Status logging = scheduler::ConfigureSchedulerLogging(log_level);
  if (!logging.ok()) return fail(logging.message());
  return scheduler::RunScheduler(std::move(o));
}
