#include "config/node_config_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>

#include "config/duration.h"
#include "base/strings.h"

namespace gpushare {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Result<LoadedNodeConfig> Parse(const std::string& text, const Environment& env = {},
                               const NodeConfigFlags& flags = {}) {
  return LoadNodeConfigFromText(flags, env, text, "node.yaml");
}

std::vector<std::string> Problems(const std::string& text, const Environment& env = {},
                                  const NodeConfigFlags& flags = {}) {
  auto r = Parse(text, env, flags);
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return SplitLines(r.status().message());
}

TEST(ConfigLoader, EmptyFileGivesNvidiaDefaults) {
  for (const char* text : {"", "version: v1\n", "{}", "version: \"\"\n"}) {
    auto r = Parse(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    const NodeConfig& c = r->config;
    EXPECT_EQ(c.mig_strategy, MigStrategy::kNone);
    EXPECT_TRUE(c.fail_on_init_error);
    EXPECT_FALSE(c.plugin.pass_device_specs);
    EXPECT_TRUE(c.plugin.device_list_strategy.envvar);
    EXPECT_FALSE(c.plugin.device_list_strategy.volume_mounts);
    EXPECT_EQ(c.plugin.device_id_strategy, DeviceIdStrategy::kUuid);
    EXPECT_EQ(c.plugin.cdi_annotation_prefix, "cdi.k8s.io/");
    EXPECT_EQ(c.plugin.nvidia_driver_root, "/");
    EXPECT_EQ(c.plugin.nvidia_dev_root, "/");
    EXPECT_EQ(c.gpushare.max_clients_per_gpu, 48);
    EXPECT_EQ(c.gpushare.ignored_xids, (std::vector<uint32_t>{13, 31, 43, 45, 68, 109}));
    EXPECT_EQ(c.gpushare.health_recovery_seconds, 300);
    EXPECT_TRUE(c.time_slicing.resources.empty());
  }
}

// The examples of NVIDIA's README, as written there.
TEST(ConfigLoader, AcceptsNvidiaReadmeExamples) {
  auto flags = Parse(R"(version: v1
flags:
  migStrategy: "none"
  failOnInitError: true
  nvidiaDriverRoot: "/"
  plugin:
    passDeviceSpecs: false
    deviceListStrategy: "envvar"
    deviceIDStrategy: "uuid"
)");
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();

  auto ts = Parse(R"(version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 10
)");
  ASSERT_TRUE(ts.ok()) << ts.status().ToString();
  ASSERT_EQ(ts->config.time_slicing.resources.size(), 1u);
  const auto& r = ts->config.time_slicing.resources[0];
  EXPECT_EQ(r.name, "nvidia.com/gpu");
  EXPECT_EQ(r.replicas, 10);
  EXPECT_EQ(r.devices.kind, DeviceSelector::Kind::kAll);
  EXPECT_EQ(r.field_path, "sharing.timeSlicing.resources[0]");
  EXPECT_FALSE(ts->config.time_slicing.rename_by_default);

  auto renamed = Parse(R"(version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 10
)");
  ASSERT_TRUE(renamed.ok()) << renamed.status().ToString();
  EXPECT_TRUE(renamed->config.time_slicing.rename_by_default);
  EXPECT_TRUE(renamed->config.time_slicing.fail_requests_greater_than_one);

  auto mig = Parse(R"(version: v1
flags:
  migStrategy: mixed
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 2
    - name: nvidia.com/mig-1g.5gb
      replicas: 2
    - name: nvidia.com/mig-2g.10gb
      replicas: 2
    - name: nvidia.com/mig-3g.20gb
      replicas: 3
    - name: nvidia.com/mig-7g.40gb
      replicas: 7
)");
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  EXPECT_EQ(mig->config.mig_strategy, MigStrategy::kMixed);
  EXPECT_EQ(mig->config.time_slicing.resources.size(), 5u);
}

TEST(ConfigLoader, AcceptsJson) {
  auto r = Parse(R"({
	"version": "v1",
	"flags": {"migStrategy": "mixed", "plugin": {"deviceListStrategy": ["envvar", "cdi-cri"],
	  "deviceIDStrategy": "index", "passDeviceSpecs": true}},
	"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 3,
	  "devices": ["0:1", 2]}]}}
})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const NodeConfig& c = r->config;
  EXPECT_TRUE(c.plugin.device_list_strategy.envvar);
  EXPECT_TRUE(c.plugin.device_list_strategy.cdi_cri);
  EXPECT_FALSE(c.plugin.device_list_strategy.volume_mounts);
  EXPECT_EQ(c.plugin.device_id_strategy, DeviceIdStrategy::kIndex);
  EXPECT_TRUE(c.plugin.pass_device_specs);
  const auto& d = c.time_slicing.resources.at(0).devices;
  EXPECT_EQ(d.kind, DeviceSelector::Kind::kList);
  EXPECT_THAT(d.items, ElementsAre("0:1", "2"));
}

