#include "node/serve.h"

#include <signal.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <optional>
#include <thread>

#include "base/logfmt.h"
#include "base/logging.h"
#include "base/signals.h"
#include "base/strings.h"
#include "config/duration.h"
#include "config/flag_checks.h"
#include "node/allocation_recorder.h"
#include "node/gpu_choice.h"
#include "node/metrics_service.h"
#include "node/node_pods.h"

namespace gpushare::node {
namespace {

using logfmt::Value;

class PollingFeed final : public HealthFeed {
 public:
  PollingFeed(std::unique_ptr<HealthEventSource> source, HealthSink sink)
      : source_(std::move(source)), sink_(std::move(sink)), thread_([this] { Loop(); }) {}
  ~PollingFeed() override {
    stop_ = true;
    thread_.join();
  }

 private:
  void Loop() {
    while (!stop_) {
      Result<HealthPoll> r = source_->Wait(std::chrono::milliseconds(200));
      if (!r.ok()) {
        spdlog::error("event=health_source_failed error={} action=mark_all_unhealthy",
                      Value(r.status().message()));
        HealthEvent lost;
        lost.kind = HealthEventKind::kDeviceLost;
        lost.detail = "health event source failed: " + r.status().message();
        sink_(lost);
        return;
      }
      for (const std::string& p : r->problems)
        spdlog::warn("event=health_event_malformed problem={}", Value(p));
      for (const HealthEvent& ev : r->events) {
        spdlog::info("event=health_event kind={} uuid={} xid={} detail={}",
                     ev.kind == HealthEventKind::kXid ? "xid" : "lost",
                     Value(ev.uuid.empty() ? "*" : ev.uuid), ev.xid,
                     Value(ev.detail.empty() ? "-" : ev.detail));
        sink_(ev);
      }
    }
  }

