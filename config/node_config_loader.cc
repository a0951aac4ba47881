#include "config/node_config_loader.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "base/strings.h"
#include "config/duration.h"
#include "config/file_read.h"
#include "config/yaml_reader.h"
#include "core/inventory.h"
#include "core/resource_name.h"

extern char** environ;

namespace gpushare {

namespace {

using yaml::MapReader;
using yaml::Problems;

enum class Kind { kEnum, kBool, kString, kPath, kInt, kEnumList, kIntList, kDuration };

// One overridable setting: a key in the file, an environment variable, a flag.
struct Setting {
  NodeConfigSetting row;
  Kind kind;
  std::vector<std::string> values;  // allowed values for kEnum / kEnumList
  int64_t min = 0, max = 0;         // for kInt / kIntList
  const char* alt_env = nullptr;    // a second environment name (older NVIDIA spelling)
  const char* alt_flag = nullptr;   // a flag alias
};

const std::vector<std::string> kMigStrategies = {"none", "single", "mixed"};
const std::vector<std::string> kDeviceListStrategies = {"envvar", "volume-mounts",
                                                        "cdi-annotations", "cdi-cri"};
const std::vector<std::string> kDeviceIdStrategies = {"uuid", "index"};
const std::vector<std::string> kAllocationPolicies = {"distributed", "packed"};
const std::vector<std::string> kDiscoveryStrategies = {"auto", "nvml"};
const std::vector<std::string> kMemoryLimits = {"none", "evenSplit"};
const std::vector<std::string> kComputeLimits = {"none", "evenSplit"};
const std::vector<std::string> kMemoryComputeLimits = {"none", "proportional"};
const std::vector<std::string> kMemoryUnits = {"GiB", "MiB"};

const std::vector<Setting>& Settings() {
  static const std::vector<Setting> s = {
      {{"migStrategy", "flags.migStrategy", "MIG_STRATEGY", "--mig-strategy",
        "how MIG devices are advertised: none, single or mixed (default none)"},
       Kind::kEnum, kMigStrategies},
      {{"failOnInitError", "flags.failOnInitError", "FAIL_ON_INIT_ERROR", "--fail-on-init-error",
        "exit when NVML cannot start or finds no GPU (default true); false: log and wait idle"},
       Kind::kBool},
      {{"nvidiaDriverRoot", "flags.nvidiaDriverRoot", "NVIDIA_DRIVER_ROOT",
        "--nvidia-driver-root", "root of the NVIDIA driver installation (default /)"},
       Kind::kPath, {}, 0, 0, nullptr, "--driver-root"},
      {{"nvidiaDevRoot", "flags.nvidiaDevRoot", "NVIDIA_DEV_ROOT", "--dev-root",
        "root under which /dev/nvidia* live (default: the driver root)"},
       Kind::kPath, {}, 0, 0, nullptr, "--nvidia-dev-root"},
      {{"mpsRoot", "flags.mpsRoot", "MPS_ROOT", "--mps-root",
        "MPS root (accepted; gpushare does not run MPS)"},
       Kind::kString},
      {{"gdrcopyEnabled", "flags.gdrcopyEnabled", "GDRCOPY_ENABLED", "--gdrcopy-enabled",
        "set NVIDIA_GDRCOPY=enabled in containers"},
       Kind::kBool},
      {{"gdsEnabled", "flags.gdsEnabled", "GDS_ENABLED", "--gds-enabled",
        "set NVIDIA_GDS=enabled in containers"},
       Kind::kBool},
      {{"mofedEnabled", "flags.mofedEnabled", "MOFED_ENABLED", "--mofed-enabled",
        "set NVIDIA_MOFED=enabled in containers"},
       Kind::kBool},
      {{"deviceDiscoveryStrategy", "flags.deviceDiscoveryStrategy", "DEVICE_DISCOVERY_STRATEGY",
        "--device-discovery-strategy", "auto or nvml (tegra is not supported)"},
       Kind::kEnum, kDiscoveryStrategies},
      {{"passDeviceSpecs", "flags.plugin.passDeviceSpecs", "PASS_DEVICE_SPECS",
        "--pass-device-specs", "put /dev/nvidia* device specs into Allocate answers"},
       Kind::kBool},
      {{"deviceListStrategy", "flags.plugin.deviceListStrategy", "DEVICE_LIST_STRATEGY",
        "--device-list-strategy",
        "comma list of envvar, volume-mounts, cdi-annotations, cdi-cri (default envvar)"},
       Kind::kEnumList, kDeviceListStrategies},
      {{"deviceIDStrategy", "flags.plugin.deviceIDStrategy", "DEVICE_ID_STRATEGY",
        "--device-id-strategy", "what containers are given: uuid or index (default uuid)"},
       Kind::kEnum, kDeviceIdStrategies},
      {{"cdiAnnotationPrefix", "flags.plugin.cdiAnnotationPrefix", "CDI_ANNOTATION_PREFIX",
        "--cdi-annotation-prefix", "prefix of CDI annotations (default cdi.k8s.io/)"},
       Kind::kString},
      {{"nvidiaCTKPath", "flags.plugin.nvidiaCTKPath", "NVIDIA_CDI_HOOK_PATH",
        "--nvidia-ctk-path", "path of nvidia-ctk (default /usr/bin/nvidia-ctk)"},
       Kind::kPath, {}, 0, 0, "NVIDIA_CTK_PATH", "--nvidia-cdi-hook-path"},
      {{"containerDriverRoot", "flags.plugin.containerDriverRoot", "DRIVER_ROOT_CTR_PATH",
        "--container-driver-root", "where the driver root is mounted in this container"},
       Kind::kPath, {}, 0, 0, "CONTAINER_DRIVER_ROOT", "--driver-root-ctr-path"},
      {{"sharedDevicesAllocationPolicy", "flags.plugin.sharedDevicesAllocationPolicy",
        "SHARED_DEVICES_ALLOCATION_POLICY", "--shared-devices-allocation-policy",
        "preferred allocation of replicas: distributed or packed (default distributed)"},
       Kind::kEnum, kAllocationPolicies},
      {{"maxClientsPerGpu", "gpushare.maxClientsPerGpu", "GPUSHARE_MAX_CLIENTS_PER_GPU",
        "--max-clients-per-gpu", "ceiling on containers sharing one physical GPU (default 48)"},
       Kind::kInt, {}, 1, 1024},
      {{"allocationPolicy", "gpushare.allocationPolicy", "GPUSHARE_ALLOCATION_POLICY",
        "--allocation-policy", "same as sharedDevicesAllocationPolicy"},
       Kind::kEnum, kAllocationPolicies},
      {{"memoryLimit", "gpushare.timeSlicing.memoryLimit", "GPUSHARE_TIME_SLICING_MEMORY_LIMIT",
        "--time-slicing-memory-limit",
        "per-replica memory limit: none or evenSplit (device memory / replicas)"},
       Kind::kEnum, kMemoryLimits},
      {{"computeLimit", "gpushare.timeSlicing.computeLimit", "GPUSHARE_TIME_SLICING_COMPUTE_LIMIT",
        "--time-slicing-compute-limit",
        "per-replica SM limit: none or evenSplit (100% / replicas), enforced by the in-container library"},
       Kind::kEnum, kComputeLimits},
      {{"healthEnabled", "gpushare.health.enabled", "GPUSHARE_HEALTH_ENABLED", "--health-checks",
        "watch XID events and mark devices Unhealthy (default true)"},
       Kind::kBool},
      {{"ignoredXids", "gpushare.health.ignoredXids", "GPUSHARE_IGNORED_XIDS", "--ignored-xids",
        "XIDs that never mark a device Unhealthy (default 13,31,43,45,68,109)"},
       Kind::kIntList, {}, 1, 65535},
      {{"recoverAfter", "gpushare.health.recoverAfter", "GPUSHARE_RECOVER_AFTER",
        "--recover-after", "quiet period before an Unhealthy device is Healthy again (default 5m; 0 = never)"},
       Kind::kDuration},
      {{"interposerHostDir", "gpushare.interposer.hostDir", "GPUSHARE_INTERPOSER_HOST_DIR",
        "--interposer-host-dir", "host directory holding libgpushare-cuda.so (empty = not mounted)"},
       Kind::kPath},
      {{"stateDir", "gpushare.interposer.stateDir", "GPUSHARE_STATE_DIR", "--state-dir",
        "host directory for per-container accounting (default /var/lib/gpushare/containers)"},
       Kind::kPath},
      {{"memoryResourceName", "gpushare.memoryShares.resourceName", "GPUSHARE_MEMORY_RESOURCE_NAME",
        "--memory-resource-name", "resource of memory shares (default aliyun.com/gpu-mem)"},
       Kind::kString},
      {{"memoryUnit", "gpushare.memoryShares.unit", "GPUSHARE_MEMORY_UNIT", "--memory-unit",
        "what one memory-share unit is: GiB or MiB (default GiB)"},
       Kind::kEnum, kMemoryUnits},
      {{"publishGpuCount", "gpushare.memoryShares.publishGpuCount", "GPUSHARE_PUBLISH_GPU_COUNT",
        "--publish-gpu-count", "publish aliyun.com/gpu-count in the node's capacity (default true)"},
       Kind::kBool},
      {{"memoryComputeLimit", "gpushare.memoryShares.computeLimit", "GPUSHARE_MEMORY_COMPUTE_LIMIT",
        "--memory-compute-limit",
        "SM limit of a memory share: none or proportional (the share's fraction of the GPU's memory)"},
       Kind::kEnum, kMemoryComputeLimits},
  };
  return s;
}

// A setting's value as found at one level, before interpretation.
struct Raw {
  std::string value;   // canonical text ("true", "a,b", "5m")
  std::string origin;  // field path, environment variable or flag, for messages
  YAML::Node node;     // where a file value is (undefined for environment and flags)
};

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, ',')) {
    size_t b = cur.find_first_not_of(" \t"), e = cur.find_last_not_of(" \t");
    out.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
  }
  if (!s.empty() && s.back() == ',') out.push_back("");
  return out;
}