TEST(ConfigLoader, EveryKeyOfTheSchema) {
  auto r = Parse(R"(version: v1
flags:
  migStrategy: single
  failOnInitError: false
  nvidiaDriverRoot: /run/nvidia/driver
  nvidiaDevRoot: /
  mpsRoot: /run/nvidia/mps
  gdrcopyEnabled: true
  gdsEnabled: true
  mofedEnabled: false
  useNodeFeatureAPI: false
  deviceDiscoveryStrategy: nvml
  plugin:
    passDeviceSpecs: true
    deviceListStrategy: volume-mounts
    deviceIDStrategy: index
    cdiAnnotationPrefix: cdi.example.com/
    nvidiaCTKPath: /usr/local/bin/nvidia-ctk
    containerDriverRoot: /driver-root
    sharedDevicesAllocationPolicy: packed
  gfd:
    oneshot: false
    noTimestamp: false
    sleepInterval: 60s
    outputFile: /etc/kubernetes/node-feature-discovery/features.d/gfd
    machineTypeFile: /sys/class/dmi/id/product_name
resources:
  gpus:
  - pattern: "*"
    name: gpu
imex:
  channelIDs: [0]
  required: true
sharing:
  timeSlicing:
    strategy: ""
    renameByDefault: false
    failRequestsGreaterThanOne: true
    resources:
    - name: gpu
      rename: shared-gpu
      devices: 2
      replicas: 4
gpushare:
  maxClientsPerGpu: 16
  allocationPolicy: packed
  timeSlicing:
    memoryLimit: evenSplit
    computeLimit: evenSplit
  health:
    enabled: true
    ignoredXids: [13, 31, 94]
    recoverAfter: 1m30s
  interposer:
    hostDir: /opt/gpushare/lib
    stateDir: /var/lib/gpushare/state
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const NodeConfig& c = r->config;
  EXPECT_EQ(c.mig_strategy, MigStrategy::kSingle);
  EXPECT_FALSE(c.fail_on_init_error);
  EXPECT_EQ(c.plugin.nvidia_driver_root, "/run/nvidia/driver");
  EXPECT_EQ(c.plugin.nvidia_dev_root, "/");
  EXPECT_TRUE(c.gdrcopy_enabled);
  EXPECT_TRUE(c.gds_enabled);
  EXPECT_FALSE(c.mofed_enabled);
  EXPECT_TRUE(c.plugin.pass_device_specs);
  EXPECT_FALSE(c.plugin.device_list_strategy.envvar);
  EXPECT_TRUE(c.plugin.device_list_strategy.volume_mounts);
  EXPECT_EQ(c.plugin.device_id_strategy, DeviceIdStrategy::kIndex);
  EXPECT_EQ(c.plugin.cdi_annotation_prefix, "cdi.example.com/");
  EXPECT_EQ(c.plugin.nvidia_ctk_path, "/usr/local/bin/nvidia-ctk");
  EXPECT_EQ(c.gpushare.allocation_policy, AllocationPolicy::kPacked);
  EXPECT_EQ(c.gpushare.replica_memory_limit, ReplicaMemoryLimit::kEvenSplit);
  EXPECT_EQ(c.gpushare.replica_compute_limit, ReplicaComputeLimit::kEvenSplit);
  EXPECT_EQ(c.gpushare.memory_shares.compute_limit, MemoryComputeLimit::kNone);
  EXPECT_EQ(c.imex.channel_ids, (std::vector<int>{0}));
  EXPECT_TRUE(c.imex.required);
  EXPECT_TRUE(c.time_slicing.fail_requests_greater_than_one);
  const auto& e = c.time_slicing.resources.at(0);
  EXPECT_EQ(e.name, "nvidia.com/gpu");
  EXPECT_EQ(e.rename, "nvidia.com/shared-gpu");
  EXPECT_EQ(e.devices.kind, DeviceSelector::Kind::kCount);
  EXPECT_EQ(e.devices.count, 2);
  EXPECT_EQ(e.replicas, 4);
  EXPECT_EQ(c.gpushare.max_clients_per_gpu, 16);
  EXPECT_EQ(c.gpushare.replica_memory_limit, ReplicaMemoryLimit::kEvenSplit);
  EXPECT_EQ(c.gpushare.ignored_xids, (std::vector<uint32_t>{13, 31, 94}));
  EXPECT_EQ(c.gpushare.health_recovery_seconds, 90);
  EXPECT_EQ(c.gpushare.interposer_host_dir, "/opt/gpushare/lib");
  EXPECT_EQ(c.gpushare.container_state_dir, "/var/lib/gpushare/state");
  // Accepted-but-ignored sections are noted.
  std::string notes;
  for (const auto& n : r->notes) notes += n + "\n";
  EXPECT_THAT(notes, HasSubstr("flags.gfd: gpu-feature-discovery settings are accepted and ignored"));
  EXPECT_THAT(notes, HasSubstr("resources: custom resource naming is disabled"));
  EXPECT_THAT(notes, HasSubstr("flags.mpsRoot: gpushare does not run MPS"));
}

// One invalid document per row: the exact problem line (field path, allowed values, location).
struct InvalidCase {
  const char* name;
  std::string yaml;
  std::string problem;
};

class InvalidConfig : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidConfig, NamesTheFieldAndTheAllowedValues) {
  const InvalidCase& c = GetParam();
  auto lines = Problems(c.yaml);
  ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], c.problem);
}

