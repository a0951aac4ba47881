// The settings table of config/node_settings.cc: every row writes the field its key names,
// and only that field, whichever level (file, environment, flag) the value comes from.
//
// Why: the loader once wrote gpushare.maxClientsPerGpu for every integer setting, and the one
// field of the duration and integer-list kinds likewise, so a second setting of such a kind
// would have silently written the wrong field. Here each key is set on its own to a value
// distinct from the default, and the whole config is read back field by field.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "base/strings.h"
#include "config/node_config_loader.h"

namespace gpushare {
namespace {

using Fields = std::map<std::string, std::string>;

std::string Text(bool b) {
  return b ? "true" : "false";
}
template <typename E>
std::string Text(E e) {
  return std::to_string(static_cast<int>(e));
}

std::string Text(const DeviceListStrategy& d) {
  return Text(d.envvar) + Text(d.volume_mounts) + Text(d.cdi_annotations) + Text(d.cdi_cri);
}

std::string Text(const std::vector<uint32_t>& xs) {
  std::vector<std::string> parts;
  for (uint32_t x : xs) parts.push_back(std::to_string(x));
  return Join(parts, ",");
}

// Every field of NodeConfig that a setting may write, printed, by field name.
Fields Snapshot(const NodeConfig& c) {
  const PluginFlags& p = c.plugin;
  const GpushareSettings& g = c.gpushare;
  return {
      {"mig_strategy", Text(c.mig_strategy)},
      {"fail_on_init_error", Text(c.fail_on_init_error)},
      {"gdrcopy_enabled", Text(c.gdrcopy_enabled)},
      {"gds_enabled", Text(c.gds_enabled)},
      {"mofed_enabled", Text(c.mofed_enabled)},
      {"plugin.pass_device_specs", Text(p.pass_device_specs)},
      {"plugin.device_list_strategy", Text(p.device_list_strategy)},
      {"plugin.device_id_strategy", Text(p.device_id_strategy)},
      {"plugin.cdi_annotation_prefix", p.cdi_annotation_prefix},
      {"plugin.cdi_vendor_class", p.cdi_vendor_class},
      {"plugin.nvidia_dev_root", p.nvidia_dev_root},
      {"plugin.nvidia_driver_root", p.nvidia_driver_root},
      {"plugin.container_driver_root", p.container_driver_root},
      {"plugin.nvidia_ctk_path", p.nvidia_ctk_path},
      {"gpushare.max_clients_per_gpu", std::to_string(g.max_clients_per_gpu)},
      {"gpushare.allocation_policy", Text(g.allocation_policy)},
      {"gpushare.replica_memory_limit", Text(g.replica_memory_limit)},
      {"gpushare.replica_compute_limit", Text(g.replica_compute_limit)},
      {"gpushare.health_checks_enabled", Text(g.health_checks_enabled)},
      {"gpushare.ignored_xids", Text(g.ignored_xids)},
      {"gpushare.health_recovery_seconds", std::to_string(g.health_recovery_seconds)},
      {"gpushare.interposer_host_dir", g.interposer_host_dir},
      {"gpushare.container_state_dir", g.container_state_dir},
      {"gpushare.memory_shares.resource_name", g.memory_shares.resource_name},
      {"gpushare.memory_shares.unit", Text(g.memory_shares.unit)},
      {"gpushare.memory_shares.publish_gpu_count", Text(g.memory_shares.publish_gpu_count)},
      {"gpushare.memory_shares.compute_limit", Text(g.memory_shares.compute_limit)},
      {"gpushare.memory_shares.fractions", Text(g.memory_shares.fractions)},
      {"gpushare.memory_shares.enabled", Text(g.memory_shares.enabled())},
      {"time_slicing.resources", std::to_string(c.time_slicing.resources.size())},
      {"gpushare.metrics.listen", g.metrics.listen},
      {"gpushare.metrics.auth", g.metrics.auth},
      {"gpushare.metrics.names", g.metrics.names},
  };
}

// One setting: a value other than its default, and the fields it must change (all others keep
// their defaults).
struct Case {
  const char* key;
  const char* value;
  Fields changes;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"migStrategy", "mixed", {{"mig_strategy", "2"}}},
      {"failOnInitError", "false", {{"fail_on_init_error", "false"}}},
      // The device root follows the driver root unless it is set itself.
      {"nvidiaDriverRoot",
       "/drv",
       {{"plugin.nvidia_driver_root", "/drv"}, {"plugin.nvidia_dev_root", "/drv"}}},
      {"nvidiaDevRoot", "/devroot", {{"plugin.nvidia_dev_root", "/devroot"}}},
      {"mpsRoot", "/mps", {}},  // accepted and ignored (a note)
      {"gdrcopyEnabled", "true", {{"gdrcopy_enabled", "true"}}},
      {"gdsEnabled", "true", {{"gds_enabled", "true"}}},
      {"mofedEnabled", "true", {{"mofed_enabled", "true"}}},
      {"deviceDiscoveryStrategy", "nvml", {}},  // accepted; gpushare always uses NVML
      {"passDeviceSpecs", "true", {{"plugin.pass_device_specs", "true"}}},
      {"deviceListStrategy", "cdi-cri", {{"plugin.device_list_strategy", "falsefalsefalsetrue"}}},
      {"deviceIDStrategy", "index", {{"plugin.device_id_strategy", "1"}}},
      {"cdiAnnotationPrefix", "example.com/", {{"plugin.cdi_annotation_prefix", "example.com/"}}},
      {"nvidiaCTKPath", "/ctk", {{"plugin.nvidia_ctk_path", "/ctk"}}},
      {"containerDriverRoot", "/ctr-root", {{"plugin.container_driver_root", "/ctr-root"}}},
      {"sharedDevicesAllocationPolicy", "packed", {{"gpushare.allocation_policy", "1"}}},
      {"maxClientsPerGpu", "7", {{"gpushare.max_clients_per_gpu", "7"}}},
      {"allocationPolicy", "packed", {{"gpushare.allocation_policy", "1"}}},
      {"memoryLimit", "evenSplit", {{"gpushare.replica_memory_limit", "1"}}},
      {"computeLimit", "evenSplit", {{"gpushare.replica_compute_limit", "1"}}},
      {"healthEnabled", "false", {{"gpushare.health_checks_enabled", "false"}}},
      {"ignoredXids", "9", {{"gpushare.ignored_xids", "9"}}},
      {"recoverAfter", "90s", {{"gpushare.health_recovery_seconds", "90"}}},
      {"interposerHostDir", "/lib-dir", {{"gpushare.interposer_host_dir", "/lib-dir"}}},
      {"stateDir", "/state", {{"gpushare.container_state_dir", "/state"}}},
      {"memoryResourceName",
       "example.com/mem",
       {{"gpushare.memory_shares.resource_name", "example.com/mem"}}},
      {"memoryUnit", "MiB", {{"gpushare.memory_shares.unit", "1"}}},
      {"publishGpuCount", "false", {{"gpushare.memory_shares.publish_gpu_count", "false"}}},
      {"memoryComputeLimit", "proportional", {{"gpushare.memory_shares.compute_limit", "1"}}},
      {"memoryFractions", "false", {{"gpushare.memory_shares.fractions", "false"}}},
      {"metricsListen", "127.0.0.1:9000", {{"gpushare.metrics.listen", "127.0.0.1:9000"}}},
      {"metricsAuth", "none", {{"gpushare.metrics.auth", "none"}}},
      {"metricsNames", "both", {{"gpushare.metrics.names", "both"}}},
  };
  return cases;
}

