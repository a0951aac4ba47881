// Serve: the wiring of gpushare-node's serving mode, so that the main stays a flag parser.
//
// AddServeFlags registers the serving flags (--device-plugin-dir, --kubelet-socket,
// --log-level, --gc-interval, and memory mode's --node-name, --kubeconfig,
// --pod-resources-socket, --reconcile-interval); Serve builds an Agent (node/agent.h) from a loader
// and a health-source factory, runs it and returns the process exit status: 0 after SIGTERM/SIGINT,
// 2 when the inputs are invalid (every problem printed, one per line), 1 for anything else.
// MakeHealthFeed adapts a gpu/ HealthEventSource (NVML or the events file) to the agent's
// HealthFeed: a thread that waits for events and hands them over.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/node_config.h"
#include "core/status.h"
#include "gpu/health_events.h"
#include "node/agent.h"
#include "node/library_gc.h"
#include "node/memshare_service.h"
#include "node/metrics_service.h"

namespace CLI {
class App;
}

namespace gpushare::node {

struct ServeFlags {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket;  // empty = <plugin_dir>/kubelet.sock
  std::string log_level = "info";
  MemoryShareFlags memory;  // --node-name, --kubeconfig, --pod-resources-socket, ...
  std::string gc_interval =
      "10m";  // --gc-interval: collection of state dirs and old libraries; 0 = never
};

void AddServeFlags(CLI::App& app, ServeFlags& flags);

// Prints a multi-line message (one problem per line) on stderr, skipping empty lines.
void PrintLines(const std::string& text);

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (and so in every thread created
// after it). Call first thing in main when serving: the agent reads them from a signalfd.
void BlockServeSignals();

// Structured logs on stderr: `ts=... level=info event=... key=value`. Levels: trace, debug,
// info, warn, error, off. kInvalidArgument for an unknown level.
Status ConfigureLogging(const std::string& level);

// Returns the node's health event source for a set of inputs, or null for none.
using HealthSourceFactory =
    std::function<Result<std::unique_ptr<HealthEventSource>>(const AgentInputs& inputs)>;

// Starts a Companion once the agent is initialised; `request_reload` is the agent's
// RequestReload. May return null (nothing to run).
using CompanionFactory =
    std::function<std::unique_ptr<Companion>(std::function<void()> request_reload)>;

struct ServeOptions {
  ServeFlags flags;
  InputLoader load;                   // called at start and on every SIGHUP (or requested reload)
  HealthSourceFactory health_source;  // optional
  DecoratorFactory decorator;         // optional: the interposer's additions to Allocate
  std::function<void(bool accepted)> on_load;  // optional: AgentOptions::on_load
  std::vector<CompanionFactory> companions;    // optional: started after Init, stopped after Run
  // Optional: where the loads put the interposer's files; with it (and --gc-interval > 0) the
  // collection of node/library_gc.h runs.
  std::shared_ptr<InterposerPaths> interposer_paths;
  // Optional: /metrics, /healthz, /readyz (node/metrics_service.h), from the first load's
  // gpushare.metrics; version and commit for gpushare_build_info.
  std::optional<MetricsSettings> metrics;
  std::string version, commit;
};

int Serve(ServeOptions options);

// The metrics service's options from the serving flags (the node's name and API access) and the
// loaded gpushare.metrics settings: what both a serving agent and an idle one
// (failOnInitError=false) start with. A serving agent adds its PodResources socket and
// interposer paths.
MetricsServiceOptions MetricsOptions(const ServeFlags& flags, const MetricsSettings& settings,
                                     std::string version, std::string commit);

// A feed that polls `source` from its own thread and calls `sink` for every event. When the
// source breaks, every GPU is reported lost (NVIDIA marks every device Unhealthy then).
std::unique_ptr<HealthFeed> MakeHealthFeed(std::unique_ptr<HealthEventSource> source,
                                           HealthSink sink);

}  // namespace gpushare::node
