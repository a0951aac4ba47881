// gpushare-scheduler: the kube-scheduler HTTP extender for aliyun.com/gpu-mem memory shares.
//
//   gpushare-scheduler --listen ADDR:PORT --url-prefix PREFIX [--kubeconfig F] [--context C]
//                      [--port-file F] [--memory-unit GiB|MiB] [--resource-name R] [--policy default]
//                      [--assume-timeout 5m] [--expiry-interval 10s] [--max-body-bytes N]
//                      [--http-threads N] [--kube-api-qps Q] [--kube-api-burst B] [--log-level L]
//
// Serves PREFIX/filter, PREFIX/prioritize, PREFIX/bind, /healthz, /readyz, /metrics (see
// docs/scheduler.md). Exit status: 0 after SIGINT/SIGTERM, 1 when it cannot start, 2 for bad
// flags.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
  using namespace gpushare;
  CLI::App app{"gpushare-scheduler: kube-scheduler extender for aliyun.com/gpu-mem memory shares"};
  scheduler::ServiceOptions o;
  std::string listen = "0.0.0.0:12345", unit = "GiB", assume_timeout = "5m", expiry_interval = "10s";
  std::string restart_hold = "30s";
  std::string log_level = "info";
  o.http.url_prefix = "/gpushare-scheduler";
  app.add_option("--listen", listen, "ADDR:PORT to serve on (port 0 picks a free one; see --port-file)")
      ->capture_default_str();
  app.add_option("--url-prefix", o.http.url_prefix, "path prefix of the verbs: PREFIX/filter, PREFIX/prioritize, PREFIX/bind")
      ->capture_default_str();
  app.add_option("--kubeconfig", o.kubeconfig, "kubeconfig file (default: KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", o.context, "kubeconfig context (default: current-context)");
  app.add_option("--port-file", o.port_file, "write the listening port to this file once serving");
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
                 "those pods, or this long (0s: no hold)")
      ->capture_default_str();
  app.add_option("--max-body-bytes", o.http.max_body_bytes, "largest request body accepted (larger: HTTP 413)")
      ->capture_default_str();
  app.add_option("--http-threads", o.http.threads, "HTTP connections served at once (more wait; idle ones are given up for them)")->capture_default_str();
  app.add_option("--kube-api-qps", o.kube_qps, "client-side rate limit towards the API server (a bind takes 2 calls)")
      ->capture_default_str();
  app.add_option("--kube-api-burst", o.kube_burst, "burst of the client-side rate limit")->capture_default_str();
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
  std::optional<memshare::MemoryUnit> u = memshare::ParseMemoryUnit(unit);
  if (!u) return fail("--memory-unit: must be GiB or MiB, got \"" + unit + "\"");
  o.unit = *u;
  std::optional<int64_t> at = ParseDurationMs(assume_timeout);
  if (!at || *at <= 0) return fail("--assume-timeout: want a positive duration like 5m or 90s, got \"" + assume_timeout + "\"");
  o.assume_timeout = std::chrono::milliseconds(*at);
  std::optional<int64_t> ei = ParseDurationMs(expiry_interval);
  if (!ei || *ei <= 0) return fail("--expiry-interval: want a positive duration like 10s, got \"" + expiry_interval + "\"");
  o.expiry_interval = std::chrono::milliseconds(*ei);
  std::optional<int64_t> rh = ParseDurationMs(restart_hold);
  if (!rh || *rh < 0) return fail("--restart-hold: want a duration like 30s (0s: no hold), got \"" + restart_hold + "\"");
  o.restart_hold = std::chrono::milliseconds(*rh);
  if (const std::string p = ExtendedResourceNameProblem(o.resource_name); !p.empty() || o.resource_name.find('/') == std::string::npos)
    return fail("--resource-name: \"" + o.resource_name + "\" is not an extended resource name" + (p.empty() ? "" : ": " + p));
  if (o.http.max_body_bytes < 1024) return fail("--max-body-bytes: must be at least 1024");
  if (o.http.threads < 2 || o.http.threads > 1024) return fail("--http-threads: must be 2..1024");
  if (o.kube_burst < 1) return fail("--kube-api-burst: must be >= 1");
  if (!(o.kube_qps > 0)) return fail("--kube-api-qps: must be > 0");
  if (!placement::IsPolicyName(o.policy))
    return fail("--policy: unknown policy \"" + o.policy + "\" (known: " + placement::JoinedPolicyNames() + ")");
  Status logging = scheduler::ConfigureSchedulerLogging(log_level);
  if (!logging.ok()) return fail(logging.message());
  return scheduler::RunScheduler(std::move(o));
}
