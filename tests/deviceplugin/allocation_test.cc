// Allocate answers per strategy, and the checks on the requested IDs.
#include "deviceplugin/allocation.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "tests/deviceplugin/fixtures.h"

namespace gpushare::deviceplugin {
namespace {

using gpushare::testing::GpuUuid;
using gpushare::testing::MakeGpuResource;
using gpushare::testing::MakeMigResource;
using gpushare::testing::MigUuid;

ResolvedRequest MustResolve(const DeviceIndex& idx, const std::vector<std::string>& ids) {
  Result<ResolvedRequest> r = ResolveDevices(idx, ids);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ResolvedRequest{};
}

TEST(ResolveDevicesTest, AcceptsKnownHealthyIds) {
  PlannedResource res = MakeGpuResource(2, 10);
  DeviceIndex idx(res);
  Result<ResolvedRequest> r = ResolveDevices(idx, {GpuUuid(0) + "::3", GpuUuid(1) + "::0"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->devices.size(), 2u);
  EXPECT_EQ(r->devices[0]->id, GpuUuid(0) + "::3");
  EXPECT_EQ(r->devices[1]->gpu_index, 1);
}

TEST(ResolveDevicesTest, UnknownIdsAreNamed) {
  PlannedResource res = MakeGpuResource(1, 2);
  DeviceIndex idx(res);
  Result<ResolvedRequest> r = ResolveDevices(idx, {GpuUuid(0) + "::0", "GPU-bogus::7", "other"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("GPU-bogus::7"), std::string::npos);
  EXPECT_NE(r.status().message().find("other"), std::string::npos);
  EXPECT_EQ(r.status().message().find(GpuUuid(0) + "::0"), std::string::npos);
}

TEST(ResolveDevicesTest, UnhealthyIdsAreRefusedAndNamed) {
  PlannedResource res = MakeGpuResource(2, 2);
  res.devices[2].healthy = false;  // GPU 1 replica 0
  DeviceIndex idx(res);
  Result<ResolvedRequest> r = ResolveDevices(idx, {res.devices[0].id, res.devices[2].id});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find(res.devices[2].id), std::string::npos);
  EXPECT_NE(r.status().message().find("Unhealthy"), std::string::npos);
}

TEST(ResolveDevicesTest, EmptyAndDuplicateRequestsAreInvalid) {
  PlannedResource res = MakeGpuResource(1, 2);
  DeviceIndex idx(res);
  Result<ResolvedRequest> empty = ResolveDevices(idx, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  Result<ResolvedRequest> dup = ResolveDevices(idx, {res.devices[0].id, res.devices[0].id});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.status().message().find("more than once"), std::string::npos);
}

TEST(ResolveDevicesTest, FailRequestsGreaterThanOne) {
  PlannedResource res = MakeGpuResource(2, 4);
  res.fail_requests_greater_than_one = true;
  DeviceIndex idx(res);
  EXPECT_TRUE(ResolveDevices(idx, {res.devices[0].id}).ok());
  Result<ResolvedRequest> two = ResolveDevices(idx, {res.devices[0].id, res.devices[5].id});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("failRequestsGreaterThanOne"), std::string::npos);
  EXPECT_NE(two.status().message().find("got 2"), std::string::npos);
  // Not shared: the flag does not apply to whole GPUs.
  PlannedResource whole = MakeGpuResource(2, 1);
  whole.fail_requests_greater_than_one = true;
  DeviceIndex widx(whole);
  EXPECT_TRUE(ResolveDevices(widx, {whole.devices[0].id, whole.devices[1].id}).ok());
}

TEST(BuildContainerAllocationTest, EnvvarCollapsesReplicasOfOneGpu) {
  PlannedResource res = MakeGpuResource(2, 10);
  DeviceIndex idx(res);
  PluginFlags flags;  // envvar, uuid
  ContainerAllocation a = BuildContainerAllocation(
      MustResolve(idx, {GpuUuid(1) + "::2", GpuUuid(0) + "::5", GpuUuid(1) + "::7"}), flags, {});
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), GpuUuid(1) + "," + GpuUuid(0));
  EXPECT_TRUE(a.mounts.empty());
  EXPECT_TRUE(a.device_nodes.empty());
  EXPECT_TRUE(a.annotations.empty());
  EXPECT_TRUE(a.cdi_devices.empty());
}

TEST(BuildContainerAllocationTest, IndexStrategyForGpusAndMig) {
  PluginFlags flags;
  flags.device_id_strategy = DeviceIdStrategy::kIndex;
  PlannedResource gpus = MakeGpuResource(4, 2);
  DeviceIndex gidx(gpus);
  EXPECT_EQ(BuildContainerAllocation(MustResolve(gidx, {GpuUuid(3) + "::1", GpuUuid(2) + "::0"}),
                                     flags, {})
                .envs.at("NVIDIA_VISIBLE_DEVICES"),
            "3,2");
  PlannedResource mig = MakeMigResource(1, 7, 3);
  DeviceIndex midx(mig);
  EXPECT_EQ(BuildContainerAllocation(MustResolve(midx, {MigUuid(0, 4) + "::2"}), flags, {})
                .envs.at("NVIDIA_VISIBLE_DEVICES"),
            "0:4");
}

