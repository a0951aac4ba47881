// gpushare-node: the node agent (one per GPU node, as a DaemonSet).
//
// Modes:
//   --print-resources [--output table|json|node]   load config + inventory, print the resource
//                                             plan, exit (0; 2 on any config/plan problem)
//   (default)                                 serve the plan to kubelet (see RunServe)
// Both modes load their inputs the same way (LoadInputs): config first (flag > environment >
// file; the file from --config, or from --config-dir chosen by the node's label, through a
// node::ConfigSource), then the inventory (--inventory FILE, or NVML), then the plan. Every config
// or plan problem is printed on stderr, one line each, and the exit status is 2 before anything is
// served. An inventory that cannot be discovered follows failOnInitError.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/version.h"
#include "config/node_config_loader.h"
#include "core/resource_plan.h"
#include "gpu/file_inventory.h"
#include "gpu/inventory_source.h"
#include "gpu/nvml_inventory.h"
#include "node/config_source.h"
#include "node/interposer_mounts.h"
#include "node/memshare_service.h"
#include "node/metrics_service.h"
#include "node/plan_printer.h"
#include "node/serve.h"

namespace {

using namespace gpushare;

constexpr int kExitInvalid = 2;  // config, inventory file or plan problems

struct MainOptions {
  NodeConfigFlags config_flags;
  node::ConfigSourceFlags
      config_source;           // --config-dir, --config-node-label, --default-config, ...
  std::string inventory_file;  // empty = NVML
  NvmlInventoryOptions nvml;
  std::string health_events_file;  // simulated health events (with --inventory)
  std::string interposer_library;  // installed into gpushare.interposer.hostDir (versioned)
  bool print_resources = false;
  std::string output = "table";
  node::ServeFlags serve;  // --device-plugin-dir, --kubelet-socket, --log-level
};

// What both modes work from.
struct Inputs {
  LoadedNodeConfig config;
  Inventory inventory;
  ResourcePlan plan;
};

// Why LoadInputs failed: `invalid` (exit 2) for problems in what the operator wrote, or an
// inventory that could not be discovered (handled per failOnInitError).
struct LoadFailure {
  Status status;
  bool invalid = false;
  bool fail_on_init_error = true;
};

std::unique_ptr<InventorySource> MakeInventorySource(const MainOptions& o) {
  if (!o.inventory_file.empty()) return MakeFileInventorySource(o.inventory_file);
  return std::make_unique<NvmlInventorySource>(o.nvml);
}

// Loads config, inventory and plan; on failure says whether the problem is the operator's
// input (exit 2) or GPU discovery (failOnInitError decides).
bool LoadInputs(const MainOptions& o, node::ConfigSource& config_source, const Environment& env,
                Inputs* out, LoadFailure* fail) {
  Result<node::ConfigSnapshot> snap = config_source.Next();
  if (!snap.ok()) {
    *fail = {snap.status(), true};
    return false;
  }
  auto config = snap->path.empty()
                    ? LoadNodeConfigWithNotes(o.config_flags, env)
                    : LoadNodeConfigFromText(o.config_flags, env, snap->text, snap->path);
  if (!config.ok()) {
    *fail = {config.status(), true};
    return false;
  }
  out->config = std::move(*config);
  fail->fail_on_init_error = out->config.config.fail_on_init_error;
  auto source = MakeInventorySource(o);
  auto inv = source->Load();
  if (!inv.ok()) {
    // A broken inventory file is the operator's input; NVML trouble is discovery.
    *fail = {inv.status(), !o.inventory_file.empty(), out->config.config.fail_on_init_error};
    return false;
  }
  out->inventory = std::move(*inv);
  if (out->inventory.gpus.empty()) {
    *fail = {Status::NotFound(source->Describe() + " lists no GPUs"), false,
             out->config.config.fail_on_init_error};
    return false;
  }
  auto plan = BuildResourcePlan(out->inventory, out->config.config);
  if (!plan.ok()) {
    *fail = {plan.status(), true};
    return false;
  }
  out->plan = std::move(*plan);
  return true;
}

// The config's notes for the agent's log, with its warnings (a file without settings) first.
std::vector<std::string> ConfigNotes(const LoadedNodeConfig& c) {
  std::vector<std::string> notes;
  for (const auto& w : c.warnings) notes.push_back("warning: " + w);
  notes.insert(notes.end(), c.notes.begin(), c.notes.end());
  return notes;
}

int PrintResources(const MainOptions& o, const Inputs& in) {
  for (const auto& w : in.config.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  node::PlanPrintInput p;
  p.inventory = &in.inventory;
  p.config = &in.config.config;
  p.plan = &in.plan;
  p.config_path = in.config.config_path;
  p.notes = in.config.notes;
  p.node_name = o.serve.memory.node_name;
  if (o.output == "node" && p.node_name.empty()) {
    std::fprintf(stderr, "--output node: needs --node-name (the Node's name)\n");
    return kExitInvalid;
  }
  const node::PlanFormat format = o.output == "json"   ? node::PlanFormat::kJson
                                  : o.output == "node" ? node::PlanFormat::kNode
                                                       : node::PlanFormat::kTable;
  std::string text = node::FormatPlan(p, format);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

// Blocks until SIGTERM or SIGINT (failOnInitError=false on a node without GPUs).
int WaitIdle() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int sig = 0;
  sigwait(&set, &sig);
  std::fprintf(stderr, "level=info msg=\"stopping\" signal=%d\n", sig);
  return 0;
}

// The serving mode: device plugins for every planned resource (node/serve.h). The first load
// is the one main already did; SIGHUP reloads config and inventory the same way.
int RunServe(const MainOptions& o, const std::shared_ptr<node::ConfigSource>& source,
             const Inputs& in) {
  node::ServeOptions s;
  s.flags = o.serve;
  auto first = std::make_shared<bool>(true);
  s.load = [&o, &in, first, source]() -> Result<node::AgentInputs> {
    if (*first) {
      *first = false;
      return node::AgentInputs{in.inventory, in.config.config, ConfigNotes(in.config)};
    }
    Inputs fresh;
    LoadFailure fail;
    if (!LoadInputs(o, *source, ProcessEnvironment(), &fresh, &fail)) return fail.status;
    return node::AgentInputs{std::move(fresh.inventory), std::move(fresh.config.config),
                             ConfigNotes(fresh.config)};
  };
  s.health_source = [&o](const node::AgentInputs& a) -> Result<std::unique_ptr<HealthEventSource>> {
    if (!o.health_events_file.empty()) return MakeEventsFileSource(o.health_events_file);
    if (!o.inventory_file.empty()) return std::unique_ptr<HealthEventSource>();  // simulated: none
    auto nvml = NvmlLibrary::Open(o.nvml.library_path);
    if (!nvml.ok()) return nvml.status();
    return MakeNvmlHealthEventSource(*nvml, a.inventory);
  };
  // In-container GPU limits (docs/interposer.md); the library installed first when given.
  s.interposer_paths = std::make_shared<node::InterposerPaths>();
  s.decorator =
      node::InterposerDecoratorFactory(o.interposer_library, cli::kVersion, s.interposer_paths);
  // Automatic reload: the config file (or the directory and the node's label) is watched.
  s.on_load = [source](bool accepted) { source->Outcome(accepted); };
  // /metrics, /healthz, /readyz (gpushare.metrics, read at start: a reload does not move them).
  s.metrics = in.config.config.gpushare.metrics;
  s.version = cli::kVersion;
  s.commit = cli::kGitCommit;
  s.companions.push_back(
      [source](std::function<void()> reload) { return node::StartConfigWatch(source, reload); });
  return node::Serve(std::move(s));
}

// The config's source: --config FILE ($CONFIG_FILE) or --config-dir DIR with the node's label
// read from the API server.
Result<std::shared_ptr<node::ConfigSource>> OpenConfigSource(const MainOptions& o,
                                                             const Environment& env) {
  return node::OpenConfigSourceFromFlags(o.config_source, o.config_flags.config_file, env,
                                         o.serve.memory.node_name, o.serve.memory.kubeconfig);
}

}  // namespace

int main(int argc, char** argv) {
  MainOptions o;
  CLI::App app{"gpushare-node: advertises whole, time-sliced and MIG GPUs to kubelet",
               "gpushare-node"};
  app.set_version_flag("--version", gpushare::cli::VersionLine("gpushare-node"));
  AddNodeConfigFlags(app, o.config_flags);
  node::AddConfigSourceFlags(app, o.config_source);
  app.add_option("--inventory", o.inventory_file,
                 "simulated inventory file (YAML, docs/inventory.md) instead of NVML");
  app.add_option("--nvml-library", o.nvml.library_path, "NVML library to dlopen")
      ->capture_default_str();
  app.add_option("--sysfs-pci-root", o.nvml.sysfs_pci_root,
                 "where PCI devices are listed (for NUMA nodes)")
      ->capture_default_str();
  app.add_option("--health-events", o.health_events_file,
                 "follow this file for injected health events (lines like `xid=79 uuid=GPU-...`)");
  app.add_option(
         "--interposer-library", o.interposer_library,
         "install this libgpushare-cuda.so into gpushare.interposer.hostDir at a versioned path "
         "(<hostDir>/<version>-<hash>/) and mount that file; the image's is "
         "/usr/lib/gpushare/libgpushare-cuda.so")
      ->envname("GPUSHARE_INTERPOSER_LIBRARY");
  node::AddServeFlags(app, o.serve);
  app.add_flag("--print-resources", o.print_resources, "print the resource plan and exit");
  app.add_option("--output", o.output,
                 "format of --print-resources: table, json, or node (the Node object a node with "
                 "this plan shows in the API: its inventory annotation and allocatable; with "
                 "--node-name)")
      ->check(CLI::IsMember({"table", "json", "node"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitInvalid;
  }

  // Serving: SIGTERM/SIGINT/SIGHUP are read from a signalfd, so they are blocked before any
  // thread (NVML's, gRPC's) exists.
  if (!o.print_resources) node::BlockServeSignals();

  // Logs go to stderr in both modes (--print-resources writes its plan on stdout).
  Status log = node::ConfigureLogging(o.serve.log_level);
  if (!log.ok()) {
    std::fprintf(stderr, "%s\n", log.message().c_str());
    return kExitInvalid;
  }
  Result<std::shared_ptr<node::ConfigSource>> source = OpenConfigSource(o, ProcessEnvironment());
  if (!source.ok()) {
    node::PrintLines(source.status().message());
    return source.status().code() == StatusCode::kInvalidArgument ? kExitInvalid : 1;
  }
  Inputs in;
  LoadFailure fail;
  if (!LoadInputs(o, **source, ProcessEnvironment(), &in, &fail)) {
    if (fail.invalid) {
      node::PrintLines(fail.status.message());
      return kExitInvalid;
    }
    InitFailureDecision d = DecideOnInitFailure(fail.status, fail.fail_on_init_error);
    std::fprintf(stderr, "level=error msg=\"%s\"\n", d.message.c_str());
    if (o.print_resources || d.action == InitFailureAction::kExit)
      return d.action == InitFailureAction::kExit ? d.exit_code : 1;
    // Idle (failOnInitError=false): /healthz answers (the liveness probe must not restart an
    // agent that waits on purpose), /readyz says why it is not ready.
    Result<std::unique_ptr<node::MetricsService>> idle =
        node::StartMetricsService(node::MetricsOptions(o.serve, in.config.config.gpushare.metrics,
                                                       cli::kVersion, cli::kGitCommit));
    if (!idle.ok()) {
      node::PrintLines(idle.status().message());
      return kExitInvalid;
    }
    return WaitIdle();
  }
  if (o.print_resources) return PrintResources(o, in);
  return RunServe(o, *source, in);
}
