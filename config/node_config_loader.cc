#include "config/node_config_loader.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <functional>
#include <set>
#include <sstream>
#include <variant>

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

Setting Bool(NodeConfigSetting row, SetBool set) {
  return {row, Kind::kBool, set};
}
Setting Enum(NodeConfigSetting row, const std::vector<std::string>& values, SetEnum set) {
  return {row, Kind::kEnum, set, values};
}
Setting Text(NodeConfigSetting row, SetText set) {
  return {row, Kind::kString, set};
}
// An absolute path (or empty).
Setting Path(NodeConfigSetting row, SetText set, const char* alt_env = nullptr,
             const char* alt_flag = nullptr) {
  return {row, Kind::kPath, set, {}, 0, 0, alt_env, alt_flag};
}
Setting Int(NodeConfigSetting row, int64_t min, int64_t max, SetInt set) {
  return {row, Kind::kInt, set, {}, min, max};
}
Setting EnumList(NodeConfigSetting row, const std::vector<std::string>& values, SetNames set) {
  return {row, Kind::kEnumList, set, values};
}
Setting IntList(NodeConfigSetting row, int64_t min, int64_t max, SetInts set) {
  return {row, Kind::kIntList, set, {}, min, max};
}
Setting Duration(NodeConfigSetting row, SetDuration set) {
  return {row, Kind::kDuration, set};
}

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
const std::vector<std::string> kMetricsAuth = {"kubernetes", "none"};
const std::vector<std::string> kMetricsNames = {"gpushare", "hami", "both"};

// ":PORT", "HOST:PORT" or "[V6]:PORT" with a port 0..65535, or "" (not served). The address
// itself is checked when the server binds.
std::string SetMetricsListen(NodeConfig& c, const std::string& v) {
  if (!v.empty()) {
    const size_t colon = v.rfind(':');
    const std::string port = colon == std::string::npos ? "" : v.substr(colon + 1);
    const std::string host = colon == std::string::npos ? "" : v.substr(0, colon);
    if (colon == std::string::npos || port.empty() || port.size() > 5 || !IsDigits(port) ||
        std::stoi(port) > 65535)
      return "must be :PORT, HOST:PORT or [IPV6]:PORT with a port 0..65535 (or empty: not "
             "served), got \"" +
             v + "\"";
    if (host.find(':') != std::string::npos && (host.front() != '[' || host.back() != ']'))
      return "an IPv6 address needs brackets: [ADDR]:PORT, got \"" + v + "\"";
  }
  c.gpushare.metrics.listen = v;
  return "";
}

// Setters shared by several rows, or with checks of their own.
void SetAllocationPolicy(NodeConfig& c, const std::string& v) {
  c.gpushare.allocation_policy =
      v == "packed" ? AllocationPolicy::kPacked : AllocationPolicy::kDistributed;
}

// Accepted, and nothing to set.
void Ignored(NodeConfig&, const std::string&) {}
std::string IgnoredText(NodeConfig&, const std::string&) {
  return "";
}

// Setters of a string field (`Field` returns it): any value, or any but "".
template <std::string& (*Field)(NodeConfig&)>
std::string SetAny(NodeConfig& c, const std::string& v) {
  Field(c) = v;
  return "";
}
template <std::string& (*Field)(NodeConfig&)>
std::string SetNonEmpty(NodeConfig& c, const std::string& v) {
  if (v.empty()) return "must not be empty";
  return SetAny<Field>(c, v);
}

std::string SetMemoryResourceName(NodeConfig& c, const std::string& v) {
  const std::string why = ExtendedResourceNameProblem(v);
  if (!why.empty()) return "\"" + v + "\" is not a valid extended resource name: " + why;
  if (ResourceDomain(v) == "nvidia.com") {
    return "\"" + v + "\": the nvidia.com domain is kept for whole, time-sliced and MIG devices";
  }
  c.gpushare.memory_shares.resource_name = v;
  return "";
}

void SetDeviceListStrategy(NodeConfig& c, const std::vector<std::string>& items) {
  DeviceListStrategy d{false, false, false, false};
  for (const std::string& it : items) {
    if (it == "envvar") d.envvar = true;
    if (it == "volume-mounts") d.volume_mounts = true;
    if (it == "cdi-annotations") d.cdi_annotations = true;
    if (it == "cdi-cri") d.cdi_cri = true;
  }
  c.plugin.device_list_strategy = d;
}