std::string Leaf(const std::string& path) { return path.substr(path.rfind('.') + 1); }
std::string Parent(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

// Digits short enough for std::stoll and for any count or index a setting takes.
bool IsSmallNumber(std::string_view s) { return s.size() < 10 && IsDigits(s); }

// A devices list item as NVIDIA accepts it: GPU index, MIG index "i:j", GPU UUID, MIG UUID
// ("MIG-<uuid>" or "MIG-GPU-<uuid>/<gi>/<ci>").
bool IsDeviceRef(const std::string& s) {
  if (IsSmallNumber(s)) return true;
  size_t colon = s.find(':');
  if (colon != std::string::npos) {
    return IsSmallNumber(s.substr(0, colon)) && IsSmallNumber(s.substr(colon + 1));
  }
  return IsGpuUuid(s) || IsMigUuid(s);
}

// Go's strconv.ParseBool, which NVIDIA's flags and environment variables go through.
std::optional<bool> ParseBoolText(const std::string& s) {
  static const std::set<std::string> t = {"1", "t", "T", "true", "TRUE", "True"};
  static const std::set<std::string> f = {"0", "f", "F", "false", "FALSE", "False"};
  if (t.count(s)) return true;
  if (f.count(s)) return false;
  return std::nullopt;
}

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

class FileReader {
 public:
  FileReader(Problems* problems, std::vector<std::string>* notes)
      : p_(problems), notes_(notes) {}

  FileContents Read(const YAML::Node& doc) {
    if (!doc.IsDefined() || doc.IsNull()) return std::move(out_);
    MapReader top(doc, "", p_, {"version", "flags", "resources", "sharing", "imex", "gpushare"});
    if (!top.ok()) return std::move(out_);
    YAML::Node v = top.Get("version");
    if (v.IsDefined() && !(v.IsScalar() && (v.Scalar() == "v1" || v.Scalar().empty()))) {
      p_->Add("version", "must be v1 (or empty), got " + yaml::KindName(v), &v);
    }
    ReadFlags(top.Get("flags"));
    ReadResources(top.Get("resources"));
    ReadSharing(top.Get("sharing"));
    ReadImex(top.Get("imex"));
    ReadGpushare(top.Get("gpushare"));
    return std::move(out_);
  }

 private:
  // Keys of the settings that live directly in `section`.
  static std::vector<std::string> SettingKeys(const std::string& section) {
    std::vector<std::string> keys;
    for (const auto& s : Settings()) {
      if (Parent(s.row.file_path) == section) keys.push_back(Leaf(s.row.file_path));
    }
    return keys;
  }

  static std::vector<std::string> Plus(std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  // Reads every setting of `section` from its MapReader into out_.settings.
  void ReadSettings(MapReader& m, const std::string& section) {
    for (const auto& s : Settings()) {
      if (Parent(s.row.file_path) != section) continue;
      const std::string key = Leaf(s.row.file_path);
      YAML::Node n = m.Get(key);
      if (!n.IsDefined()) continue;
      const std::string path = s.row.file_path;
      std::optional<std::string> text;
      switch (s.kind) {
        case Kind::kBool:
          if (auto b = yaml::ScalarBool(n)) text = *b ? "true" : "false";
          else p_->Add(path, "must be true or false, got " + yaml::KindName(n), &n);
          break;
        case Kind::kInt:
          if (auto i = yaml::ScalarInt(n)) text = std::to_string(*i);
          else p_->Add(path, "must be an integer " + std::to_string(s.min) + ".." +
                                 std::to_string(s.max) + ", got " + yaml::KindName(n), &n);
          break;
        case Kind::kEnumList:
        case Kind::kIntList:
          text = ReadList(s, path, n);
          break;
        case Kind::kEnum:
        case Kind::kString:
        case Kind::kPath:
        case Kind::kDuration:
          if (n.IsScalar()) text = n.Scalar();
          else p_->Add(path, "must be a string, got " + yaml::KindName(n), &n);
          break;
      }
      if (text) out_.settings[s.row.key] = {*text, path, n};
    }
  }

  std::optional<std::string> ReadList(const Setting& s, const std::string& path,
                                      const YAML::Node& n) {
    const bool ints = s.kind == Kind::kIntList;
    auto item_ok = [&](const YAML::Node& item) {
      return item.IsScalar() && (!ints || yaml::ScalarInt(item).has_value());
    };
    const std::string expect = ints ? "a list of integers" : "a string or a list of strings";
    if (n.IsScalar()) {
      if (!item_ok(n)) {
        p_->Add(path, "must be " + expect + ", got " + yaml::KindName(n), &n);
        return std::nullopt;
      }
      return n.Scalar();
    }
    if (!n.IsSequence()) {
      p_->Add(path, "must be " + expect + ", got " + yaml::KindName(n), &n);
      return std::nullopt;
    }
    std::vector<std::string> items;
    bool ok = true;
    for (size_t i = 0; i < n.size(); ++i) {
      YAML::Node item = n[i];
      if (!item_ok(item) || item.Scalar().find(',') != std::string::npos) {
        p_->Add(path + "[" + std::to_string(i) + "]",
                std::string("must be ") + (ints ? "an integer" : "a string") + ", got " +
                    yaml::KindName(item),
                &item);
        ok = false;
        continue;
      }
      items.push_back(item.Scalar());
    }
    if (!ok) return std::nullopt;
    return Join(items, ",");
  }

  void ReadFlags(const YAML::Node& n) {
    MapReader m(n, "flags", p_, Plus(SettingKeys("flags"), {"useNodeFeatureAPI", "plugin", "gfd"}));
    if (!m.ok()) return;
    ReadSettings(m, "flags");
    if (auto b = m.Bool("useNodeFeatureAPI"); b && *b) {
      notes_->push_back("flags.useNodeFeatureAPI: a gpu-feature-discovery setting; ignored by "
                        "gpushare-node");
    }
    MapReader plugin(m.Get("plugin"), "flags.plugin", p_, SettingKeys("flags.plugin"));
    ReadSettings(plugin, "flags.plugin");
    MapReader gfd(m.Get("gfd"), "flags.gfd", p_,
                  {"oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile"});
    if (gfd.ok()) {
      gfd.Bool("oneshot");
      gfd.Bool("noTimestamp");
      gfd.String("outputFile");
      gfd.String("machineTypeFile");
      if (auto d = gfd.String("sleepInterval"); d && !ParseDurationMs(*d)) {
        YAML::Node dn = gfd.Get("sleepInterval");
        p_->Add("flags.gfd.sleepInterval", "must be a duration like 60s or 5m, got \"" + *d + "\"",
                &dn);
      }
      notes_->push_back("flags.gfd: gpu-feature-discovery settings are accepted and ignored by "
                        "gpushare-node");
    }
  }

  void ReadResources(const YAML::Node& n) {
    MapReader m(n, "resources", p_, {"gpus", "mig"});
    if (!m.ok()) return;
    for (const char* kind : {"gpus", "mig"}) {
      YAML::Node list = m.Get(kind);
      const std::string path = std::string("resources.") + kind;
      if (!list.IsDefined()) continue;
      if (!list.IsSequence()) {
        p_->Add(path, "must be a list of {pattern, name}, got " + yaml::KindName(list), &list);
        continue;
      }
      for (size_t i = 0; i < list.size(); ++i) {
        YAML::Node item = list[i];
        MapReader e(item, path + "[" + std::to_string(i) + "]", p_, {"pattern", "name"});
        if (!e.ok()) continue;
        if (!e.String("pattern")) p_->Add(e.PathOf("pattern"), "is required", &item);
        if (!e.String("name")) p_->Add(e.PathOf("name"), "is required", &item);
      }
    }
    notes_->push_back(
        "resources: custom resource naming is disabled, as in NVIDIA's plugin; the section is "
        "ignored (rename shared resources with sharing.timeSlicing.resources[].rename)");
  }

  void ReadSharing(const YAML::Node& n) {
    MapReader m(n, "sharing", p_, {"timeSlicing", "mps"});
    if (!m.ok()) return;
    YAML::Node mps = m.Get("mps");
    if (mps.IsDefined()) {
      p_->Add("sharing.mps",
              "MPS sharing is not supported by gpushare yet; use sharing.timeSlicing (with "
              "gpushare.timeSlicing.memoryLimit: evenSplit for per-replica memory limits "
              "enforced by gpushare's in-container library)",
              &mps);
    }
    YAML::Node tsn = m.Get("timeSlicing");
    MapReader ts(tsn, "sharing.timeSlicing", p_,
                 {"strategy", "renameByDefault", "failRequestsGreaterThanOne", "resources"});
    if (!ts.ok()) return;
    out_.has_time_slicing = true;
    if (auto s = ts.String("strategy"); s && !s->empty()) {
      YAML::Node sn = ts.Get("strategy");
      p_->Add("sharing.timeSlicing.strategy", "must be empty (the only strategy), got \"" + *s + "\"",
              &sn);
    }
    out_.rename_by_default = ts.Bool("renameByDefault").value_or(false);
    out_.fail_requests_greater_than_one = ts.Bool("failRequestsGreaterThanOne").value_or(false);
    YAML::Node list = ts.Get("resources");
    if (!list.IsDefined() || (list.IsSequence() && list.size() == 0)) {
      p_->Add("sharing.timeSlicing.resources",
              "at least one entry {name, replicas} is required", &tsn);
      return;
    }
    if (!list.IsSequence()) {
      p_->Add("sharing.timeSlicing.resources",
              "must be a list of {name, rename, devices, replicas}, got " + yaml::KindName(list),
              &list);
      return;
    }
    for (size_t i = 0; i < list.size(); ++i) ReadEntry(list[i], i);
  }

  void ReadEntry(const YAML::Node& n, size_t i) {
    const std::string path = "sharing.timeSlicing.resources[" + std::to_string(i) + "]";
    MapReader m(n, path, p_, {"name", "rename", "devices", "replicas"});
    if (!m.ok()) {
      if (!n.IsDefined() || n.IsNull()) p_->Add(path, "must be a mapping {name, replicas}", &n);
      return;
    }
    RawEntry e;
    e.resource.field_path = path;
    e.name_node = m.Get("name");
    if (auto name = m.String("name")) {
      std::string full = name->find('/') == std::string::npos ? "nvidia.com/" + *name : *name;
      std::string why = SharedNameProblem(full);
      if (!why.empty()) {
        p_->Add(path + ".name", why + ", got \"" + *name + "\"", &e.name_node);
      }
      e.resource.name = full;
    } else if (!e.name_node.IsDefined()) {
      p_->Add(path + ".name", "is required (nvidia.com/gpu or nvidia.com/mig-<profile>)", &n);
    }
    if (auto rename = m.String("rename"); rename && !rename->empty()) {
      std::string full = rename->find('/') == std::string::npos ? "nvidia.com/" + *rename : *rename;
      std::string why = ExtendedResourceNameProblem(full);
      YAML::Node rn = m.Get("rename");
      if (!why.empty()) {
        p_->Add(path + ".rename", full + " is not a valid extended resource name: " + why, &rn);
      }
      e.resource.rename = full;
    }
    ReadDevices(m.Get("devices"), path + ".devices", &e.resource.devices);
    e.replicas_node = m.Get("replicas");
    if (!e.replicas_node.IsDefined()) {
      p_->Add(path + ".replicas", "is required (an integer, at least 2)", &n);
    } else if (auto r = yaml::ScalarInt(e.replicas_node)) {
      e.replicas = *r;
    } else {
      p_->Add(path + ".replicas", "must be an integer, got " + yaml::KindName(e.replicas_node),
              &e.replicas_node);
    }
    out_.entries.push_back(std::move(e));
  }

  // The names a sharing entry may replicate.
  static std::string SharedNameProblem(const std::string& name) {
    if (name == "nvidia.com/gpu") return "";
    const std::string mig = "nvidia.com/mig-";
    if (name.rfind(mig, 0) == 0) {
      std::string profile = name.substr(mig.size());
      size_t gb = profile.find("gb");
      if (gb != std::string::npos) {
        for (size_t k = gb; k < profile.size(); ++k) {
          if (profile[k] == '.') profile[k] = '+';
        }
      }
      auto slices = ParseMigProfile(profile);
      if (slices && slices->compute_slices == slices->gpu_slices &&
          ExtendedResourceNameProblem(name).empty()) {
        return "";
      }
      if (slices) {
        return "compute-instance sub-profiles are never advertised; use the GPU-instance "
               "profile, e.g. nvidia.com/mig-" + std::to_string(slices->gpu_slices) + "g." +
               std::to_string(slices->memory_gb) + "gb";
      }
    }
    return "must be nvidia.com/gpu or nvidia.com/mig-<profile> (e.g. nvidia.com/mig-1g.10gb)";
  }

  // How a `devices` selector of one section is read.
  struct SelectorRules {
    std::string expect;         // "must be ..." for a scalar or another kind of node
    std::string count_problem;  // "a count of devices must be > 0"
    bool none_allowed = false;  // "none" and [] select nothing
    std::string empty_problem;  // for [] when !none_allowed
    std::function<std::string(const YAML::Node& item)> item_problem;  // "" = fine
  };

  // "all", a positive count or a list. nullopt: nothing selected, or a problem (recorded).
  std::optional<DeviceSelector> ReadSelector(const YAML::Node& n, const std::string& path, const SelectorRules& r) {
    DeviceSelector out;
    if (n.IsScalar()) {
      if (!yaml::IsQuoted(n) && yaml::ScalarInt(n)) {
        int64_t c = *yaml::ScalarInt(n);
        if (c <= 0) {
          p_->Add(path, r.count_problem + ", got " + n.Scalar() + (r.none_allowed ? " (use none for no GPU)" : ""), &n);
          return std::nullopt;
        }
        out.kind = DeviceSelector::Kind::kCount;
        out.count = static_cast<int>(std::min<int64_t>(c, 1 << 20));
        return out;
      }
      if (n.Scalar() == "all") return out;
      if (r.none_allowed && n.Scalar() == "none") return std::nullopt;
      p_->Add(path, r.expect + ", got " + yaml::KindName(n), &n);
      return std::nullopt;
    }
    if (!n.IsSequence()) {
      p_->Add(path, r.expect + ", got " + yaml::KindName(n), &n);
      return std::nullopt;
    }
    if (n.size() == 0) {
      if (!r.none_allowed) p_->Add(path, r.empty_problem, &n);
      return std::nullopt;
    }
    out.kind = DeviceSelector::Kind::kList;
    for (size_t i = 0; i < n.size(); ++i) {
      YAML::Node item = n[i];
      std::string why = r.item_problem(item);
      if (!why.empty()) {
        p_->Add(path + "[" + std::to_string(i) + "]", why + ", got " + yaml::KindName(item), &item);
        continue;
      }
      out.items.push_back(item.Scalar());
    }
    return out;
  }

  void ReadDevices(const YAML::Node& n, const std::string& path, DeviceSelector* out) {
    if (!n.IsDefined()) return;  // default: all
    SelectorRules r;
    r.expect = "must be \"all\", a positive count, or a list of GPU indices (0), MIG indices (0:1), "
               "GPU UUIDs (GPU-...) or MIG UUIDs (MIG-...)";
    r.count_problem = "a count of devices must be > 0";
    r.empty_problem = "an empty list selects nothing; omit devices (= all) or list devices";
    r.item_problem = [](const YAML::Node& item) -> std::string {
      if (item.IsScalar() && IsDeviceRef(item.Scalar())) return "";
      return "must be a GPU index (0), a MIG index (0:1), a GPU UUID (GPU-...) or a MIG UUID "
             "(MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>)";
    };
    if (auto sel = ReadSelector(n, path, r)) *out = *sel;
  }

  void ReadImex(const YAML::Node& n) {
    MapReader m(n, "imex", p_, {"channelIDs", "required"});
    if (!m.ok()) return;
    out_.imex.required = m.Bool("required").value_or(false);
    YAML::Node ids = m.Get("channelIDs");
    if (!ids.IsDefined()) return;
    bool ok = ids.IsSequence() && ids.size() <= 1;
    if (ok && ids.size() == 1) ok = yaml::ScalarInt(ids[0]) == 0;
    if (!ok) {
      p_->Add("imex.channelIDs", "must be [] or [0], got " + yaml::KindName(ids), &ids);
      return;
    }
    if (ids.size() == 1) out_.imex.channel_ids.push_back(0);
  }

  void ReadGpushare(const YAML::Node& n) {
    MapReader m(n, "gpushare", p_,
                Plus(SettingKeys("gpushare"), {"timeSlicing", "health", "interposer", "memoryShares"}));
    if (!m.ok()) return;
    ReadSettings(m, "gpushare");
    for (const char* section : {"timeSlicing", "health", "interposer"}) {
      const std::string path = std::string("gpushare.") + section;
      MapReader sub(m.Get(section), path, p_, SettingKeys(path));
      ReadSettings(sub, path);
    }
    ReadMemoryShares(m.Get("memoryShares"));
  }

  void ReadMemoryShares(const YAML::Node& n) {
    const std::string path = "gpushare.memoryShares";
    MapReader m(n, path, p_, Plus(SettingKeys(path), {"devices"}));
    if (!m.ok()) return;
    ReadSettings(m, path);
    YAML::Node d = m.Get("devices");
    out_.memory_devices_node = d;
    if (!d.IsDefined()) {
      notes_->push_back(path + ".devices is not set: no GPU serves memory shares (set all, a count or a list)");
      return;
    }
    SelectorRules r;
    r.expect = "must be \"all\", \"none\", a positive count, or a list of GPU indices (0) or GPU UUIDs (GPU-...)";
    r.count_problem = "a count of GPUs must be > 0";
    r.none_allowed = true;
    r.item_problem = [](const YAML::Node& item) -> std::string {
      if (item.IsScalar() && (IsSmallNumber(item.Scalar()) || IsGpuUuid(item.Scalar()))) return "";
      if (item.IsScalar() && IsDeviceRef(item.Scalar())) {
        return "memory shares need whole GPUs; a MIG device cannot serve them";
      }
      return "must be a GPU index (0) or a GPU UUID (GPU-...)";
    };
    out_.memory_devices = ReadSelector(d, path + ".devices", r);
  }

  Problems* p_;
  std::vector<std::string>* notes_;
  FileContents out_;
};

// Interprets the final text of each setting into the NodeConfig.
class Interpreter {
 public:
  Interpreter(Problems* p, NodeConfig* c) : p_(p), c_(c) {}

  void Apply(const Setting& s, const Raw& raw) {
    const std::string& v = raw.value;
    auto bad = [&](const std::string& what) {
      p_->Add(raw.origin, what, raw.node.IsDefined() ? &raw.node : nullptr);
    };
    auto quoted = "\"" + v + "\"";
    switch (s.kind) {
      case Kind::kBool: {
        auto b = ParseBoolText(v);
        if (!b) return bad("must be true or false, got " + quoted);
        SetBool(s.row.key, *b);
        return;
      }
      case Kind::kEnum:
        if (std::find(s.values.begin(), s.values.end(), v) == s.values.end()) {
          std::string extra;
          if (std::string(s.row.key) == "deviceDiscoveryStrategy" && v == "tegra") {
            extra = " (Tegra devices are not supported by gpushare)";
          }
          return bad("must be " + yaml::OneOf(s.values) + ", got " + quoted + extra);
        }
        SetEnum(s.row.key, v);
        return;
      case Kind::kEnumList: {
        auto items = SplitCommas(v);
        DeviceListStrategy d{false, false, false, false};
        bool ok = !items.empty();
        for (const auto& it : items) {
          if (it == "envvar") d.envvar = true;
          else if (it == "volume-mounts") d.volume_mounts = true;
          else if (it == "cdi-annotations") d.cdi_annotations = true;
          else if (it == "cdi-cri") d.cdi_cri = true;
          else {
            bad("must be one or more of " + Join(s.values) + ", got \"" + it + "\"");
            ok = false;
          }
        }
        if (items.empty()) bad("must name at least one of " + Join(s.values));
        if (ok) c_->plugin.device_list_strategy = d;
        return;
      }
      case Kind::kInt: {
        int64_t x = 0;
        bool ok = IsSmallNumber(v) || (v.size() > 1 && v[0] == '-' && IsSmallNumber(v.substr(1)));
        if (ok) x = std::stoll(v);
        if (!ok || x < s.min || x > s.max) {
          return bad("must be " + std::to_string(s.min) + ".." + std::to_string(s.max) +
                     ", got " + (ok ? v : quoted));
        }
        c_->gpushare.max_clients_per_gpu = static_cast<int>(x);
        return;
      }
      case Kind::kIntList: {
        std::vector<uint32_t> xs;
        bool ok = true;
        if (!v.empty()) {
          for (const auto& it : SplitCommas(v)) {
            if (!IsSmallNumber(it) || std::stoll(it) < s.min || std::stoll(it) > s.max) {
              bad("must be a list of XIDs " + std::to_string(s.min) + ".." +
                  std::to_string(s.max) + ", got \"" + it + "\"");
              ok = false;
              continue;
            }
            xs.push_back(static_cast<uint32_t>(std::stoll(it)));
          }
        }
        if (ok) c_->gpushare.ignored_xids = xs;
        return;
      }
      case Kind::kDuration: {
        auto ms = ParseDurationMs(v);
        if (!ms) return bad("must be a duration like 30s, 5m or 1h (0 = never), got " + quoted);
        c_->gpushare.health_recovery_seconds = (*ms + 999) / 1000;
        return;
      }
      case Kind::kString:
      case Kind::kPath:
        if (s.kind == Kind::kPath && !v.empty() && v[0] != '/') {
          return bad("must be an absolute path, got " + quoted);
        }
        SetString(s.row.key, v, bad);
        return;
    }
  }

 private:
  void SetBool(const std::string& key, bool b) {
    if (key == "failOnInitError") c_->fail_on_init_error = b;
    else if (key == "gdrcopyEnabled") c_->gdrcopy_enabled = b;
    else if (key == "gdsEnabled") c_->gds_enabled = b;
    else if (key == "mofedEnabled") c_->mofed_enabled = b;
    else if (key == "passDeviceSpecs") c_->plugin.pass_device_specs = b;
    else if (key == "healthEnabled") c_->gpushare.health_checks_enabled = b;
    else if (key == "publishGpuCount") c_->gpushare.memory_shares.publish_gpu_count = b;
  }

  void SetEnum(const std::string& key, const std::string& v) {
    if (key == "migStrategy") {
      c_->mig_strategy = v == "none" ? MigStrategy::kNone
                         : v == "single" ? MigStrategy::kSingle : MigStrategy::kMixed;
    } else if (key == "deviceIDStrategy") {
      c_->plugin.device_id_strategy = v == "uuid" ? DeviceIdStrategy::kUuid : DeviceIdStrategy::kIndex;
    } else if (key == "sharedDevicesAllocationPolicy" || key == "allocationPolicy") {
      c_->gpushare.allocation_policy =
          v == "packed" ? AllocationPolicy::kPacked : AllocationPolicy::kDistributed;
    } else if (key == "memoryUnit") {
      c_->gpushare.memory_shares.unit = *memshare::ParseMemoryUnit(v);
    } else if (key == "memoryLimit") {
      c_->gpushare.replica_memory_limit =
          v == "evenSplit" ? ReplicaMemoryLimit::kEvenSplit : ReplicaMemoryLimit::kNone;
    } else if (key == "computeLimit") {
      c_->gpushare.replica_compute_limit =
          v == "evenSplit" ? ReplicaComputeLimit::kEvenSplit : ReplicaComputeLimit::kNone;
    } else if (key == "memoryComputeLimit") {
      c_->gpushare.memory_shares.compute_limit =
          v == "proportional" ? MemoryComputeLimit::kProportional : MemoryComputeLimit::kNone;
    }
  }

  template <typename Bad>
  void SetString(const std::string& key, const std::string& v, Bad&& bad) {
    if (key == "nvidiaDriverRoot") {
      if (v.empty()) return bad("must not be empty");
      c_->plugin.nvidia_driver_root = v;
    } else if (key == "nvidiaDevRoot") {
      if (v.empty()) return bad("must not be empty");
      c_->plugin.nvidia_dev_root = v;
      dev_root_set = true;
    } else if (key == "cdiAnnotationPrefix") {
      if (v.empty()) return bad("must not be empty");
      c_->plugin.cdi_annotation_prefix = v;
    } else if (key == "nvidiaCTKPath") {
      c_->plugin.nvidia_ctk_path = v;
    } else if (key == "containerDriverRoot") {
      c_->plugin.container_driver_root = v;
    } else if (key == "interposerHostDir") {
      c_->gpushare.interposer_host_dir = v;
    } else if (key == "stateDir") {
      if (v.empty()) return bad("must not be empty");
      c_->gpushare.container_state_dir = v;
    } else if (key == "memoryResourceName") {
      std::string why = ExtendedResourceNameProblem(v);
      if (!why.empty()) return bad("\"" + v + "\" is not a valid extended resource name: " + why);
      if (ResourceDomain(v) == "nvidia.com") {
        return bad("\"" + v + "\": the nvidia.com domain is kept for whole, time-sliced and MIG devices");
      }
      c_->gpushare.memory_shares.resource_name = v;
    }
  }

  Problems* p_;
  NodeConfig* c_;

 public:
  bool dev_root_set = false;
};

// NVIDIA's health environment variables: DP_DISABLE_HEALTHCHECKS=all|xids|<xid,...> and
// DP_ENABLE_HEALTHCHECKS=all|<xid,...>.
void ApplyNvidiaHealthEnv(const Environment& env, NodeConfig* c, Problems* p) {
  auto parse = [&](const char* name, bool disable) {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return;
    for (const auto& raw : SplitCommas(it->second)) {
      std::string item = raw;
      std::transform(item.begin(), item.end(), item.begin(), ::tolower);
      auto& ig = c->gpushare.ignored_xids;
      if (disable && (item == "all" || item == "xids")) {
        c->gpushare.health_checks_enabled = false;
      } else if (!disable && item == "all") {
        ig.clear();
      } else if (IsSmallNumber(item) && std::stoll(item) > 0 && std::stoll(item) <= 65535) {
        uint32_t x = static_cast<uint32_t>(std::stoll(item));
        if (disable) {
          if (std::find(ig.begin(), ig.end(), x) == ig.end()) ig.push_back(x);
        } else {
          ig.erase(std::remove(ig.begin(), ig.end(), x), ig.end());
        }
      } else {
        p->AddLine(std::string(name) + ": must be " +
                   (disable ? "all, xids or a comma list of XIDs" : "all or a comma list of XIDs") +
                   ", got \"" + raw + "\"");
      }
    }
  };
  parse("DP_DISABLE_HEALTHCHECKS", true);
  parse("DP_ENABLE_HEALTHCHECKS", false);
}

Result<LoadedNodeConfig> Load(const NodeConfigFlags& flags, const Environment& env,
                              const std::string* text, const std::string& source) {
  LoadedNodeConfig out;
  out.config_path = text != nullptr ? source : "";
  Problems problems(source.empty() ? "config" : source);
  FileContents file;
  if (text != nullptr) {
    if (static_cast<int64_t>(text->size()) > kMaxConfigFileBytes) {
      return Status::InvalidArgument("cannot read config file " + source + ": " +
                                     OverLimit(static_cast<int64_t>(text->size()), kMaxConfigFileBytes));
    }
    YAML::Node doc = yaml::ParseDocument(*text, &problems);
    if (doc.IsDefined()) file = FileReader(&problems, &out.notes).Read(doc);
    if (doc.IsNull()) {
      out.warnings.push_back(source + " has no settings (empty or only comments): every setting takes its "
                             "default, and nothing is shared");
    }
  }

  // Precedence: flag > environment > file.
  NodeConfig& c = out.config;
  Interpreter interp(&problems, &c);
  std::optional<Raw> shared_policy, own_policy;
  for (const auto& s : Settings()) {
    std::optional<Raw> raw;
    if (auto it = file.settings.find(s.row.key); it != file.settings.end()) raw = it->second;
    for (const char* name : {s.alt_env, s.row.env}) {
      if (name == nullptr) continue;
      if (auto it = env.find(name); it != env.end() && !it->second.empty()) {
        raw = Raw{it->second, name, YAML::Node(YAML::NodeType::Undefined)};
      }
    }
    if (auto it = flags.values.find(s.row.key); it != flags.values.end()) {
      raw = Raw{it->second, s.row.flag, YAML::Node(YAML::NodeType::Undefined)};
    }
    if (!raw) continue;
    interp.Apply(s, *raw);
    if (std::string(s.row.key) == "sharedDevicesAllocationPolicy") shared_policy = raw;
    if (std::string(s.row.key) == "allocationPolicy") own_policy = raw;
    if (std::string(s.row.key) == "mpsRoot" && !raw->value.empty()) {
      out.notes.push_back(raw->origin + ": gpushare does not run MPS; ignored");
    }
  }
  if (shared_policy && own_policy && shared_policy->value != own_policy->value) {
    problems.Add(own_policy->origin,
                 "\"" + own_policy->value + "\" conflicts with " + shared_policy->origin + " \"" +
                     shared_policy->value + "\"; set only one of them",
                 own_policy->node.IsDefined() ? &own_policy->node : nullptr);
  }
  if (!interp.dev_root_set) c.plugin.nvidia_dev_root = c.plugin.nvidia_driver_root;
  ApplyNvidiaHealthEnv(env, &c, &problems);

  // Sharing entries, now that the ceiling and the MIG strategy are final.
  const int ceiling = c.gpushare.max_clients_per_gpu;
  c.time_slicing.rename_by_default = file.rename_by_default;
  c.time_slicing.fail_requests_greater_than_one = file.fail_requests_greater_than_one;
  for (auto& e : file.entries) {
    const std::string& path = e.resource.field_path;
    if (e.replicas) {
      if (*e.replicas < 2 || *e.replicas > ceiling) {
        problems.Add(path + ".replicas",
                     "must be 2.." + std::to_string(ceiling) + ", got " +
                         std::to_string(*e.replicas) +
                         (*e.replicas > ceiling ? " (the ceiling is gpushare.maxClientsPerGpu)" : ""),
                     &e.replicas_node);
      } else {
        e.resource.replicas = static_cast<int>(*e.replicas);
      }
    }
    if (e.resource.name.rfind("nvidia.com/mig-", 0) == 0 && c.mig_strategy != MigStrategy::kMixed) {
      problems.Add(path + ".name",
                   e.resource.name + " exists only with flags.migStrategy mixed, got " +
                       kMigStrategies[static_cast<int>(c.mig_strategy)],
                   &e.name_node);
    }
    if (e.resource.rename.empty() && file.rename_by_default && !e.resource.name.empty()) {
      std::string why = ExtendedResourceNameProblem(e.resource.name + ".shared");
      if (!why.empty()) {
        problems.Add("sharing.timeSlicing.renameByDefault",
                     e.resource.name + ".shared is not a valid extended resource name: " + why);
      }
    }
  }
  // Two entries for one resource where one takes every device overlap on any node. One line
  // per entry that overlaps earlier ones, naming the first of them and counting the others
  // (pair by pair, 1,000 entries gave 499,500 lines); linear in the entries.
  struct Group {
    size_t entries = 0, all = 0;  // entries of this name so far, and those that take every device
    const RawEntry* first = nullptr;
    const RawEntry* first_all = nullptr;
  };
  std::map<std::string, Group> groups;
  for (const auto& e : file.entries) {
    const auto& r = e.resource;
    if (r.name.empty()) continue;
    Group& g = groups[r.name];
    const bool all = r.devices.kind == DeviceSelector::Kind::kAll;
    const size_t overlapped = all ? g.entries : g.all;
    if (overlapped > 0) {
      const RawEntry* first = all ? g.first : g.first_all;
      std::string others;
      if (overlapped == 2) others = " (and 1 more entry)";
      if (overlapped > 2) others = " (and " + std::to_string(overlapped - 1) + " more entries)";
      problems.Add(r.field_path + ".devices",
                   "overlaps " + first->resource.field_path + others + ", which shares the same resource " + r.name +
                       " (one of them selects all devices); give both explicit devices lists");
    }
    if (g.entries++ == 0) g.first = &e;
    if (all && g.all++ == 0) g.first_all = &e;
  }
  for (auto& e : file.entries) c.time_slicing.resources.push_back(e.resource);
  c.imex = file.imex;
  c.gpushare.memory_shares.devices = file.memory_devices;
  // A GPU serves one kind of share: memory shares and a time-slicing entry of nvidia.com/gpu
  // overlap on every node when either side takes all GPUs.
  if (file.memory_devices) {
    for (const auto& e : file.entries) {
      const auto& r = e.resource;
      if (r.name != "nvidia.com/gpu") continue;
      if (r.devices.kind == DeviceSelector::Kind::kAll ||
          file.memory_devices->kind == DeviceSelector::Kind::kAll) {
        problems.Add("gpushare.memoryShares.devices",
                     "overlaps " + r.field_path + ", which time-slices nvidia.com/gpu (one of them selects "
                     "all GPUs); a GPU serves one kind of share: give both explicit devices lists",
                     file.memory_devices_node.IsDefined() ? &file.memory_devices_node : nullptr);
      }
    }
  }

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
  app.add_option("--config,--config-file", flags.config_file,
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

Result<NodeConfig> LoadNodeConfig(const NodeConfigFlags& flags, const Environment& env) {
  auto r = LoadNodeConfigWithNotes(flags, env);
  if (!r.ok()) return r.status();
  return std::move(r->config);
}

Result<LoadedNodeConfig> ValidateConfigFile(const std::string& path) {
  auto text = ReadNodeConfigFile(path);
  if (!text.ok()) return Status::InvalidArgument(text.status().message());
  return Load(NodeConfigFlags{}, Environment{}, &*text, path);
}

}  // namespace gpushare