  std::unique_ptr<HealthEventSource> source_;
  HealthSink sink_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace

void PrintLines(const std::string& text) {
  for (const std::string& line : SplitLines(text)) std::fprintf(stderr, "%s\n", line.c_str());
}

void AddServeFlags(CLI::App& app, ServeFlags& flags) {
  app.add_option("--device-plugin-dir", flags.plugin_dir,
                 "kubelet's device plugin directory (our sockets go here)")
      ->capture_default_str();
  app.add_option("--kubelet-socket", flags.kubelet_socket,
                 "kubelet's registration socket (default <device-plugin-dir>/kubelet.sock)");
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  AddMemoryShareFlags(app, flags.memory);
  // Checked when the flags are parsed, whether or not memory shares are configured: from 100ms
  // (the PodResources API is not polled in a hot loop) to a day.
  if (CLI::Option* o = app.get_option_no_throw("--reconcile-interval")) {
    o->check(DurationIn(100, "100ms", 24 * 3600 * 1000, "24h"));
  }
  const CLI::Validator gc_range = DurationIn(1000, "1s", 24 * 3600 * 1000, "24h");
  app.add_option(
         "--gc-interval", flags.gc_interval,
         "how often per-container state directories no container uses and old library versions "
         "are removed (also at the start); 0 = never; else 1s..24h")
      ->check(CLI::Validator(
          [gc_range](std::string& v) -> std::string {
            if (v == "0") return "";
            std::string copy = v;
            std::string why = gc_range(copy);
            return why.empty()
                       ? ""
                       : "must be 0 (never) or a duration from 1s to 24h, like 10m, got " + v;
          },
          "0 or 1s..24h"))
      ->capture_default_str();
}

void BlockServeSignals() {
  // Only the mask matters here (every thread started later inherits it); the agent reads the
  // signals from a signalfd of its own.
  BlockSignals({SIGTERM, SIGINT, SIGHUP});
}

Status ConfigureLogging(const std::string& level) {
  if (::gpushare::ConfigureLogging(level)) return Status::Ok();
  return Status::InvalidArgument("--log-level: must be " + std::string(kLogLevels) + ", got " +
                                 level);
}

std::unique_ptr<HealthFeed> MakeHealthFeed(std::unique_ptr<HealthEventSource> source,
                                           HealthSink sink) {
  return std::make_unique<PollingFeed>(std::move(source), std::move(sink));
}

MetricsServiceOptions MetricsOptions(const ServeFlags& flags, const MetricsSettings& settings,
                                     std::string version, std::string commit) {
  MetricsServiceOptions mo;
  mo.settings = settings;
  mo.node_name = flags.memory.node_name;
  mo.kubeconfig = flags.memory.kubeconfig;
  mo.version = std::move(version);
  mo.commit = std::move(commit);
  return mo;
}

// The pods of this node, one informer for the allocation records and the GPU choices; null
// without --node-name or an API client (each then logs that it is off).
std::shared_ptr<kube::PodInformer> NodePodsFromFlags(const MemoryShareFlags& flags) {
  if (flags.node_name.empty()) return nullptr;
  Result<std::shared_ptr<kube::Client>> client = MakeApiClient(flags.kubeconfig, "node pods");
  if (!client.ok()) return nullptr;
  Result<std::shared_ptr<kube::PodInformer>> pods =
      StartNodePods(std::move(client).value(), flags.node_name);
  if (!pods.ok()) {
    spdlog::warn("event=node_pods_failed error={}", logfmt::Value(pods.status().message()));
    return nullptr;
  }
  return std::move(pods).value();
}

int Serve(ServeOptions options) {
  Status log = ConfigureLogging(options.flags.log_level);
  if (!log.ok()) {
    std::fprintf(stderr, "%s\n", log.message().c_str());
    return 2;
  }
  // Metrics and probes first, so that /healthz answers while the agent starts.
  std::unique_ptr<MetricsService> metrics;
  if (options.metrics) {
    MetricsServiceOptions mo =
        MetricsOptions(options.flags, *options.metrics, options.version, options.commit);
    mo.pod_resources_socket = options.flags.memory.pod_resources_socket;
    mo.interposer_paths = options.interposer_paths;
    Result<std::unique_ptr<MetricsService>> m = StartMetricsService(std::move(mo));
    if (!m.ok()) {
      PrintLines(m.status().message());
      return m.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    metrics = std::move(*m);
  }
  std::shared_ptr<NodeMetrics> observer = metrics ? metrics->metrics() : nullptr;
  auto recorder_inputs = std::make_shared<RecorderInputs>();  // gpushare.io/allocations
  AgentOptions a;
  a.observers.push_back(recorder_inputs);
  if (observer) {
    a.observers.push_back(observer);
    a.allocate_observers.push_back(observer);
    if (std::shared_ptr<AllocateEvents> events = metrics->allocate_events())
      a.allocate_observers.push_back(std::move(events));
  }
  a.plugin_dir = options.flags.plugin_dir;
  a.kubelet_socket = options.flags.kubelet_socket;
  a.load = std::move(options.load);
  a.decorator = std::move(options.decorator);
  a.memory_shares =
      MemoryShareFactoryFromFlags(options.flags.memory, [observer](std::string_view kind) {
        if (observer) observer->ReconcileCorrected(kind);
      });
  if (options.health_source) {
    a.health = [factory = std::move(options.health_source)](
                   const AgentInputs& in, HealthSink sink) -> Result<std::unique_ptr<HealthFeed>> {
      Result<std::unique_ptr<HealthEventSource>> src = factory(in);
      if (!src.ok()) return src.status();
      if (!*src) return std::unique_ptr<HealthFeed>();
      return MakeHealthFeed(std::move(src).value(), std::move(sink));
    };
  }
  // Time-slices, MIG devices and whole GPUs follow the GPU choices of the pods (needs the API).
  std::shared_ptr<kube::PodInformer> node_pods = NodePodsFromFlags(options.flags.memory);
  a.pending_asks = StartPendingAsksFromFlags(options.flags.memory, node_pods);
  a.on_load = std::move(options.on_load);
  std::optional<int64_t> gc_ms = ParseDurationMs(options.flags.gc_interval);
  if (!gc_ms) {
    std::fprintf(
        stderr, "--gc-interval: must be 0 (never) or a duration from 1s to 24h, like 10m, got %s\n",
        options.flags.gc_interval.c_str());
    return 2;
  }
  Agent agent(std::move(a));
  Status st = agent.Init();
  if (!st.ok()) {
    PrintLines(st.message());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  // Companions run beside the agent and are stopped (destroyed) before it.
  std::vector<std::unique_ptr<Companion>> companions;
  auto reload = [&agent] { agent.RequestReload(); };
  for (const CompanionFactory& f : options.companions) {
    if (std::unique_ptr<Companion> c = f(reload)) companions.push_back(std::move(c));
  }
  if (std::unique_ptr<Companion> c =
          StartAllocationRecorderFromFlags(options.flags.memory, recorder_inputs, node_pods))
    companions.push_back(std::move(c));
  if (options.interposer_paths) {
    LibraryGcOptions g;
    g.pod_resources_socket = options.flags.memory.pod_resources_socket;
    g.interval_ms = *gc_ms;
    if (std::unique_ptr<Companion> c = StartLibraryGc(options.interposer_paths, g))
      companions.push_back(std::move(c));
  }
  const int rc = agent.Run();
  companions.clear();
  metrics.reset();
  return rc;
}

}  // namespace gpushare::node
