// NodeConfig loading: the NVIDIA k8s-device-plugin config file (version v1, YAML or JSON) plus
// gpushare's own top-level `gpushare:` section, with flag > environment > file precedence.
//
// The file is accepted as NVIDIA's plugin accepts it (docs/configuration.md lists every key);
// gpushare differs where it documents so: `devices` and `rename` of sharing entries are
// honoured, replicas have a per-GPU ceiling (gpushare.maxClientsPerGpu, default 48), and
// sharing.mps is refused. Validation is total: every problem is found and counted, and listed
// one line each (the first 20, then a count of the rest), naming the field path (or the
// environment variable / flag) and what would be accepted, e.g.
//   sharing.timeSlicing.resources[0].replicas: must be 2..48, got 60 (node.yaml:9:17)
// Mains register the flags with AddNodeConfigFlags and pass the process environment in, so
// the whole precedence chain is testable without touching the real environment.
// Bounds (docs/configuration.md): the file must be a regular file (a directory, e.g. a ConfigMap
// mount given instead of the file in it, is an error, never "all defaults") of at most 1 MiB
// (kMaxConfigFileBytes, the most a ConfigMap holds) and 20,000 YAML values, so the memory of a
// load is bounded (about 10 MiB at most), and so is its time (0.07 s for the worst file accepted
// on a 2-core VM, docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/node_config.h"
#include "core/status.h"

namespace CLI {
class App;
}

namespace gpushare {

// The largest config file read: 1 MiB, the most a Kubernetes ConfigMap can hold.
inline constexpr int64_t kMaxConfigFileBytes = int64_t{1} << 20;

// Values given on the command line, keyed by setting (NodeConfigSettings() below and
// docs/configuration.md): e.g. {"migStrategy": "mixed"}. Only flags actually given are present.
struct NodeConfigFlags {
  std::string config_file;  // --config / --config-file, empty = CONFIG_FILE or none
  std::map<std::string, std::string> values;
};

// Registers --config and one flag per overridable setting (NVIDIA's names: --mig-strategy,
// --fail-on-init-error, --pass-device-specs, --device-list-strategy, --device-id-strategy, ...,
// and gpushare's: --max-clients-per-gpu, --recover-after, ...). Boolean flags take an optional
// value: `--pass-device-specs` or `--pass-device-specs=false`.
void AddNodeConfigFlags(CLI::App& app, NodeConfigFlags& flags);

using Environment = std::map<std::string, std::string>;

// The process environment (for mains; tests pass their own).
Environment ProcessEnvironment();

// What loading produced besides the config: where it came from, notes for the log (keys
// accepted but ignored, e.g. flags.gfd.*) and warnings (valid, but probably not what was meant:
// a file without any setting).
struct LoadedNodeConfig {
  NodeConfig config;
  std::string config_path;  // the file read, empty = none
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
};

// Reads the file named by flags.config_file or $CONFIG_FILE (none = defaults), applies the
// environment and the flags, validates. All problems, one per line, in the error message.
Result<LoadedNodeConfig> LoadNodeConfigWithNotes(const NodeConfigFlags& flags,
                                                 const Environment& env);

// The same from text already in memory; `source_name` is used in locations ("node.yaml:3:5").
Result<LoadedNodeConfig> LoadNodeConfigFromText(const NodeConfigFlags& flags,
                                                const Environment& env, const std::string& text,
                                                const std::string& source_name);

// Reads a config file with the bounds above (a regular file, or a link to one, of at most
// kMaxConfigFileBytes). The message names the file and why; the caller adds the flag.
Result<std::string> ReadNodeConfigFile(const std::string& path);

// Checks a config file on its own (no flags, no environment): `gpushare validate`.
Result<LoadedNodeConfig> ValidateConfigFile(const std::string& path);

// The names of one row of the settings table, for docs, --help and tests. Each row of the table
// (in the .cc) also holds its kind, bounds and the typed setter of its own NodeConfig field.
struct NodeConfigSetting {
  const char* key;        // internal key used in NodeConfigFlags::values
  const char* file_path;  // e.g. "flags.migStrategy"
  const char* env;        // e.g. "MIG_STRATEGY"
  const char* flag;       // e.g. "--mig-strategy"
  const char* help;
};
const std::vector<NodeConfigSetting>& NodeConfigSettings();

}  // namespace gpushare