const std::string kTs = "sharing:\n  timeSlicing:\n    resources:\n";

INSTANTIATE_TEST_SUITE_P(
    Matrix, InvalidConfig,
    ::testing::Values(
        InvalidCase{"BadVersion", "version: v2\n",
                    "version: must be v1 (or empty), got \"v2\" (node.yaml:1:10)"},
        InvalidCase{"UnknownTopKey", "versoin: v1\n",
                    "versoin: unknown key (allowed here: version, flags, resources, sharing, imex, "
                    "gpushare) (node.yaml:1:1)"},
        InvalidCase{"UnknownNestedKey", "flags:\n  plugin:\n    passDevicesSpecs: true\n",
                    "flags.plugin.passDevicesSpecs: unknown key (allowed here: passDeviceSpecs, "
                    "deviceListStrategy, deviceIDStrategy, cdiAnnotationPrefix, nvidiaCTKPath, "
                    "containerDriverRoot, sharedDevicesAllocationPolicy) (node.yaml:3:5)"},
        InvalidCase{"UnknownEntryKey",
                    kTs + "    - name: nvidia.com/gpu\n      replicas: 4\n      memory: 2\n",
                    "sharing.timeSlicing.resources[0].memory: unknown key (allowed here: name, "
                    "rename, devices, replicas) (node.yaml:6:7)"},
        InvalidCase{"ReplicasMissing", kTs + "    - name: nvidia.com/gpu\n",
                    "sharing.timeSlicing.resources[0].replicas: is required (an integer, at least "
                    "2) (node.yaml:4:7)"},
        InvalidCase{"BadMigStrategy", "flags:\n  migStrategy: hybrid\n",
                    "flags.migStrategy: must be none, single or mixed, got \"hybrid\" "
                    "(node.yaml:2:16)"},
        InvalidCase{"QuotedBool", "flags:\n  failOnInitError: \"false\"\n",
                    "flags.failOnInitError: must be true or false, got the string \"false\" "
                    "(node.yaml:2:20)"},
        InvalidCase{"BoolAsNumber", "flags:\n  plugin:\n    passDeviceSpecs: 1\n",
                    "flags.plugin.passDeviceSpecs: must be true or false, got the number 1 "
                    "(node.yaml:3:22)"},
        InvalidCase{"BadDeviceListStrategy", "flags:\n  plugin:\n    deviceListStrategy: [envvar, cdi]\n",
                    "flags.plugin.deviceListStrategy: must be one or more of envvar, volume-mounts, "
                    "cdi-annotations, cdi-cri, got \"cdi\" (node.yaml:3:25)"},
        InvalidCase{"DeviceListStrategyMap", "flags:\n  plugin:\n    deviceListStrategy: {a: b}\n",
                    "flags.plugin.deviceListStrategy: must be a string or a list of strings, got a "
                    "mapping (node.yaml:3:25)"},
        InvalidCase{"BadDeviceIdStrategy", "flags:\n  plugin:\n    deviceIDStrategy: serial\n",
                    "flags.plugin.deviceIDStrategy: must be uuid or index, got \"serial\" "
                    "(node.yaml:3:23)"},
        InvalidCase{"BadAllocationPolicy",
                    "flags:\n  plugin:\n    sharedDevicesAllocationPolicy: spread\n",
                    "flags.plugin.sharedDevicesAllocationPolicy: must be distributed or packed, "
                    "got \"spread\" (node.yaml:3:36)"},
        InvalidCase{"Tegra", "flags:\n  deviceDiscoveryStrategy: tegra\n",
                    "flags.deviceDiscoveryStrategy: must be auto or nvml, got \"tegra\" (Tegra "
                    "devices are not supported by gpushare) (node.yaml:2:28)"},
        InvalidCase{"RelativeDriverRoot", "flags:\n  nvidiaDriverRoot: run/nvidia\n",
                    "flags.nvidiaDriverRoot: must be an absolute path, got \"run/nvidia\" "
                    "(node.yaml:2:21)"},
        InvalidCase{"FlagsNotAMap", "flags: [a]\n",
                    "flags: must be a mapping (key: value), got a list (node.yaml:1:8)"},
        InvalidCase{"ReplicasTooMany", kTs + "    - name: nvidia.com/gpu\n      replicas: 60\n",
                    "sharing.timeSlicing.resources[0].replicas: must be 2..48, got 60 (the ceiling "
                    "is gpushare.maxClientsPerGpu) (node.yaml:5:17)"},
        InvalidCase{"ReplicasOne", kTs + "    - name: nvidia.com/gpu\n      replicas: 1\n",
                    "sharing.timeSlicing.resources[0].replicas: must be 2..48, got 1 "
                    "(node.yaml:5:17)"},
        InvalidCase{"ReplicasQuoted", kTs + "    - name: nvidia.com/gpu\n      replicas: \"10\"\n",
                    "sharing.timeSlicing.resources[0].replicas: must be an integer, got the string "
                    "\"10\" (node.yaml:5:17)"},
        InvalidCase{"ReplicasCeilingRaised",
                    "gpushare:\n  maxClientsPerGpu: 8\n" + kTs +
                        "    - name: nvidia.com/gpu\n      replicas: 10\n",
                    "sharing.timeSlicing.resources[0].replicas: must be 2..8, got 10 (the ceiling "
                    "is gpushare.maxClientsPerGpu) (node.yaml:7:17)"},
        InvalidCase{"NoResources", "sharing:\n  timeSlicing:\n    renameByDefault: true\n",
                    "sharing.timeSlicing.resources: at least one entry {name, replicas} is "
                    "required (node.yaml:3:5)"},
        InvalidCase{"NameMissing", kTs + "    - replicas: 2\n",
                    "sharing.timeSlicing.resources[0].name: is required (nvidia.com/gpu or "
                    "nvidia.com/mig-<profile>) (node.yaml:4:7)"},
        InvalidCase{"NameUnknown", kTs + "    - name: amd.com/gpu\n      replicas: 2\n",
                    "sharing.timeSlicing.resources[0].name: must be nvidia.com/gpu or "
                    "nvidia.com/mig-<profile> (e.g. nvidia.com/mig-1g.10gb), got \"amd.com/gpu\" "
                    "(node.yaml:4:13)"},
        InvalidCase{"NameSubProfile",
                    "flags:\n  migStrategy: mixed\n" + kTs +
                        "    - name: nvidia.com/mig-1c.2g.20gb\n      replicas: 2\n",
                    "sharing.timeSlicing.resources[0].name: compute-instance sub-profiles are never "
                    "advertised; use the GPU-instance profile, e.g. nvidia.com/mig-2g.20gb, got "
                    "\"nvidia.com/mig-1c.2g.20gb\" (node.yaml:6:13)"},
        InvalidCase{"MigNeedsMixed", kTs + "    - name: nvidia.com/mig-1g.10gb\n      replicas: 3\n",
                    "sharing.timeSlicing.resources[0].name: nvidia.com/mig-1g.10gb exists only "
                    "with flags.migStrategy mixed, got none (node.yaml:4:13)"},
        InvalidCase{"RenameInvalid",
                    kTs + "    - name: nvidia.com/gpu\n      rename: kubernetes.io/gpu\n      replicas: 2\n",
                    "sharing.timeSlicing.resources[0].rename: kubernetes.io/gpu is not a valid "
                    "extended resource name: names in the kubernetes.io namespace are reserved for "
                    "native resources (node.yaml:5:15)"},
        InvalidCase{"RenameTooLong",
                    kTs + "    - name: nvidia.com/gpu\n      rename: " + std::string(64, 'g') +
                        "\n      replicas: 2\n",
                    "sharing.timeSlicing.resources[0].rename: nvidia.com/" + std::string(64, 'g') +
                        " is not a valid extended resource name: the part after '/' is 64 "
                        "characters, at most 63 are allowed (node.yaml:5:15)"},
        InvalidCase{"DevicesWord", kTs + "    - name: nvidia.com/gpu\n      devices: some\n      replicas: 2\n",
                    "sharing.timeSlicing.resources[0].devices: must be \"all\", a positive count, "
                    "or a list of GPU indices (0), MIG indices (0:1), GPU UUIDs (GPU-...) or MIG "
                    "UUIDs (MIG-...), got \"some\" (node.yaml:5:16)"},
        InvalidCase{"DevicesZero", kTs + "    - name: nvidia.com/gpu\n      devices: 0\n      replicas: 2\n",
                    "sharing.timeSlicing.resources[0].devices: a count of devices must be > 0, got "
                    "0 (node.yaml:5:16)"},
        InvalidCase{"DevicesBadItem",
                    kTs + "    - name: nvidia.com/gpu\n      devices: [0, GPU-1234]\n      replicas: 2\n",
                    "sharing.timeSlicing.resources[0].devices[1]: must be a GPU index (0), a MIG "
                    "index (0:1), a GPU UUID (GPU-...) or a MIG UUID (MIG-<uuid> or "
                    "MIG-GPU-<uuid>/<gi>/<ci>), got \"GPU-1234\" (node.yaml:5:20)"},
        InvalidCase{"DevicesEmpty", kTs + "    - name: nvidia.com/gpu\n      devices: []\n      replicas: 2\n",
                    "sharing.timeSlicing.resources[0].devices: an empty list selects nothing; omit "
                    "devices (= all) or list devices (node.yaml:5:16)"},
        InvalidCase{"OverlapAll",
                    kTs + "    - name: nvidia.com/gpu\n      replicas: 2\n"
                          "    - name: nvidia.com/gpu\n      devices: [1]\n      rename: x\n      replicas: 4\n",
                    "sharing.timeSlicing.resources[1].devices: overlaps "
                    "sharing.timeSlicing.resources[0], which shares the same resource "
                    "nvidia.com/gpu (one of them selects all devices); give both explicit devices "
                    "lists"},
        InvalidCase{"TimeSlicingStrategy",
                    "sharing:\n  timeSlicing:\n    strategy: round-robin\n    resources:\n"
                    "    - name: nvidia.com/gpu\n      replicas: 2\n",
                    "sharing.timeSlicing.strategy: must be empty (the only strategy), got "
                    "\"round-robin\" (node.yaml:3:15)"},
        InvalidCase{"Mps", "sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n",
                    "sharing.mps: MPS sharing is not supported by gpushare yet; use "
                    "sharing.timeSlicing (with gpushare.timeSlicing.memoryLimit: evenSplit for "
                    "per-replica memory limits enforced by gpushare's in-container library) "
                    "(node.yaml:3:5)"},
        InvalidCase{"ImexChannels", "imex:\n  channelIDs: [1]\n",
                    "imex.channelIDs: must be [] or [0], got a list (node.yaml:2:15)"},
        InvalidCase{"MaxClientsRange", "gpushare:\n  maxClientsPerGpu: 0\n",
                    "gpushare.maxClientsPerGpu: must be 1..1024, got 0 (node.yaml:2:21)"},
        InvalidCase{"MaxClientsType", "gpushare:\n  maxClientsPerGpu: lots\n",
                    "gpushare.maxClientsPerGpu: must be an integer 1..1024, got \"lots\" "
                    "(node.yaml:2:21)"},
        InvalidCase{"MemoryLimit", "gpushare:\n  timeSlicing:\n    memoryLimit: even\n",
                    "gpushare.timeSlicing.memoryLimit: must be none or evenSplit, got \"even\" "
                    "(node.yaml:3:18)"},
        InvalidCase{"ComputeLimit", "gpushare:\n  timeSlicing:\n    computeLimit: half\n",
                    "gpushare.timeSlicing.computeLimit: must be none or evenSplit, got \"half\" "
                    "(node.yaml:3:19)"},
        InvalidCase{"MemoryComputeLimit", "gpushare:\n  memoryShares:\n    computeLimit: evenSplit\n",
                    "gpushare.memoryShares.computeLimit: must be none or proportional, got \"evenSplit\" "
                    "(node.yaml:3:19)"},
        InvalidCase{"BadDuration", "gpushare:\n  health:\n    recoverAfter: 5 min\n",
                    "gpushare.health.recoverAfter: must be a duration like 30s, 5m or 1h (0 = "
                    "never), got \"5 min\" (node.yaml:3:19)"},
        InvalidCase{"BadXid", "gpushare:\n  health:\n    ignoredXids: [13, x]\n",
                    "gpushare.health.ignoredXids[1]: must be an integer, got \"x\" (node.yaml:3:23)"},
        InvalidCase{"XidRange", "gpushare:\n  health:\n    ignoredXids: [0]\n",
                    "gpushare.health.ignoredXids: must be a list of XIDs 1..65535, got \"0\" "
                    "(node.yaml:3:18)"},
        InvalidCase{"UnknownGpushareKey", "gpushare:\n  maxClients: 4\n",
                    "gpushare.maxClients: unknown key (allowed here: maxClientsPerGpu, "
                    "allocationPolicy, timeSlicing, health, interposer, memoryShares) "
                    "(node.yaml:2:3)"},
        InvalidCase{"MemorySharesUnknownKey", "gpushare:\n  memoryShares:\n    enabled: true\n",
                    "gpushare.memoryShares.enabled: unknown key (allowed here: resourceName, unit, "
                    "publishGpuCount, computeLimit, devices) (node.yaml:3:5)"},
        InvalidCase{"PolicyConflict",
                    "flags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n"
                    "gpushare:\n  allocationPolicy: distributed\n",
                    "gpushare.allocationPolicy: \"distributed\" conflicts with "
                    "flags.plugin.sharedDevicesAllocationPolicy \"packed\"; set only one of them "
                    "(node.yaml:5:21)"},
        InvalidCase{"RelativeStateDir", "gpushare:\n  interposer:\n    stateDir: var/lib\n",
                    "gpushare.interposer.stateDir: must be an absolute path, got \"var/lib\" "
                    "(node.yaml:3:15)"},
        InvalidCase{"DuplicateKey", "flags:\n  migStrategy: none\n  migStrategy: mixed\n",
                    "flags.migStrategy: duplicate key (node.yaml:3:3)"},
        InvalidCase{"ResourcesShape", "resources:\n  gpus: {pattern: x}\n",
                    "resources.gpus: must be a list of {pattern, name}, got a mapping "
                    "(node.yaml:2:9)"},
        InvalidCase{"GfdDuration", "flags:\n  gfd:\n    sleepInterval: often\n",
                    "flags.gfd.sleepInterval: must be a duration like 60s or 5m, got \"often\" "
                    "(node.yaml:3:20)"},
        InvalidCase{"YamlSyntax", "flags:\n  migStrategy: [mixed\n",
                    "node.yaml:3:1: not valid YAML or JSON: end of sequence flow not found"},
        InvalidCase{"DocumentNotAMap", "- a\n- b\n",
                    "document: must be a mapping (key: value), got a list (node.yaml:1:1)"}),
    [](const ::testing::TestParamInfo<InvalidCase>& info) { return std::string(info.param.name); });

