// The parts of the node config loader (config/node_config_loader.h), one concept per file:
//   - node_settings.cc: the settings table, one row per overridable setting (its key, environment
//     variable, flag, kind, values and typed setter);
//   - node_config_file.cc: the file reader, the YAML document into FileContents (the settings'
//     raw values with their positions, the sharing entries, imex, the memory-share devices);
//   - node_config_interpreter.cc: each setting's final value (flag > environment > file) checked
//     against its row and set, the rules between settings, NVIDIA's health variables;
//   - node_config_checks.cc: the checks across the file's entries once the settings are final;
//   - node_config_loader.cc: the public API, which runs them in that order.
// Private to config/: nothing outside this folder includes it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/strings.h"
#include "config/node_config_loader.h"
#include "config/yaml_reader.h"
#include "core/node_config.h"

namespace gpushare::node_config_internal {

using yaml::MapReader;
using yaml::Problems;

// --- the settings table (node_settings.cc) -----------------------------------------------------

enum class Kind { kEnum, kBool, kString, kPath, kInt, kEnumList, kIntList, kDuration };

// The typed setters: each writes its own setting's field, with a value already checked against
// the row's kind, values and bounds. A text setter may still refuse its value: it returns the
// problem ("must not be empty"), "" when it wrote the field.
using SetBool = void (*)(NodeConfig&, bool);
using SetInt = void (*)(NodeConfig&, int64_t);
using SetEnum = void (*)(NodeConfig&, const std::string&);  // one of the row's values
using SetText = std::string (*)(NodeConfig&, const std::string&);
using SetNames = void (*)(NodeConfig&, const std::vector<std::string>&);  // kEnumList items
using SetInts = void (*)(NodeConfig&, std::vector<uint32_t>);
using SetDuration = void (*)(NodeConfig&, std::chrono::milliseconds);
using Setter = std::variant<SetBool, SetEnum, SetText, SetInt, SetNames, SetInts, SetDuration>;

// One overridable setting: a key in the file, an environment variable, a flag, what values it
// takes, and the setter of its field. Rows are made by the functions below, which pair each
// kind with its setter's type.
struct Setting {
  NodeConfigSetting row;
  Kind kind;
  Setter set;
  std::vector<std::string> values;  // allowed values for kEnum / kEnumList
  int64_t min = 0, max = 0;         // for kInt / kIntList
  const char* alt_env = nullptr;    // a second environment name (older NVIDIA spelling)
  const char* alt_flag = nullptr;   // a flag alias
};

// migStrategy's values (the checks of the sharing entries need them too).
inline const std::vector<std::string> kMigStrategies = {"none", "single", "mixed"};

// Every row, in the order --help lists them.
const std::vector<Setting>& Settings();

// --- what the file holds (node_config_file.cc) -------------------------------------------------

// A setting's value as found at one level, before interpretation.
struct Raw {
  std::string value;   // canonical text ("true", "a,b", "5m")
  std::string origin;  // field path, environment variable or flag, for messages
  YAML::Node node;     // where a file value is (undefined for environment and flags)
};

// A sharing entry as read from the file; replicas are range-checked once the ceiling is known.
struct RawEntry {
  ReplicatedResource resource;
  std::optional<int64_t> replicas;
  YAML::Node replicas_node;
  YAML::Node name_node;
};

// Everything read from the file.
struct FileContents {
  std::map<std::string, Raw> settings;  // by Setting key
  bool has_time_slicing = false;
  bool rename_by_default = false;
  bool fail_requests_greater_than_one = false;
  std::vector<RawEntry> entries;
  ImexConfig imex;
  std::optional<DeviceSelector> memory_devices;  // gpushare.memoryShares.devices (nullopt = none)
  YAML::Node memory_devices_node;
};

// The document's settings, sharing entries, imex and memory-share devices; problems go to
// `problems`, notes (settings read but ignored) to `notes`.
FileContents ReadConfigDocument(const YAML::Node& doc, Problems* problems,
                                std::vector<std::string>* notes);

// Digits short enough for std::stoll and for any count or index a setting takes.
inline bool IsSmallNumber(std::string_view s) {
  return s.size() < 10 && IsDigits(s);
}

// --- interpretation (node_config_interpreter.cc) ----------------------------------------------

// Applies every setting's final value to out->config, then the rules between settings.
void ApplySettings(const FileContents& file, const NodeConfigFlags& flags, const Environment& env,
                   Problems* problems, LoadedNodeConfig* out);

// NVIDIA's health environment variables: DP_DISABLE_HEALTHCHECKS=all|xids|<xid,...> and
// DP_ENABLE_HEALTHCHECKS=all|<xid,...>.
void ApplyNvidiaHealthEnv(const Environment& env, NodeConfig* c, Problems* p);

// --- checks across entries (node_config_checks.cc) ---------------------------------------------

// Checks each sharing entry now that the ceiling and the MIG strategy are final.
void CheckEntries(const NodeConfig& c, FileContents& file, Problems* problems);

// Two entries for one resource where one takes every device overlap on any node. One line
// per entry that overlaps earlier ones, naming the first of them and counting the others
// (pair by pair, 1,000 entries gave 499,500 lines); linear in the entries.
void CheckOverlaps(const FileContents& file, Problems* problems);

// A GPU serves one kind of share: memory shares and a time-slicing entry of nvidia.com/gpu
// overlap on every node when either side takes all GPUs.
void CheckMemorySharesOverlap(const FileContents& file, Problems* problems);

}  // namespace gpushare::node_config_internal
