// gpushare-scheduler's command line, so that its main stays a flag parser (as node/serve.h is for
// gpushare-node): AddSchedulerFlags registers every flag on a CLI11 app, CheckSchedulerFlags
// checks what the app parsed and turns it into ServiceOptions.
//
// Every address, number and duration is checked; a problem is kInvalidArgument with a message
// that starts with the flag's name and says what would be accepted, e.g.
//   --http-threads: must be 2..1024, got 1
//   --listen: want ADDR:PORT, got "nowhere"
// (the main prints it and exits 2). Checks run in the order of --help; the first problem is
// returned. --log-level is checked by ConfigureSchedulerLogging (scheduler/service.h).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/service.h"

namespace CLI {
class App;
}

namespace gpushare::scheduler {

// The flags as given. Those without a check of their own go straight into `options` and
// `certs` (defaults included); the others are kept as text for CheckSchedulerFlags.
struct SchedulerFlags {
  SchedulerFlags();

  ServiceOptions options;
  WebhookCertOptions certs;  // --webhook-cert-dir, --webhook-configuration
  std::string listen = "127.0.0.1:12345";
  std::string health_listen;  // empty: none
  std::string metrics_auth = "kubernetes";
  std::string memory_unit = "GiB";
  std::string assume_timeout = "5m";
  std::string expiry_interval = "10s";
  std::string restart_hold = "30s";
  std::string preemption_budgets = "respect";
  std::string nomination_timeout = "60s";
  std::string filter_keep_best = "1";
  std::string pick_hold = "30s";
  std::string max_body_bytes = "8388608";
  std::string http_threads = "16";
  std::string bind_threads = "256";
  std::string http_max_connections = "0";
  std::string header_timeout = "10s";
  std::string read_timeout = "30s";
  std::string idle_timeout = "60s";
  std::string kube_api_qps = "500";
  std::string kube_api_burst = "1000";
  std::string log_level = "info";
  std::string webhook_listen;  // empty: no webhook
  std::string webhook_secret;
  std::string webhook_service;
  std::string webhook_interval = "1h";
};

// Registers every flag of gpushare-scheduler on `app`, writing into `flags` (which must outlive
// the parse).
void AddSchedulerFlags(CLI::App& app, SchedulerFlags& flags);

// Checks the flags `app` parsed into `flags` (the app tells which were given: the webhook's
// certificate flags go in one of two sets) and returns the service's options.
Result<ServiceOptions> CheckSchedulerFlags(const CLI::App& app, const SchedulerFlags& flags);

// The command line `args` (without the program name) parsed by `app`, on which AddSchedulerFlags
// registered `flags`, then CheckSchedulerFlags: what gpushare-scheduler's main and the tests both
// run. CLI11's --help and --version (exit code 0) pass through as its exceptions for the caller
// to print; any other refusal of CLI11 (an unknown flag, a missing value) is kInvalidArgument
// with CLI11's message, which names the flag.
Result<ServiceOptions> ParseSchedulerFlags(CLI::App& app, const SchedulerFlags& flags,
                                           const std::vector<std::string>& args);

}  // namespace gpushare::scheduler