TEST(BuildContainerAllocationTest, MigDeviceSpecsCarryTheCapabilityNodes) {
  PluginFlags flags;
  flags.pass_device_specs = true;
  flags.nvidia_dev_root = "/host";
  PlannedResource mig = MakeMigResource(1, 7, 3);
  DeviceIndex midx(mig);
  HostDeviceNodes nodes;
  nodes.nvidiactl = true;
  nodes.mig_minors = ParseMigMinors(
      "config 1\nmonitor 2\ngpu0/gi8/access 111\ngpu0/gi8/ci0/access 112\n"
      "gpu0/gi9/access 120\ngpu0/gi9/ci0/access 121\nbroken line here\ngpu0/gi10/access x\n");
  EXPECT_EQ(nodes.mig_minors.size(), 6u);  // the two malformed lines are skipped
  nodes.mig_minors_source = "/proc/driver/nvidia-caps/mig-minors";
  // Two replicas of MIG device 1 (GI 8) and one of MIG device 2 (GI 9).
  ContainerAllocation a = BuildContainerAllocation(
      MustResolve(midx, {MigUuid(0, 1) + "::0", MigUuid(0, 1) + "::2", MigUuid(0, 2) + "::1"}),
      flags, nodes);
  EXPECT_TRUE(a.problem.empty()) << a.problem;
  std::map<std::string, std::string> specs;
  for (const DeviceNodeSpec& d : a.device_nodes) specs[d.container_path] = d.host_path;
  EXPECT_EQ(specs.size(), 6u);  // nvidia0, nvidiactl, 4 caps (each once)
  EXPECT_EQ(specs.at("/dev/nvidia-caps/nvidia-cap111"), "/host/dev/nvidia-caps/nvidia-cap111");
  EXPECT_EQ(specs.count("/dev/nvidia-caps/nvidia-cap112"), 1u);
  EXPECT_EQ(specs.count("/dev/nvidia-caps/nvidia-cap120"), 1u);
  EXPECT_EQ(specs.count("/dev/nvidia-caps/nvidia-cap121"), 1u);
  // A MIG device the driver lists no minors for: refused with the key and the file.
  ContainerAllocation missing =
      BuildContainerAllocation(MustResolve(midx, {MigUuid(0, 5) + "::0"}), flags, nodes);
  EXPECT_NE(missing.problem.find("gpu0/gi12/access"), std::string::npos) << missing.problem;
  EXPECT_NE(missing.problem.find("/proc/driver/nvidia-caps/mig-minors"), std::string::npos);
  // Without passDeviceSpecs nothing is needed.
  flags.pass_device_specs = false;
  EXPECT_TRUE(BuildContainerAllocation(MustResolve(midx, {MigUuid(0, 5) + "::0"}), flags, {})
                  .problem.empty());
}

TEST(BuildContainerAllocationTest, VolumeMounts) {
  PlannedResource res = MakeGpuResource(2, 1);
  DeviceIndex idx(res);
  PluginFlags flags;
  flags.device_list_strategy = {false, true, false, false};
  ContainerAllocation a =
      BuildContainerAllocation(MustResolve(idx, {GpuUuid(0), GpuUuid(1)}), flags, {});
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  ASSERT_EQ(a.mounts.size(), 2u);
  EXPECT_EQ(a.mounts[0].container_path, "/var/run/nvidia-container-devices/" + GpuUuid(0));
  EXPECT_EQ(a.mounts[0].host_path, "/dev/null");
  EXPECT_EQ(a.mounts[1].container_path, "/var/run/nvidia-container-devices/" + GpuUuid(1));
}

TEST(BuildContainerAllocationTest, CdiOnlySetsNoEnv) {
  PlannedResource res = MakeGpuResource(2, 3);
  DeviceIndex idx(res);
  PluginFlags flags;
  flags.device_list_strategy = {false, false, true, true};
  ContainerAllocation a = BuildContainerAllocation(
      MustResolve(idx, {GpuUuid(0) + "::0", GpuUuid(0) + "::1"}), flags, {});
  EXPECT_TRUE(a.envs.empty());
  ASSERT_EQ(a.cdi_devices.size(), 1u);
  EXPECT_EQ(a.cdi_devices[0], "k8s.device-plugin.nvidia.com/gpu=" + GpuUuid(0));
  ASSERT_EQ(a.annotations.size(), 1u);
  const auto& [key, value] = *a.annotations.begin();
  EXPECT_EQ(key.rfind("cdi.k8s.io/", 0), 0u) << key;
  std::string name = key.substr(strlen("cdi.k8s.io/"));
  EXPECT_LE(name.size(), 63u);
  EXPECT_TRUE(isalnum(static_cast<unsigned char>(name.front())) &&
              isalnum(static_cast<unsigned char>(name.back())));
  EXPECT_EQ(value, "k8s.device-plugin.nvidia.com/gpu=" + GpuUuid(0));
}