TEST(ConfigLoader, ReportsEveryProblemNotJustTheFirst) {
  auto lines = Problems(R"(version: v9
flags:
  migStrategy: both
  plugin:
    deviceIDStrategy: serial
    extra: 1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 60
    - name: nvidia.com/gpu
      devices: [x]
      replicas: 0
gpushare:
  health:
    recoverAfter: soon
)");
  EXPECT_EQ(lines.size(), 9u) << ::testing::PrintToString(lines);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  for (const char* path :
       {"version:", "flags.migStrategy:", "flags.plugin.deviceIDStrategy:", "flags.plugin.extra:",
        "sharing.timeSlicing.resources[0].replicas: must be 2..48, got 60",
        "sharing.timeSlicing.resources[1].devices[0]:",
        "sharing.timeSlicing.resources[1].replicas: must be 2..48, got 0",
        "sharing.timeSlicing.resources[1].devices: overlaps", "gpushare.health.recoverAfter:"}) {
    EXPECT_THAT(all, HasSubstr(path));
  }
}

TEST(ConfigLoader, NamesWithoutDomainGetNvidiaPrefix) {
  auto r = Parse(kTs + "    - name: gpu\n      rename: gpu.small\n      replicas: 2\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.time_slicing.resources[0].name, "nvidia.com/gpu");
  EXPECT_EQ(r->config.time_slicing.resources[0].rename, "nvidia.com/gpu.small");
}

TEST(Precedence, FlagOverEnvironmentOverFile) {
  const std::string file = "flags:\n  migStrategy: none\n  failOnInitError: true\n"
                           "gpushare:\n  maxClientsPerGpu: 10\n";
  NodeConfigFlags flags;
  Environment env;
  EXPECT_EQ(Parse(file, env, flags)->config.mig_strategy, MigStrategy::kNone);
  env["MIG_STRATEGY"] = "single";
  env["FAIL_ON_INIT_ERROR"] = "false";
  env["GPUSHARE_MAX_CLIENTS_PER_GPU"] = "20";
  auto r = Parse(file, env, flags);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.mig_strategy, MigStrategy::kSingle);
  EXPECT_FALSE(r->config.fail_on_init_error);
  EXPECT_EQ(r->config.gpushare.max_clients_per_gpu, 20);
  flags.values["migStrategy"] = "mixed";
  flags.values["failOnInitError"] = "true";
  flags.values["maxClientsPerGpu"] = "30";
  r = Parse(file, env, flags);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.mig_strategy, MigStrategy::kMixed);
  EXPECT_TRUE(r->config.fail_on_init_error);
  EXPECT_EQ(r->config.gpushare.max_clients_per_gpu, 30);
}

