// Serve: the wiring of gpushare-node's serving mode, so that the main stays a flag parser.
//
// AddServeFlags registers the serving flags (--device-plugin-dir, --kubelet-socket,
// --log-level, and memory mode's --node-name, --kubeconfig, --pod-resources-socket,
// --reconcile-interval); Serve builds an Agent (node/agent.h) from a loader and a health-source
// factory, runs it and returns the process exit status: 0 after SIGTERM/SIGINT, 2 when the
// inputs are invalid (every problem printed, one per line), 1 for anything else.
// MakeHealthFeed adapts a gpu/ HealthEventSource (NVML or the events file) to the agent's
// HealthFeed: a thread that waits for events and hands them over.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "gpu/health_events.h"
#include "node/agent.h"
#include "node/memshare_service.h"

namespace CLI {
class App;
}

namespace gpushare::node {

struct ServeFlags {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket;  // empty = <plugin_dir>/kubelet.sock
  std::string log_level = "info";
  MemoryShareFlags memory;     // --node-name, --kubeconfig, --pod-resources-socket, ...
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

struct ServeOptions {
  ServeFlags flags;
  InputLoader load;                   // called at start and on every SIGHUP
  HealthSourceFactory health_source;  // optional
  DecoratorFactory decorator;         // optional: the interposer's additions to Allocate
};

int Serve(ServeOptions options);

// A feed that polls `source` from its own thread and calls `sink` for every event. When the
// source breaks, every GPU is reported lost (NVIDIA marks every device Unhealthy then).
std::unique_ptr<HealthFeed> MakeHealthFeed(std::unique_ptr<HealthEventSource> source, HealthSink sink);

}  // namespace gpushare::node
