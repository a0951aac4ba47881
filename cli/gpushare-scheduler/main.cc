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
//
// Serves PREFIX/filter, PREFIX/prioritize, PREFIX/bind, /healthz, /readyz, /metrics (see
// docs/scheduler.md). Exit status: 0 after SIGINT/SIGTERM, 1 when it cannot start, 2 for bad
// flags (every number and duration is range-checked, and the message names the flag).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

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
  Status logging = scheduler::ConfigureSchedulerLogging(log_level);
  if (!logging.ok()) return fail(logging.message());
  return scheduler::RunScheduler(std::move(o));
}