TEST(Precedence, CeilingFromTheEnvironmentAppliesToFileReplicas) {
  const std::string file = kTs + "    - name: nvidia.com/gpu\n      replicas: 60\n";
  EXPECT_FALSE(Parse(file).ok());
  auto r = Parse(file, {{"GPUSHARE_MAX_CLIENTS_PER_GPU", "64"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.time_slicing.resources[0].replicas, 60);
}

TEST(Precedence, BadEnvironmentAndFlagValuesNameTheirSource) {
  Environment env = {{"MIG_STRATEGY", "auto"}, {"PASS_DEVICE_SPECS", "yes please"},
                     {"DEVICE_LIST_STRATEGY", "envvar,cdi"}, {"GPUSHARE_RECOVER_AFTER", "-1s"}};
  NodeConfigFlags flags;
  flags.values["deviceIDStrategy"] = "gpu";
  auto lines = Problems("", env, flags);
  EXPECT_THAT(lines, ::testing::UnorderedElementsAre(
                         "MIG_STRATEGY: must be none, single or mixed, got \"auto\"",
                         "PASS_DEVICE_SPECS: must be true or false, got \"yes please\"",
                         "DEVICE_LIST_STRATEGY: must be one or more of envvar, volume-mounts, "
                         "cdi-annotations, cdi-cri, got \"cdi\"",
                         "--device-id-strategy: must be uuid or index, got \"gpu\"",
                         "GPUSHARE_RECOVER_AFTER: must be a duration like 30s, 5m or 1h (0 = "
                         "never), got \"-1s\""));
}

TEST(Precedence, EnvironmentListsAndBooleansUseGoSyntax) {
  auto r = Parse("", {{"DEVICE_LIST_STRATEGY", "envvar,volume-mounts"},
                      {"PASS_DEVICE_SPECS", "1"},
                      {"GPUSHARE_IGNORED_XIDS", "13, 79"},
                      {"NVIDIA_CDI_HOOK_PATH", "/opt/bin/nvidia-cdi-hook"},
                      {"NVIDIA_DRIVER_ROOT", "/run/nvidia/driver"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->config.plugin.device_list_strategy.envvar);
  EXPECT_TRUE(r->config.plugin.device_list_strategy.volume_mounts);
  EXPECT_TRUE(r->config.plugin.pass_device_specs);
  EXPECT_EQ(r->config.gpushare.ignored_xids, (std::vector<uint32_t>{13, 79}));
  EXPECT_EQ(r->config.plugin.nvidia_ctk_path, "/opt/bin/nvidia-cdi-hook");
  EXPECT_EQ(r->config.plugin.nvidia_dev_root, "/run/nvidia/driver") << "dev root follows driver root";
}

TEST(Precedence, NvidiaHealthEnvironment) {
  auto r = Parse("", {{"DP_DISABLE_HEALTHCHECKS", "94,95"}, {"DP_ENABLE_HEALTHCHECKS", "13"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.gpushare.ignored_xids, (std::vector<uint32_t>{31, 43, 45, 68, 109, 94, 95}));
  EXPECT_TRUE(r->config.gpushare.health_checks_enabled);
  r = Parse("", {{"DP_DISABLE_HEALTHCHECKS", "all"}});
  EXPECT_FALSE(r->config.gpushare.health_checks_enabled);
  auto lines = Problems("", {{"DP_DISABLE_HEALTHCHECKS", "some"}});
  EXPECT_THAT(lines, ElementsAre("DP_DISABLE_HEALTHCHECKS: must be all, xids or a comma list of "
                                 "XIDs, got \"some\""));
}

TEST(Flags, RegisteredWithCli11) {
  CLI::App app;
  NodeConfigFlags flags;
  AddNodeConfigFlags(app, flags);
  const char* argv[] = {"x", "--mig-strategy", "mixed", "--fail-on-init-error=false",
                        "--pass-device-specs", "--config-file", "/tmp/c.yaml",
                        "--max-clients-per-gpu=12", "--driver-root", "/host"};
  app.parse(static_cast<int>(std::size(argv)), const_cast<char**>(argv));
  EXPECT_EQ(flags.config_file, "/tmp/c.yaml");
  EXPECT_EQ(flags.values["migStrategy"], "mixed");
  EXPECT_EQ(flags.values["failOnInitError"], "false");
  EXPECT_EQ(flags.values["passDeviceSpecs"], "true");
  EXPECT_EQ(flags.values["maxClientsPerGpu"], "12");
  EXPECT_EQ(flags.values["nvidiaDriverRoot"], "/host");
  EXPECT_EQ(flags.values.count("deviceIDStrategy"), 0u) << "only flags given are recorded";
  auto r = LoadNodeConfigFromText(flags, {}, "", "x");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.mig_strategy, MigStrategy::kMixed);
  EXPECT_FALSE(r->config.fail_on_init_error);
  EXPECT_TRUE(r->config.plugin.pass_device_specs);
}

TEST(ConfigFile, ReadFromFlagOrConfigFileEnvironment) {
  const std::string a = ::testing::TempDir() + "/gpushare_cfg_a.yaml";
  const std::string b = ::testing::TempDir() + "/gpushare_cfg_b.yaml";
  std::ofstream(a) << "flags:\n  migStrategy: mixed\n";
  std::ofstream(b) << "flags:\n  migStrategy: single\n";
  NodeConfigFlags flags;
  auto r = LoadNodeConfigWithNotes(flags, {{"CONFIG_FILE", b}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->config.mig_strategy, MigStrategy::kSingle);
  EXPECT_EQ(r->config_path, b);
  flags.config_file = a;
  r = LoadNodeConfigWithNotes(flags, {{"CONFIG_FILE", b}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.mig_strategy, MigStrategy::kMixed);
  EXPECT_TRUE(LoadNodeConfigWithNotes(NodeConfigFlags{}, {})->config_path.empty());

  flags.config_file = ::testing::TempDir() + "/does-not-exist.yaml";
  auto missing = LoadNodeConfig(flags, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--config: cannot read"));
  EXPECT_THAT(missing.status().message(), HasSubstr("does-not-exist.yaml"));

  auto v = ValidateConfigFile(a);
  EXPECT_TRUE(v.ok());
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(ConfigLoader, SettingsTableHasNvidiaNames) {
  std::map<std::string, std::string> env_of;
  for (const auto& s : NodeConfigSettings()) env_of[s.file_path] = s.env;
  EXPECT_EQ(env_of["flags.migStrategy"], "MIG_STRATEGY");
  EXPECT_EQ(env_of["flags.failOnInitError"], "FAIL_ON_INIT_ERROR");
  EXPECT_EQ(env_of["flags.plugin.passDeviceSpecs"], "PASS_DEVICE_SPECS");
  EXPECT_EQ(env_of["flags.plugin.deviceListStrategy"], "DEVICE_LIST_STRATEGY");
  EXPECT_EQ(env_of["flags.plugin.deviceIDStrategy"], "DEVICE_ID_STRATEGY");
  EXPECT_EQ(env_of["gpushare.maxClientsPerGpu"], "GPUSHARE_MAX_CLIENTS_PER_GPU");
}

TEST(Duration, GoSyntax) {
  EXPECT_EQ(ParseDurationMs("0"), 0);
  EXPECT_EQ(ParseDurationMs("300ms"), 300);
  EXPECT_EQ(ParseDurationMs("5m"), 300'000);
  EXPECT_EQ(ParseDurationMs("1h30m"), 5'400'000);
  EXPECT_EQ(ParseDurationMs("1.5h"), 5'400'000);
  EXPECT_EQ(ParseDurationMs("1.1s"), 1'100);
  EXPECT_EQ(ParseDurationMs("2m3s4ms"), 123'004);
  EXPECT_EQ(ParseDurationMs("1500us"), 2);  // rounded up
  EXPECT_EQ(ParseDurationMs("10ns"), 1);
  for (const char* bad : {"", "5", "m", "-1s", "5 m", "1.2.3s", "1d", "s5", "5mm",
                          "99999999999999999999h"}) {
    EXPECT_FALSE(ParseDurationMs(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace gpushare