const NodeConfigSetting& Row(const std::string& key) {
  for (const NodeConfigSetting& s : NodeConfigSettings())
    if (key == s.key) return s;
  ADD_FAILURE() << "no setting " << key;
  return NodeConfigSettings().front();
}

// A config file that sets `row` to `value`: its path "a.b.c" as nested mappings.
std::string FileSetting(const NodeConfigSetting& row, const std::string& value) {
  std::string text, indent;
  std::string path = row.file_path;
  for (size_t dot; (dot = path.find('.')) != std::string::npos; path = path.substr(dot + 1)) {
    text += indent + path.substr(0, dot) + ":\n";
    indent += "  ";
  }
  return text + indent + path + ": " + value + "\n";
}

enum class Level { kFile, kEnvironment, kFlag };

Result<LoadedNodeConfig> LoadWith(const Case& c, Level level) {
  const NodeConfigSetting& row = Row(c.key);
  NodeConfigFlags flags;
  Environment env;
  std::string text = "version: v1\n";
  if (level == Level::kFile) text += FileSetting(row, c.value);
  if (level == Level::kEnvironment) env[row.env] = c.value;
  if (level == Level::kFlag) flags.values[row.key] = c.value;
  return LoadNodeConfigFromText(flags, env, text, "node.yaml");
}

Fields Defaults() {
  Result<LoadedNodeConfig> r = LoadNodeConfigFromText({}, {}, "version: v1\n", "node.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? Snapshot(r->config) : Fields{};
}

// The table and the cases above name the same settings: a new row needs a case here.
TEST(SettingsTable, EverySettingHasACase) {
  std::set<std::string> rows, cases;
  for (const NodeConfigSetting& s : NodeConfigSettings())
    EXPECT_TRUE(rows.insert(s.key).second) << s.key;
  for (const Case& c : Cases()) EXPECT_TRUE(cases.insert(c.key).second) << c.key;
  EXPECT_EQ(rows, cases);
}

// Keys, file paths, environment variables and flags are each unique.
TEST(SettingsTable, NamesAreUnique) {
  std::set<std::string> files, envs, flags;
  for (const NodeConfigSetting& s : NodeConfigSettings()) {
    EXPECT_TRUE(files.insert(s.file_path).second) << s.file_path;
    EXPECT_TRUE(envs.insert(s.env).second) << s.env;
    EXPECT_TRUE(flags.insert(s.flag).second) << s.flag;
  }
}

TEST(SettingsTable, EachSettingWritesItsOwnFieldOnly) {
  const Fields defaults = Defaults();
  for (const Case& c : Cases()) {
    for (Level level : {Level::kFile, Level::kEnvironment, Level::kFlag}) {
      SCOPED_TRACE(std::string(c.key) + "=" + c.value + " level " +
                   std::to_string(static_cast<int>(level)));
      Result<LoadedNodeConfig> r = LoadWith(c, level);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      Fields want = defaults;
      for (const auto& [field, value] : c.changes) {
        ASSERT_TRUE(want.count(field)) << field;
        ASSERT_NE(want[field], value) << field << ": the case must differ from the default";
        want[field] = value;
      }
      EXPECT_EQ(Snapshot(r->config), want);
    }
  }
}

// Every setting at once, each to its own value: none overwrites another.
TEST(SettingsTable, AllSettingsAtOnce) {
  NodeConfigFlags flags;
  Fields want = Defaults();
  for (const Case& c : Cases()) {
    flags.values[c.key] = c.value;
    for (const auto& [field, value] : c.changes) want[field] = value;
  }
  want["plugin.nvidia_dev_root"] = "/devroot";  // set itself, it no longer follows the driver root
  Result<LoadedNodeConfig> r = LoadNodeConfigFromText(flags, {}, "version: v1\n", "node.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Snapshot(r->config), want);
}

}  // namespace
}  // namespace gpushare
