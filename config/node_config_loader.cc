#include "config/node_config_loader.h"

#include <CLI/CLI.hpp>

#include "config/file_read.h"
#include "config/node_config_internal.h"
#include "config/yaml_reader.h"

extern char** environ;

namespace gpushare {

namespace {

using namespace node_config_internal;

// Reads the file's text (when there is one) into `file`.
Status ReadFile(const std::string& text, const std::string& source, Problems* problems,
                FileContents* file, LoadedNodeConfig* out) {
  if (static_cast<int64_t>(text.size()) > kMaxConfigFileBytes) {
    return Status::InvalidArgument(
        "cannot read config file " + source + ": " +
        OverLimit(static_cast<int64_t>(text.size()), kMaxConfigFileBytes));
  }
  YAML::Node doc = yaml::ParseDocument(text, problems);
  if (doc.IsDefined()) *file = ReadConfigDocument(doc, problems, &out->notes);
  if (doc.IsNull()) {
    out->warnings.push_back(source +
                            " has no settings (empty or only comments): every setting takes its "
                            "default, and nothing is shared");
  }
  return Status::Ok();
}

Result<LoadedNodeConfig> Load(const NodeConfigFlags& flags, const Environment& env,
                              const std::string* text, const std::string& source) {
  LoadedNodeConfig out;
  out.config_path = text != nullptr ? source : "";
  Problems problems(source.empty() ? "config" : source);
  FileContents file;
  if (text != nullptr) GPUSHARE_RETURN_IF_ERROR(ReadFile(*text, source, &problems, &file, &out));
  ApplySettings(file, flags, env, &problems, &out);
  NodeConfig& c = out.config;
  ApplyNvidiaHealthEnv(env, &c, &problems);
  c.time_slicing.rename_by_default = file.rename_by_default;
  c.time_slicing.fail_requests_greater_than_one = file.fail_requests_greater_than_one;
  CheckEntries(c, file, &problems);
  CheckOverlaps(file, &problems);
  for (auto& e : file.entries) c.time_slicing.resources.push_back(e.resource);
  c.imex = file.imex;
  c.gpushare.memory_shares.devices = file.memory_devices;
  CheckMemorySharesOverlap(file, &problems);
  if (!problems.empty()) return Status::InvalidArgument(problems.Joined());
  return out;
}

}  // namespace

Result<std::string> ReadNodeConfigFile(const std::string& path) {
  return ReadInputFile(path, {"config file", kMaxConfigFileBytes, "config.yaml"});
}

const std::vector<NodeConfigSetting>& NodeConfigSettings() {
  static const std::vector<NodeConfigSetting> rows = [] {
    std::vector<NodeConfigSetting> r;
    for (const auto& s : Settings()) r.push_back(s.row);
    return r;
  }();
  return rows;
}

void AddNodeConfigFlags(CLI::App& app, NodeConfigFlags& flags) {
  app.add_option(
      "--config,--config-file", flags.config_file,
      "sharing config file (NVIDIA device plugin format, YAML or JSON) [env CONFIG_FILE]");
  for (const auto& s : Settings()) {
    std::string names = s.row.flag;
    if (s.alt_flag != nullptr) names += std::string(",") + s.alt_flag;
    std::string help = std::string(s.row.help) + " [env " + s.row.env + "]";
    const std::string key = s.row.key;
    auto store = [&flags, key](const std::string& v) { flags.values[key] = v; };
    if (s.kind == Kind::kBool) {
      // --flag or --flag=false, like NVIDIA's boolean flags.
      std::string first = names.substr(0, names.find(','));
      std::string rest = names.find(',') == std::string::npos ? "" : names.substr(names.find(','));
      app.add_flag(first + "{true}" + rest)->description(help)->each(store);
    } else {
      app.add_option(names)->description(help)->each(store);
    }
  }
}

Environment ProcessEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

Result<LoadedNodeConfig> LoadNodeConfigFromText(const NodeConfigFlags& flags,
                                                const Environment& env, const std::string& text,
                                                const std::string& source_name) {
  return Load(flags, env, &text, source_name);
}

Result<LoadedNodeConfig> LoadNodeConfigWithNotes(const NodeConfigFlags& flags,
                                                 const Environment& env) {
  std::string path = flags.config_file;
  std::string origin = "--config";
  if (path.empty()) {
    if (auto it = env.find("CONFIG_FILE"); it != env.end()) {
      path = it->second;
      origin = "CONFIG_FILE";
    }
  }
  if (path.empty()) return Load(flags, env, nullptr, "");
  auto text = ReadNodeConfigFile(path);
  if (!text.ok()) return Status::InvalidArgument(origin + ": " + text.status().message());
  return Load(flags, env, &*text, path);
}

Result<LoadedNodeConfig> ValidateConfigFile(const std::string& path) {
  auto text = ReadNodeConfigFile(path);
  if (!text.ok()) return Status::InvalidArgument(text.status().message());
  return Load(NodeConfigFlags{}, Environment{}, &*text, path);
}

}  // namespace gpushare
