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
//                      [--webhook-listen ADDR:PORT [--webhook-scheduler-name NAME]
//                      [--webhook-port-file F]
//                       (--webhook-tls-cert-file F --webhook-tls-private-key-file F |
//                        --webhook-cert-dir DIR --webhook-secret NS/NAME --webhook-configuration
//                        NAME
//                        --webhook-service NAME.NS [--webhook-cert-check-interval 1h])]
//
// Serves PREFIX/filter, PREFIX/prioritize, PREFIX/bind, /healthz, /readyz, /metrics (see
// docs/scheduler.md), and with --webhook-listen the admission webhook POST /mutate-pods on a
// separate HTTPS listener (docs/webhook.md). Exit status: 0 after SIGINT/SIGTERM, 1 when it cannot
// start, 2 for bad flags (every number and duration is range-checked, and the message names the
// flag: scheduler/flags.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/version.h"
#include "scheduler/flags.h"
#include "scheduler/service.h"

namespace {

constexpr int kExitInvalid = 2;

int Fail(const std::string& message) {
  std::fprintf(stderr, "gpushare-scheduler: %s\n", message.c_str());
  return kExitInvalid;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpushare;
  CLI::App app{"gpushare-scheduler: kube-scheduler extender for aliyun.com/gpu-mem memory shares"};
  app.set_version_flag("--version", cli::VersionLine("gpushare-scheduler"));
  scheduler::SchedulerFlags flags;
  scheduler::AddSchedulerFlags(app, flags);
  if (argc > 0) app.name(argv[0]);  // as CLI11's parse(argc, argv) names it, for --help
  const std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  std::optional<Result<scheduler::ServiceOptions>> parsed;
  try {
    parsed.emplace(scheduler::ParseSchedulerFlags(app, flags, args));
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // --help or --version, printed; 0
  }
  Result<scheduler::ServiceOptions>& options = *parsed;
  if (!options.ok()) return Fail(options.status().message());
  if (Status logging = scheduler::ConfigureSchedulerLogging(flags.log_level); !logging.ok())
    return Fail(logging.message());
  return scheduler::RunScheduler(std::move(options).value());
}