TEST(BuildContainerAllocationTest, CdiAnnotationPrefixAndIndexNames) {
  PlannedResource res = MakeMigResource(1, 2, 1);
  DeviceIndex idx(res);
  PluginFlags flags;
  flags.device_list_strategy = {true, false, true, false};
  flags.device_id_strategy = DeviceIdStrategy::kIndex;
  flags.cdi_annotation_prefix = "cdi.example.org/";
  ContainerAllocation a =
      BuildContainerAllocation(MustResolve(idx, {MigUuid(0, 0), MigUuid(0, 1)}), flags, {});
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), "0:0,0:1");
  ASSERT_EQ(a.annotations.size(), 1u);
  EXPECT_EQ(a.annotations.begin()->first.rfind("cdi.example.org/", 0), 0u);
  EXPECT_EQ(a.annotations.begin()->second,
            "k8s.device-plugin.nvidia.com/gpu=0:0,k8s.device-plugin.nvidia.com/gpu=0:1");
  EXPECT_TRUE(a.cdi_devices.empty());
}

TEST(BuildContainerAllocationTest, SeveralStrategiesAtOnce) {
  PlannedResource res = MakeGpuResource(1, 1);
  DeviceIndex idx(res);
  PluginFlags flags;
  flags.device_list_strategy = {true, false, false, true};
  ContainerAllocation a = BuildContainerAllocation(MustResolve(idx, {GpuUuid(0)}), flags, {});
  EXPECT_EQ(a.envs.at("NVIDIA_VISIBLE_DEVICES"), GpuUuid(0));
  ASSERT_EQ(a.cdi_devices.size(), 1u);
}

TEST(BuildContainerAllocationTest, DeviceSpecsUnderDevRoot) {
  gpushare::testing::TempDir dir;
  std::filesystem::create_directories(dir.Sub("dev"));
  for (const char* n : {"nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"}) {
    std::ofstream(dir.Sub(std::string("dev/") + n)) << "";
  }
  HostDeviceNodes nodes = ProbeHostDeviceNodes(dir.path());
  EXPECT_TRUE(nodes.nvidiactl);
  EXPECT_TRUE(nodes.nvidia_uvm);
  EXPECT_FALSE(nodes.nvidia_uvm_tools);
  EXPECT_FALSE(nodes.nvidia_modeset);

  PlannedResource res = MakeGpuResource(2, 4);
  DeviceIndex idx(res);
  PluginFlags flags;
  flags.pass_device_specs = true;
  flags.nvidia_dev_root = dir.path();
  ContainerAllocation a = BuildContainerAllocation(
      MustResolve(idx, {GpuUuid(1) + "::0", GpuUuid(1) + "::3"}), flags, nodes);
  std::vector<DeviceNodeSpec> want = {
      {"/dev/nvidia1", dir.Sub("dev/nvidia1"), "rw"},
      {"/dev/nvidiactl", dir.Sub("dev/nvidiactl"), "rw"},
      {"/dev/nvidia-uvm", dir.Sub("dev/nvidia-uvm"), "rw"},
  };
  EXPECT_EQ(a.device_nodes, want);
  // Without passDeviceSpecs no device nodes at all.
  flags.pass_device_specs = false;
  EXPECT_TRUE(BuildContainerAllocation(MustResolve(idx, {GpuUuid(0) + "::0"}), flags, nodes)
                  .device_nodes.empty());
}

TEST(BuildContainerAllocationTest, ExtraEnvironment) {
  PlannedResource res = MakeGpuResource(1, 1);
  DeviceIndex idx(res);
  PluginFlags flags;
  ExtraEnv extra;
  extra.gds = true;
  extra.mofed = true;
  extra.imex_channels = {0};
  ContainerAllocation a =
      BuildContainerAllocation(MustResolve(idx, {GpuUuid(0)}), flags, {}, extra);
  EXPECT_EQ(a.envs.at("NVIDIA_GDS"), "enabled");
  EXPECT_EQ(a.envs.at("NVIDIA_MOFED"), "enabled");
  EXPECT_EQ(a.envs.count("NVIDIA_GDRCOPY"), 0u);
  EXPECT_EQ(a.envs.at("NVIDIA_IMEX_CHANNELS"), "0");
}

}  // namespace
}  // namespace gpushare::deviceplugin