std::string& DriverRoot(NodeConfig& c) {
  return c.plugin.nvidia_driver_root;
}
std::string& DevRoot(NodeConfig& c) {
  return c.plugin.nvidia_dev_root;
}
std::string& CdiPrefix(NodeConfig& c) {
  return c.plugin.cdi_annotation_prefix;
}
std::string& StateDir(NodeConfig& c) {
  return c.gpushare.container_state_dir;
}
std::string& CtkPath(NodeConfig& c) {
  return c.plugin.nvidia_ctk_path;
}
std::string& ContainerDriverRoot(NodeConfig& c) {
  return c.plugin.container_driver_root;
}
std::string& InterposerHostDir(NodeConfig& c) {
  return c.gpushare.interposer_host_dir;
}

// The settings table: one row per setting, in the order of docs/configuration.md.
const std::vector<Setting>& Settings() {
  static const std::vector<Setting> s = {
      Enum({"migStrategy", "flags.migStrategy", "MIG_STRATEGY", "--mig-strategy",
            "how MIG devices are advertised: none, single or mixed (default none)"},
           kMigStrategies,
           [](NodeConfig& c, const std::string& v) {
             c.mig_strategy = v == "none"     ? MigStrategy::kNone
                              : v == "single" ? MigStrategy::kSingle
                                              : MigStrategy::kMixed;
           }),
      Bool(
          {"failOnInitError", "flags.failOnInitError", "FAIL_ON_INIT_ERROR", "--fail-on-init-error",
           "exit when NVML cannot start or finds no GPU (default true); false: log and wait idle"},
          [](NodeConfig& c, bool b) { c.fail_on_init_error = b; }),
      Path({"nvidiaDriverRoot", "flags.nvidiaDriverRoot", "NVIDIA_DRIVER_ROOT",
            "--nvidia-driver-root", "root of the NVIDIA driver installation (default /)"},
           SetNonEmpty<DriverRoot>, nullptr, "--driver-root"),
      Path({"nvidiaDevRoot", "flags.nvidiaDevRoot", "NVIDIA_DEV_ROOT", "--dev-root",
            "root under which /dev/nvidia* live (default: the driver root)"},
           SetNonEmpty<DevRoot>, nullptr, "--nvidia-dev-root"),
      Text({"mpsRoot", "flags.mpsRoot", "MPS_ROOT", "--mps-root",
            "MPS root (accepted; gpushare does not run MPS)"},
           IgnoredText),
      Bool({"gdrcopyEnabled", "flags.gdrcopyEnabled", "GDRCOPY_ENABLED", "--gdrcopy-enabled",
            "set NVIDIA_GDRCOPY=enabled in containers"},
           [](NodeConfig& c, bool b) { c.gdrcopy_enabled = b; }),
      Bool({"gdsEnabled", "flags.gdsEnabled", "GDS_ENABLED", "--gds-enabled",
            "set NVIDIA_GDS=enabled in containers"},
           [](NodeConfig& c, bool b) { c.gds_enabled = b; }),
      Bool({"mofedEnabled", "flags.mofedEnabled", "MOFED_ENABLED", "--mofed-enabled",
            "set NVIDIA_MOFED=enabled in containers"},
           [](NodeConfig& c, bool b) { c.mofed_enabled = b; }),
      Enum({"deviceDiscoveryStrategy", "flags.deviceDiscoveryStrategy", "DEVICE_DISCOVERY_STRATEGY",
            "--device-discovery-strategy", "auto or nvml (tegra is not supported)"},
           kDiscoveryStrategies, Ignored),
      Bool({"passDeviceSpecs", "flags.plugin.passDeviceSpecs", "PASS_DEVICE_SPECS",
            "--pass-device-specs", "put /dev/nvidia* device specs into Allocate answers"},
           [](NodeConfig& c, bool b) { c.plugin.pass_device_specs = b; }),
      EnumList({"deviceListStrategy", "flags.plugin.deviceListStrategy", "DEVICE_LIST_STRATEGY",
                "--device-list-strategy",
                "comma list of envvar, volume-mounts, cdi-annotations, cdi-cri (default envvar)"},
               kDeviceListStrategies, SetDeviceListStrategy),
      Enum({"deviceIDStrategy", "flags.plugin.deviceIDStrategy", "DEVICE_ID_STRATEGY",
            "--device-id-strategy", "what containers are given: uuid or index (default uuid)"},
           kDeviceIdStrategies,
           [](NodeConfig& c, const std::string& v) {
             c.plugin.device_id_strategy =
                 v == "uuid" ? DeviceIdStrategy::kUuid : DeviceIdStrategy::kIndex;
           }),
      Text({"cdiAnnotationPrefix", "flags.plugin.cdiAnnotationPrefix", "CDI_ANNOTATION_PREFIX",
            "--cdi-annotation-prefix", "prefix of CDI annotations (default cdi.k8s.io/)"},
           SetNonEmpty<CdiPrefix>),
      Path({"nvidiaCTKPath", "flags.plugin.nvidiaCTKPath", "NVIDIA_CDI_HOOK_PATH",
            "--nvidia-ctk-path", "path of nvidia-ctk (default /usr/bin/nvidia-ctk)"},
           SetAny<CtkPath>, "NVIDIA_CTK_PATH", "--nvidia-cdi-hook-path"),
      Path({"containerDriverRoot", "flags.plugin.containerDriverRoot", "DRIVER_ROOT_CTR_PATH",
            "--container-driver-root", "where the driver root is mounted in this container"},
           SetAny<ContainerDriverRoot>, "CONTAINER_DRIVER_ROOT", "--driver-root-ctr-path"),
      Enum({"sharedDevicesAllocationPolicy", "flags.plugin.sharedDevicesAllocationPolicy",
            "SHARED_DEVICES_ALLOCATION_POLICY", "--shared-devices-allocation-policy",
            "preferred allocation of replicas: distributed or packed (default distributed)"},
           kAllocationPolicies, SetAllocationPolicy),
      Int({"maxClientsPerGpu", "gpushare.maxClientsPerGpu", "GPUSHARE_MAX_CLIENTS_PER_GPU",
           "--max-clients-per-gpu", "ceiling on containers sharing one physical GPU (default 48)"},
          1, 1024,
          [](NodeConfig& c, int64_t x) { c.gpushare.max_clients_per_gpu = static_cast<int>(x); }),
      Enum({"allocationPolicy", "gpushare.allocationPolicy", "GPUSHARE_ALLOCATION_POLICY",
            "--allocation-policy", "same as sharedDevicesAllocationPolicy"},
           kAllocationPolicies, SetAllocationPolicy),
      Enum({"memoryLimit", "gpushare.timeSlicing.memoryLimit", "GPUSHARE_TIME_SLICING_MEMORY_LIMIT",
            "--time-slicing-memory-limit",
            "per-replica memory limit: none or evenSplit (device memory / replicas)"},
           kMemoryLimits,
           [](NodeConfig& c, const std::string& v) {
             c.gpushare.replica_memory_limit =
                 v == "evenSplit" ? ReplicaMemoryLimit::kEvenSplit : ReplicaMemoryLimit::kNone;
           }),
      Enum({"computeLimit", "gpushare.timeSlicing.computeLimit",
            "GPUSHARE_TIME_SLICING_COMPUTE_LIMIT", "--time-slicing-compute-limit",
            "per-replica SM limit: none or evenSplit (100% / replicas), enforced by the "
            "in-container library"},
           kComputeLimits,
           [](NodeConfig& c, const std::string& v) {
             c.gpushare.replica_compute_limit =
                 v == "evenSplit" ? ReplicaComputeLimit::kEvenSplit : ReplicaComputeLimit::kNone;
           }),
      Bool({"healthEnabled", "gpushare.health.enabled", "GPUSHARE_HEALTH_ENABLED",
            "--health-checks", "watch XID events and mark devices Unhealthy (default true)"},
           [](NodeConfig& c, bool b) { c.gpushare.health_checks_enabled = b; }),
      IntList(
          {"ignoredXids", "gpushare.health.ignoredXids", "GPUSHARE_IGNORED_XIDS", "--ignored-xids",
           "XIDs that never mark a device Unhealthy (default 13,31,43,45,68,109)"},
          1, 65535,
          [](NodeConfig& c, std::vector<uint32_t> xs) { c.gpushare.ignored_xids = std::move(xs); }),
      Duration({"recoverAfter", "gpushare.health.recoverAfter", "GPUSHARE_RECOVER_AFTER",
                "--recover-after",
                "quiet period before an Unhealthy device is Healthy again (default 5m; 0 = never)"},
               [](NodeConfig& c, std::chrono::milliseconds d) {
                 c.gpushare.health_recovery_seconds = (d.count() + 999) / 1000;
               }),
      Path({"interposerHostDir", "gpushare.interposer.hostDir", "GPUSHARE_INTERPOSER_HOST_DIR",
            "--interposer-host-dir",
            "host directory holding libgpushare-cuda.so (empty = not mounted)"},
           SetAny<InterposerHostDir>),
      Path({"stateDir", "gpushare.interposer.stateDir", "GPUSHARE_STATE_DIR", "--state-dir",
            "host directory for per-container accounting (default /var/lib/gpushare/containers)"},
           SetNonEmpty<StateDir>),
      Text({"memoryResourceName", "gpushare.memoryShares.resourceName",
            "GPUSHARE_MEMORY_RESOURCE_NAME", "--memory-resource-name",
            "resource of memory shares (default aliyun.com/gpu-mem)"},
           SetMemoryResourceName),
      Enum({"memoryUnit", "gpushare.memoryShares.unit", "GPUSHARE_MEMORY_UNIT", "--memory-unit",
            "what one memory-share unit is: GiB or MiB (default GiB)"},
           kMemoryUnits,
           [](NodeConfig& c, const std::string& v) {
             c.gpushare.memory_shares.unit = *memshare::ParseMemoryUnit(v);
           }),
      Bool({"publishGpuCount", "gpushare.memoryShares.publishGpuCount",
            "GPUSHARE_PUBLISH_GPU_COUNT", "--publish-gpu-count",
            "publish aliyun.com/gpu-count in the node's capacity (default true)"},
           [](NodeConfig& c, bool b) { c.gpushare.memory_shares.publish_gpu_count = b; }),
      Bool({"memoryFractions", "gpushare.memoryShares.fractions", "GPUSHARE_MEMORY_FRACTIONS",
            "--memory-fractions",
            "advertise alibabacloud.com/gpu-milli (fractions and whole GPUs) on the memory-share "
            "GPUs (default true)"},
           [](NodeConfig& c, bool b) { c.gpushare.memory_shares.fractions = b; }),
      Enum({"memoryComputeLimit", "gpushare.memoryShares.computeLimit",
            "GPUSHARE_MEMORY_COMPUTE_LIMIT", "--memory-compute-limit",
            "SM limit of a memory share: none or proportional (the share's fraction of the GPU's "
            "memory)"},
           kMemoryComputeLimits,
           [](NodeConfig& c, const std::string& v) {
             c.gpushare.memory_shares.compute_limit = v == "proportional"
                                                          ? MemoryComputeLimit::kProportional
                                                          : MemoryComputeLimit::kNone;
           }),
      Text({"metricsListen", "gpushare.metrics.listen", "GPUSHARE_METRICS_LISTEN",
            "--metrics-listen",
            "address of /metrics, /healthz and /readyz (default :9445; empty = not served)"},
           SetMetricsListen),
      Enum({"metricsAuth", "gpushare.metrics.auth", "GPUSHARE_METRICS_AUTH", "--metrics-auth",
            "who may read /metrics: kubernetes (TokenReview + SubjectAccessReview, default) or "
            "none (loopback listen addresses only)"},
           kMetricsAuth, [](NodeConfig& c, const std::string& v) { c.gpushare.metrics.auth = v; }),
      Enum({"metricsNames", "gpushare.metrics.names", "GPUSHARE_METRICS_NAMES", "--metrics-names",
            "metric names: gpushare (default), hami (HAMi's names and labels) or both"},
           kMetricsNames,
           [](NodeConfig& c, const std::string& v) { c.gpushare.metrics.names = v; }),
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

std::string Leaf(const std::string& path) {
  return path.substr(path.rfind('.') + 1);
}
std::string Parent(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

// Digits short enough for std::stoll and for any count or index a setting takes.
bool IsSmallNumber(std::string_view s) {
  return s.size() < 10 && IsDigits(s);
}

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
  FileReader(Problems* problems, std::vector<std::string>* notes) : p_(problems), notes_(notes) {}

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
          if (auto b = yaml::ScalarBool(n))
            text = *b ? "true" : "false";
          else
            p_->Add(path, "must be true or false, got " + yaml::KindName(n), &n);
          break;
        case Kind::kInt:
          if (auto i = yaml::ScalarInt(n))
            text = std::to_string(*i);
          else
            p_->Add(path,
                    "must be an integer " + std::to_string(s.min) + ".." + std::to_string(s.max) +
                        ", got " + yaml::KindName(n),
                    &n);
          break;
        case Kind::kEnumList:
        case Kind::kIntList:
          text = ReadList(s, path, n);
          break;
        case Kind::kEnum:
        case Kind::kString:
        case Kind::kPath:
        case Kind::kDuration:
          if (n.IsScalar())
            text = n.Scalar();
          else
            p_->Add(path, "must be a string, got " + yaml::KindName(n), &n);
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
      notes_->push_back(
          "flags.useNodeFeatureAPI: a gpu-feature-discovery setting; ignored by "
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
      notes_->push_back(
          "flags.gfd: gpu-feature-discovery settings are accepted and ignored by "
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
      p_->Add("sharing.timeSlicing.strategy",
              "must be empty (the only strategy), got \"" + *s + "\"", &sn);
    }
    out_.rename_by_default = ts.Bool("renameByDefault").value_or(false);
    out_.fail_requests_greater_than_one = ts.Bool("failRequestsGreaterThanOne").value_or(false);
    YAML::Node list = ts.Get("resources");
    if (!list.IsDefined() || (list.IsSequence() && list.size() == 0)) {
      p_->Add("sharing.timeSlicing.resources", "at least one entry {name, replicas} is required",
              &tsn);
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
               "profile, e.g. nvidia.com/mig-" +
               std::to_string(slices->gpu_slices) + "g." + std::to_string(slices->memory_gb) + "gb";
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
  std::optional<DeviceSelector> ReadSelector(const YAML::Node& n, const std::string& path,
                                             const SelectorRules& r) {
    DeviceSelector out;
    if (n.IsScalar()) {
      if (!yaml::IsQuoted(n) && yaml::ScalarInt(n)) {
        int64_t c = *yaml::ScalarInt(n);
        if (c <= 0) {
          p_->Add(path,
                  r.count_problem + ", got " + n.Scalar() +
                      (r.none_allowed ? " (use none for no GPU)" : ""),
                  &n);
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
    r.expect =
        "must be \"all\", a positive count, or a list of GPU indices (0), MIG indices (0:1), "
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
                Plus(SettingKeys("gpushare"),
                     {"timeSlicing", "health", "interposer", "memoryShares", "metrics"}));
    if (!m.ok()) return;
    ReadSettings(m, "gpushare");
    for (const char* section : {"timeSlicing", "health", "interposer", "metrics"}) {
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
      notes_->push_back(
          path + ".devices is not set: no GPU serves memory shares (set all, a count or a list)");
      return;
    }
    SelectorRules r;
    r.expect =
        "must be \"all\", \"none\", a positive count, or a list of GPU indices (0) or GPU UUIDs "
        "(GPU-...)";
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

  // Checks `raw` against the row's kind, values and bounds and, when it passes, calls the row's
  // setter; a problem names raw.origin (and the file position when it came from the file).
  void Apply(const Setting& s, const Raw& raw) {
    const Value v{s, raw.value, [&](const std::string& what) {
                    p_->Add(raw.origin, what, raw.node.IsDefined() ? &raw.node : nullptr);
                  }};
    switch (s.kind) {
      case Kind::kBool:
        return ApplyBool(v);
      case Kind::kEnum:
        return ApplyEnum(v);
      case Kind::kEnumList:
        return ApplyEnumList(v);
      case Kind::kInt:
        return ApplyInt(v);
      case Kind::kIntList:
        return ApplyIntList(v);
      case Kind::kDuration:
        return ApplyDuration(v);
      case Kind::kString:
      case Kind::kPath:
        return ApplyText(v);
    }
  }

 private:
  // One value being applied, and how a problem with it is reported.
  struct Value {
    const Setting& s;
    const std::string& text;
    std::function<void(const std::string&)> bad;
    std::string Quoted() const { return "\"" + text + "\""; }
  };

  void ApplyBool(const Value& v) {
    auto b = ParseBoolText(v.text);
    if (!b) return v.bad("must be true or false, got " + v.Quoted());
    std::get<SetBool>(v.s.set)(*c_, *b);
  }

  void ApplyEnum(const Value& v) {
    const auto& allowed = v.s.values;
    if (std::find(allowed.begin(), allowed.end(), v.text) == allowed.end()) {
      std::string extra;
      if (std::string(v.s.row.key) == "deviceDiscoveryStrategy" && v.text == "tegra") {
        extra = " (Tegra devices are not supported by gpushare)";
      }
      return v.bad("must be " + yaml::OneOf(allowed) + ", got " + v.Quoted() + extra);
    }
    std::get<SetEnum>(v.s.set)(*c_, v.text);
  }

  void ApplyEnumList(const Value& v) {
    const auto& allowed = v.s.values;
    const std::vector<std::string> items = SplitCommas(v.text);
    bool ok = !items.empty();
    for (const auto& it : items) {
      if (std::find(allowed.begin(), allowed.end(), it) != allowed.end()) continue;
      v.bad("must be one or more of " + Join(allowed) + ", got \"" + it + "\"");
      ok = false;
    }
    if (items.empty()) v.bad("must name at least one of " + Join(allowed));
    if (ok) std::get<SetNames>(v.s.set)(*c_, items);
  }

  void ApplyInt(const Value& v) {
    const std::string& t = v.text;
    const bool ok = IsSmallNumber(t) || (t.size() > 1 && t[0] == '-' && IsSmallNumber(t.substr(1)));
    const int64_t x = ok ? std::stoll(t) : 0;
    if (!ok || x < v.s.min || x > v.s.max) {
      return v.bad("must be " + std::to_string(v.s.min) + ".." + std::to_string(v.s.max) +
                   ", got " + (ok ? t : v.Quoted()));
    }
    std::get<SetInt>(v.s.set)(*c_, x);
  }

  void ApplyIntList(const Value& v) {
    std::vector<uint32_t> xs;
    bool ok = true;
    for (const auto& it : v.text.empty() ? std::vector<std::string>{} : SplitCommas(v.text)) {
      if (!IsSmallNumber(it) || std::stoll(it) < v.s.min || std::stoll(it) > v.s.max) {
        v.bad("must be a list of XIDs " + std::to_string(v.s.min) + ".." + std::to_string(v.s.max) +
              ", got \"" + it + "\"");
        ok = false;
        continue;
      }
      xs.push_back(static_cast<uint32_t>(std::stoll(it)));
    }
    if (ok) std::get<SetInts>(v.s.set)(*c_, std::move(xs));
  }

  void ApplyDuration(const Value& v) {
    auto ms = ParseDurationMs(v.text);
    if (!ms) return v.bad("must be a duration like 30s, 5m or 1h (0 = never), got " + v.Quoted());
    std::get<SetDuration>(v.s.set)(*c_, std::chrono::milliseconds(*ms));
  }

  void ApplyText(const Value& v) {
    if (v.s.kind == Kind::kPath && !v.text.empty() && v.text[0] != '/') {
      return v.bad("must be an absolute path, got " + v.Quoted());
    }
    const std::string why = std::get<SetText>(v.s.set)(*c_, v.text);
    if (!why.empty()) v.bad(why);
  }

  Problems* p_;
  NodeConfig* c_;
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

// The value of `s` at the highest level that sets it (flag > environment > file), if any.
std::optional<Raw> Resolve(const Setting& s, const FileContents& file, const NodeConfigFlags& flags,
                           const Environment& env) {
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
  return raw;
}

// Applies every setting's final value to out->config, then the rules between settings.
void ApplySettings(const FileContents& file, const NodeConfigFlags& flags, const Environment& env,
                   Problems* problems, LoadedNodeConfig* out) {
  NodeConfig& c = out->config;
  Interpreter interp(problems, &c);
  std::map<std::string, Raw> given;  // by key: the settings set at some level
  for (const auto& s : Settings()) {
    std::optional<Raw> raw = Resolve(s, file, flags, env);
    if (!raw) continue;
    interp.Apply(s, *raw);
    given[s.row.key] = *raw;
  }
  auto shared_policy = given.find("sharedDevicesAllocationPolicy"),
       own_policy = given.find("allocationPolicy");
  if (shared_policy != given.end() && own_policy != given.end() &&
      shared_policy->second.value != own_policy->second.value) {
    const Raw& own = own_policy->second;
    problems->Add(own.origin,
                  "\"" + own.value + "\" conflicts with " + shared_policy->second.origin + " \"" +
                      shared_policy->second.value + "\"; set only one of them",
                  own.node.IsDefined() ? &own.node : nullptr);
  }
  if (auto mps = given.find("mpsRoot"); mps != given.end() && !mps->second.value.empty()) {
    out->notes.push_back(mps->second.origin + ": gpushare does not run MPS; ignored");
  }
  if (given.count("nvidiaDevRoot") == 0) c.plugin.nvidia_dev_root = c.plugin.nvidia_driver_root;
}

// Checks each sharing entry now that the ceiling and the MIG strategy are final.
void CheckEntries(const NodeConfig& c, FileContents& file, Problems* problems) {
  const int ceiling = c.gpushare.max_clients_per_gpu;
  for (auto& e : file.entries) {
    const std::string& path = e.resource.field_path;
    if (e.replicas) {
      if (*e.replicas < 2 || *e.replicas > ceiling) {
        problems->Add(
            path + ".replicas",
            "must be 2.." + std::to_string(ceiling) + ", got " + std::to_string(*e.replicas) +
                (*e.replicas > ceiling ? " (the ceiling is gpushare.maxClientsPerGpu)" : ""),
            &e.replicas_node);
      } else {
        e.resource.replicas = static_cast<int>(*e.replicas);
      }
    }
    if (e.resource.name.rfind("nvidia.com/mig-", 0) == 0 && c.mig_strategy != MigStrategy::kMixed) {
      problems->Add(path + ".name",
                    e.resource.name + " exists only with flags.migStrategy mixed, got " +
                        kMigStrategies[static_cast<int>(c.mig_strategy)],
                    &e.name_node);
    }
    if (e.resource.rename.empty() && file.rename_by_default && !e.resource.name.empty()) {
      std::string why = ExtendedResourceNameProblem(e.resource.name + ".shared");
      if (!why.empty()) {
        problems->Add("sharing.timeSlicing.renameByDefault",
                      e.resource.name + ".shared is not a valid extended resource name: " + why);
      }
    }
  }
}

// Two entries for one resource where one takes every device overlap on any node. One line
// per entry that overlaps earlier ones, naming the first of them and counting the others
// (pair by pair, 1,000 entries gave 499,500 lines); linear in the entries.
void CheckOverlaps(const FileContents& file, Problems* problems) {
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
      problems->Add(r.field_path + ".devices",
                    "overlaps " + first->resource.field_path + others +
                        ", which shares the same resource " + r.name +
                        " (one of them selects all devices); give both explicit devices lists");
    }
    if (g.entries++ == 0) g.first = &e;
    if (all && g.all++ == 0) g.first_all = &e;
  }
}

// A GPU serves one kind of share: memory shares and a time-slicing entry of nvidia.com/gpu
// overlap on every node when either side takes all GPUs.
void CheckMemorySharesOverlap(const FileContents& file, Problems* problems) {
  if (!file.memory_devices) return;
  for (const auto& e : file.entries) {
    const auto& r = e.resource;
    if (r.name != "nvidia.com/gpu") continue;
    if (r.devices.kind == DeviceSelector::Kind::kAll ||
        file.memory_devices->kind == DeviceSelector::Kind::kAll) {
      problems->Add(
          "gpushare.memoryShares.devices",
          "overlaps " + r.field_path +
              ", which time-slices nvidia.com/gpu (one of them selects "
              "all GPUs); a GPU serves one kind of share: give both explicit devices lists",
          file.memory_devices_node.IsDefined() ? &file.memory_devices_node : nullptr);
    }
  }
}

// Reads the file's text (when there is one) into `file`.
Status ReadFile(const std::string& text, const std::string& source, Problems* problems,
                FileContents* file, LoadedNodeConfig* out) {
  if (static_cast<int64_t>(text.size()) > kMaxConfigFileBytes) {
    return Status::InvalidArgument(
        "cannot read config file " + source + ": " +
        OverLimit(static_cast<int64_t>(text.size()), kMaxConfigFileBytes));
  }
  YAML::Node doc = yaml::ParseDocument(text, problems);
  if (doc.IsDefined()) *file = FileReader(problems, &out->notes).Read(doc);
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

Result<NodeConfig> LoadNodeConfig(const NodeConfigFlags& flags, const Environment& env) {
  GPUSHARE_ASSIGN_OR_RETURN(LoadedNodeConfig loaded, LoadNodeConfigWithNotes(flags, env));
  return std::move(loaded.config);
}

Result<LoadedNodeConfig> ValidateConfigFile(const std::string& path) {
  auto text = ReadNodeConfigFile(path);
  if (!text.ok()) return Status::InvalidArgument(text.status().message());
  return Load(NodeConfigFlags{}, Environment{}, &*text, path);
}

}  // namespace gpushare
