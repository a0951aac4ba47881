// The node config loader as data: every file in tests/testdata/config/ is one test. Commands
// (docs/testing.md):
//
//   config [all] [env=KEY=VALUE]... [flag=setting=VALUE]... [argv="--flag value ..."]
//       the input is the config file (YAML or JSON, named node.yaml in locations); loads it with
//       the environment and the flags given (argv is parsed by the real command-line parser,
//       AddNodeConfigFlags, and the flags it records are printed first) and prints the resulting
//       NodeConfig, one `file.path: value` line per setting (only those that differ from
//       NodeConfig's defaults; with `all`, every one), then the notes and warnings; or the
//       status code and the problem lines.
//   duration
//       each input line is a duration; prints `<input> -> <milliseconds>` or `<input> -> invalid`.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <sstream>

#include "base/strings.h"
#include "config/duration.h"
#include "config/node_config_loader.h"
#include "node/plan_printer.h"
#include "tests/datadriven.h"

namespace gpushare {
namespace {

using datadriven::Case;

const char* Name(MigStrategy s) {
  return node::MigStrategyName(s);
}
const char* Name(DeviceIdStrategy s) {
  return s == DeviceIdStrategy::kUuid ? "uuid" : "index";
}
const char* Name(AllocationPolicy p) {
  return p == AllocationPolicy::kDistributed ? "distributed" : "packed";
}
const char* Name(ReplicaMemoryLimit l) {
  return l == ReplicaMemoryLimit::kNone ? "none" : "evenSplit";
}
const char* Name(ReplicaComputeLimit l) {
  return l == ReplicaComputeLimit::kNone ? "none" : "evenSplit";
}
const char* Name(MemoryComputeLimit l) {
  return l == MemoryComputeLimit::kNone ? "none" : "proportional";
}
const char* Bool(bool b) {
  return b ? "true" : "false";
}

template <typename T>
std::string List(const std::vector<T>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

std::string Selector(const DeviceSelector& d) {
  switch (d.kind) {
    case DeviceSelector::Kind::kAll:
      return "all";
    case DeviceSelector::Kind::kCount:
      return std::to_string(d.count);
    case DeviceSelector::Kind::kList:
      return List(d.items);
  }
  return "?";
}

std::string ListStrategy(const DeviceListStrategy& d) {
  std::vector<std::string> v;
  if (d.envvar) v.push_back("envvar");
  if (d.volume_mounts) v.push_back("volume-mounts");
  if (d.cdi_annotations) v.push_back("cdi-annotations");
  if (d.cdi_cri) v.push_back("cdi-cri");
  return List(v);
}

// Every field of a NodeConfig, one line each, named by its path in the config file (fields
// without a key of their own by the struct's path).
std::vector<std::string> ConfigLines(const NodeConfig& c) {
  const GpushareSettings& g = c.gpushare;
  const MemoryShares& m = g.memory_shares;
  std::vector<std::string> l = {
      "flags.migStrategy: " + std::string(Name(c.mig_strategy)),
      "flags.failOnInitError: " + std::string(Bool(c.fail_on_init_error)),
      "flags.nvidiaDriverRoot: " + c.plugin.nvidia_driver_root,
      "flags.nvidiaDevRoot: " + c.plugin.nvidia_dev_root,
      "flags.gdrcopyEnabled: " + std::string(Bool(c.gdrcopy_enabled)),
      "flags.gdsEnabled: " + std::string(Bool(c.gds_enabled)),
      "flags.mofedEnabled: " + std::string(Bool(c.mofed_enabled)),
      "flags.plugin.passDeviceSpecs: " + std::string(Bool(c.plugin.pass_device_specs)),
      "flags.plugin.deviceListStrategy: " + ListStrategy(c.plugin.device_list_strategy),
      "flags.plugin.deviceIDStrategy: " + std::string(Name(c.plugin.device_id_strategy)),
      "flags.plugin.cdiAnnotationPrefix: " + c.plugin.cdi_annotation_prefix,
      "flags.plugin.nvidiaCTKPath: " + c.plugin.nvidia_ctk_path,
      "flags.plugin.containerDriverRoot: " + c.plugin.container_driver_root,
      "plugin.cdi_vendor_class: " + c.plugin.cdi_vendor_class,
      "imex.channelIDs: " + List(c.imex.channel_ids),
      "imex.required: " + std::string(Bool(c.imex.required)),
      "sharing.timeSlicing.renameByDefault: " + std::string(Bool(c.time_slicing.rename_by_default)),
      "sharing.timeSlicing.failRequestsGreaterThanOne: " +
          std::string(Bool(c.time_slicing.fail_requests_greater_than_one)),
  };
  for (size_t i = 0; i < c.time_slicing.resources.size(); ++i) {
    const ReplicatedResource& r = c.time_slicing.resources[i];
    l.push_back("sharing.timeSlicing.resources[" + std::to_string(i) + "]: name=" + r.name +
                (r.rename.empty() ? "" : " rename=" + r.rename) +
                " devices=" + Selector(r.devices) + " replicas=" + std::to_string(r.replicas) +
                " field=" + r.field_path);
  }
  std::vector<std::string> more = {
      "gpushare.maxClientsPerGpu: " + std::to_string(g.max_clients_per_gpu),
      "gpushare.allocationPolicy: " + std::string(Name(g.allocation_policy)),
      "gpushare.timeSlicing.memoryLimit: " + std::string(Name(g.replica_memory_limit)),
      "gpushare.timeSlicing.computeLimit: " + std::string(Name(g.replica_compute_limit)),
      "gpushare.health.enabled: " + std::string(Bool(g.health_checks_enabled)),
      "gpushare.health.ignoredXids: " + List(g.ignored_xids),
      "gpushare.health.recoverAfter: " + std::to_string(g.health_recovery_seconds) + "s",
      "gpushare.interposer.hostDir: " +
          (g.interposer_host_dir.empty() ? "\"\"" : g.interposer_host_dir),
      "gpushare.interposer.stateDir: " + g.container_state_dir,
      "gpushare.memoryShares.devices: " + (m.devices ? Selector(*m.devices) : "none"),
      "gpushare.memoryShares.resourceName: " + m.resource_name,
      "gpushare.memoryShares.unit: " + std::string(memshare::MemoryUnitName(m.unit)),
      "gpushare.memoryShares.publishGpuCount: " + std::string(Bool(m.publish_gpu_count)),
      "gpushare.memoryShares.computeLimit: " + std::string(Name(m.compute_limit)),
      "gpushare.memoryShares.fractions: " + std::string(Bool(m.fractions)),
  };
  l.insert(l.end(), more.begin(), more.end());
  return l;
}

std::pair<std::string, std::string> KeyValue(const std::string& kv) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos) return {kv, ""};
  return {kv.substr(0, eq), kv.substr(eq + 1)};
}

std::string RunConfig(const Case& c) {
  std::string out;
  Environment env;
  for (const std::string& kv : c.Values("env")) env.insert(KeyValue(kv));
  NodeConfigFlags flags;
  for (const std::string& kv : c.Values("flag")) flags.values.insert(KeyValue(kv));
  if (auto argv = c.Value("argv")) {
    CLI::App app;
    AddNodeConfigFlags(app, flags);
    std::vector<std::string> words = {"gpushare-node"};
    std::istringstream is(*argv);
    for (std::string w; is >> w;) words.push_back(w);
    std::vector<char*> ptrs;
    for (std::string& w : words) ptrs.push_back(w.data());
    try {
      app.parse(static_cast<int>(ptrs.size()), ptrs.data());
    } catch (const CLI::ParseError& e) {
      return "command line: " + std::string(e.what()) + "\n";
    }
    if (!flags.config_file.empty()) out += "command line: config file " + flags.config_file + "\n";
    for (const auto& [k, v] : flags.values) out += "command line: " + k + "=" + v + "\n";
  }
  auto r = LoadNodeConfigFromText(flags, env, c.input, "node.yaml");
  if (!r.ok())
    return out + "error: " + std::string(StatusCodeName(r.status().code())) + "\n" +
           r.status().message() + "\n";
  const std::vector<std::string> lines = ConfigLines(r->config);
  const std::vector<std::string> defaults = ConfigLines(NodeConfig{});
  size_t printed = 0;
  for (const std::string& line : lines) {
    if (c.Has("all") || std::find(defaults.begin(), defaults.end(), line) == defaults.end()) {
      out += line + "\n";
      ++printed;
    }
  }
  if (printed == 0) out += "(every setting has its default)\n";
  for (const std::string& n : r->notes) out += "note: " + n + "\n";
  for (const std::string& w : r->warnings) out += "warning: " + w + "\n";
  return out;
}

std::string RunDuration(const Case& c) {
  std::string out;
  for (const std::string& line : SplitLines(c.input)) {
    // The input is written as a quoted string when it has spaces or is empty: "" or "5 m".
    std::string s = line;
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    auto ms = ParseDurationMs(s);
    out += line + " -> " + (ms ? std::to_string(*ms) + " ms" : "invalid") + "\n";
  }
  return out;
}

std::string RunCase(const Case& c) {
  if (c.command == "config") return RunConfig(c);
  if (c.command == "duration") return RunDuration(c);
  return "unknown command \"" + c.command + "\" (config, duration)\n";
}

const std::string kDataDir = std::string(GPUSHARE_SOURCE_DIR) + "/tests/testdata/config";

class ConfigData : public ::testing::TestWithParam<std::string> {};

TEST_P(ConfigData, File) {
  const int n = datadriven::RunDataFile(GetParam(), RunCase);
  EXPECT_GT(n, 0) << GetParam() << " has no cases";
}

INSTANTIATE_TEST_SUITE_P(Testdata, ConfigData, ::testing::ValuesIn(datadriven::DataFiles(kDataDir)),
                         datadriven::FileParamName);

}  // namespace
}  // namespace gpushare
