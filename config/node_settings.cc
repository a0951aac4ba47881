// The settings table: see node_config_internal.h.
#include <string>
#include <vector>

#include "config/node_config_internal.h"
#include "core/resource_name.h"

namespace gpushare::node_config_internal {
namespace {

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
}  // namespace

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

}  // namespace gpushare::node_config_internal
