#include "core/resource_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <set>

#include "base/strings.h"
#include "tests/core/test_inventories.h"

namespace gpushare {
namespace {

using ::testing::HasSubstr;
using testing::GpuUuid;
using testing::MigUuid;

ReplicatedResource Entry(const std::string& name, int replicas, size_t i,
                         DeviceSelector devices = {}, const std::string& rename = "") {
  ReplicatedResource r;
  r.name = name;
  r.replicas = replicas;
  r.devices = devices;
  r.rename = rename;
  r.field_path = "sharing.timeSlicing.resources[" + std::to_string(i) + "]";
  return r;
}

DeviceSelector List(std::vector<std::string> items) {
  DeviceSelector s;
  s.kind = DeviceSelector::Kind::kList;
  s.items = std::move(items);
  return s;
}

DeviceSelector Count(int n) {
  DeviceSelector s;
  s.kind = DeviceSelector::Kind::kCount;
  s.count = n;
  return s;
}

std::vector<std::string> Lines(const Status& s) { return SplitLines(s.message()); }

TEST(ResourcePlan, WholeGpusWithoutSharing) {
  auto plan = BuildResourcePlan(testing::EightA10(), NodeConfig{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 1u);
  const auto& r = plan->resources[0];
  EXPECT_EQ(r.name, "nvidia.com/gpu");
  EXPECT_EQ(r.socket_name, "gpushare-gpu.sock");
  EXPECT_EQ(r.replicas, 1);
  EXPECT_FALSE(r.fail_requests_greater_than_one);
  ASSERT_EQ(r.devices.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    const auto& d = r.devices[i];
    EXPECT_EQ(d.id, GpuUuid(i));
    EXPECT_EQ(d.device_uuid, GpuUuid(i));
    EXPECT_EQ(d.device_index, std::to_string(i));
    EXPECT_EQ(d.replica, -1);
    EXPECT_FALSE(d.is_mig);
    EXPECT_TRUE(d.healthy);
    EXPECT_EQ(d.numa_nodes, (std::vector<int64_t>{i < 4 ? 0 : 1}));
    EXPECT_EQ(d.memory_mib, 23028u);
    EXPECT_EQ(d.memory_limit_mib, 0u);
  }
  EXPECT_EQ(plan->Find("nvidia.com/gpu"), &plan->resources[0]);
  EXPECT_EQ(plan->Find("nvidia.com/gpu.shared"), nullptr);
}

TEST(ResourcePlan, EightGpusTimesTenReplicasIsEighty) {
  NodeConfig c;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 10, 0));
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 1u);
  const auto& r = plan->resources[0];
  EXPECT_EQ(r.name, "nvidia.com/gpu");
  EXPECT_EQ(r.replicas, 10);
  EXPECT_EQ(r.source_field, "sharing.timeSlicing.resources[0]");
  ASSERT_EQ(r.devices.size(), 80u);
  std::set<std::string> ids;
  for (const auto& d : r.devices) ids.insert(d.id);
  EXPECT_EQ(ids.size(), 80u);
  EXPECT_EQ(r.devices[0].id, GpuUuid(0) + "::0");
  EXPECT_EQ(r.devices[9].id, GpuUuid(0) + "::9");
  EXPECT_EQ(r.devices[10].id, GpuUuid(1) + "::0");
  EXPECT_EQ(r.devices[79].id, GpuUuid(7) + "::9");
  EXPECT_EQ(r.devices[79].replica, 9);
  EXPECT_EQ(r.devices[79].device_uuid, GpuUuid(7));
  EXPECT_EQ(r.devices[79].numa_nodes, (std::vector<int64_t>{1}));
}

TEST(ResourcePlan, RenameByDefault) {
  NodeConfig c;
  c.time_slicing.rename_by_default = true;
  c.time_slicing.fail_requests_greater_than_one = true;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 10, 0));
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 1u);
  EXPECT_EQ(plan->resources[0].name, "nvidia.com/gpu.shared");
  EXPECT_EQ(plan->resources[0].base_name, "nvidia.com/gpu");
  EXPECT_EQ(plan->resources[0].socket_name, "gpushare-gpu.shared.sock");
  EXPECT_EQ(plan->resources[0].devices.size(), 80u);
  EXPECT_TRUE(plan->resources[0].fail_requests_greater_than_one);
}

TEST(ResourcePlan, MixedMigWithThreeReplicasIsTwentyOne) {
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  c.time_slicing.resources.push_back(Entry("nvidia.com/mig-1g.10gb", 3, 0));
  auto plan = BuildResourcePlan(testing::OneH100Mig(), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 1u) << "a MIG GPU is not also nvidia.com/gpu under mixed";
  const auto& r = plan->resources[0];
  EXPECT_EQ(r.name, "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(r.socket_name, "gpushare-mig-1g.10gb.sock");
  ASSERT_EQ(r.devices.size(), 21u);
  EXPECT_EQ(r.devices[0].id, MigUuid(0, 0) + "::0");
  EXPECT_EQ(r.devices[2].id, MigUuid(0, 0) + "::2");
  EXPECT_EQ(r.devices[20].id, MigUuid(0, 6) + "::2");
  EXPECT_TRUE(r.devices[20].is_mig);
  EXPECT_EQ(r.devices[20].mig_index, 6);
  EXPECT_EQ(r.devices[20].device_index, "0:6");
  EXPECT_EQ(r.devices[20].device_uuid, MigUuid(0, 6));
  EXPECT_EQ(r.devices[20].gpu_uuid, GpuUuid(0));
  EXPECT_EQ(r.devices[20].memory_mib, 9856u);
}

TEST(ResourcePlan, MixedAdvertisesEachFullProfileAndSkipsSubProfiles) {
  Inventory inv;
  inv.gpus.push_back(testing::WholeGpu(0));
  Gpu g = testing::MigGpu(1, "3g.40gb", 1, 40192, 2);
  MigInstance sub = g.mig[0];
  sub.index = 1;
  sub.profile = "1c.3g.40gb";
  sub.compute_instance_id = 1;
  sub.uuid = MigUuid(1, 1);
  g.mig.push_back(sub);
  MigInstance me = g.mig[0];
  me.index = 2;
  me.profile = "1g.10gb+me";
  me.gpu_instance_id = 9;
  me.uuid = MigUuid(1, 2);
  g.mig.push_back(me);
  inv.gpus.push_back(g);
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 3u);
  EXPECT_EQ(plan->resources[0].name, "nvidia.com/gpu");
  EXPECT_EQ(plan->resources[0].devices.size(), 1u);
  EXPECT_EQ(plan->resources[1].name, "nvidia.com/mig-1g.10gb.me");
  EXPECT_EQ(plan->resources[2].name, "nvidia.com/mig-3g.40gb");
  EXPECT_EQ(plan->resources[2].devices.size(), 1u);
  EXPECT_EQ(plan->resources[2].devices[0].id, MigUuid(1, 0));
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_THAT(plan->notes[0], HasSubstr("1c.3g.40gb"));
}

TEST(ResourcePlan, NoneAdvertisesMigGpusWhole) {
  auto plan = BuildResourcePlan(testing::OneH100Mig(), NodeConfig{});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->resources.size(), 1u);
  EXPECT_EQ(plan->resources[0].name, "nvidia.com/gpu");
  ASSERT_EQ(plan->resources[0].devices.size(), 1u);
  EXPECT_EQ(plan->resources[0].devices[0].id, GpuUuid(0));
  EXPECT_FALSE(plan->resources[0].devices[0].is_mig);
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_THAT(plan->notes[0], HasSubstr("whole GPU"));
}

TEST(ResourcePlan, SingleAdvertisesIdenticalMigDevicesAsGpu) {
  Inventory inv = testing::OneH100Mig();
  inv.gpus.push_back(testing::MigGpu(1, "1g.10gb", 7, 9856));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kSingle;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 0));
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 1u);
  EXPECT_EQ(plan->resources[0].name, "nvidia.com/gpu");
  ASSERT_EQ(plan->resources[0].devices.size(), 28u);
  EXPECT_EQ(plan->resources[0].devices[0].id, MigUuid(0, 0) + "::0");
  EXPECT_TRUE(plan->resources[0].devices[0].is_mig);
}

TEST(ResourcePlan, SingleWithoutMigBehavesLikeNone) {
  NodeConfig c;
  c.mig_strategy = MigStrategy::kSingle;
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->resources[0].devices.size(), 8u);
}

TEST(ResourcePlan, SingleRefusesMixingMigAndWholeGpus) {
  Inventory inv = testing::OneH100Mig();
  inv.gpus.push_back(testing::WholeGpu(1));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kSingle;
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("flags.migStrategy: single requires MIG to be enabled on every GPU or on "
                        "none; MIG is enabled on GPU 0 and disabled on GPU 1"));
}

TEST(ResourcePlan, SingleRefusesDifferentMigDevices) {
  Inventory inv = testing::OneH100Mig();
  inv.gpus.push_back(testing::MigGpu(1, "2g.20gb", 3, 19968));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kSingle;
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("single requires all MIG devices to be identical; found 1g.10gb"));
  EXPECT_THAT(plan.status().message(), HasSubstr("2g.20gb"));
}

TEST(ResourcePlan, SingleRefusesMigGpuWithoutDevices) {
  Inventory inv;
  inv.gpus.push_back(testing::MigGpu(0, "1g.10gb", 0, 9856));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kSingle;
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("has MIG enabled but no MIG devices"));
}

// The mixed example: GPU 0 whole, GPUs 1-2 replicated and renamed, the MIG GPU with 3.
TEST(ResourcePlan, PerGpuSharingOnOneNode) {
  Inventory inv;
  inv.gpus.push_back(testing::WholeGpu(0, 81920, 0, "NVIDIA A100 80GB PCIe"));
  inv.gpus.push_back(testing::WholeGpu(1, 23028, 0));
  inv.gpus.push_back(testing::WholeGpu(2, 23028, 1));
  inv.gpus.push_back(testing::MigGpu(3, "1g.10gb", 7, 9856, 7, 1));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  c.gpushare.replica_memory_limit = ReplicaMemoryLimit::kEvenSplit;
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 10, 0, List({"1", GpuUuid(2)}), "nvidia.com/gpu.shared"));
  c.time_slicing.resources.push_back(Entry("nvidia.com/mig-1g.10gb", 3, 1));
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 3u);
  const auto* whole = plan->Find("nvidia.com/gpu");
  const auto* shared = plan->Find("nvidia.com/gpu.shared");
  const auto* mig = plan->Find("nvidia.com/mig-1g.10gb");
  ASSERT_TRUE(whole && shared && mig);
  ASSERT_EQ(whole->devices.size(), 1u);
  EXPECT_EQ(whole->devices[0].id, GpuUuid(0));
  EXPECT_EQ(whole->devices[0].memory_limit_mib, 0u) << "a whole GPU has no limit";
  ASSERT_EQ(shared->devices.size(), 20u);
  EXPECT_EQ(shared->devices[0].id, GpuUuid(1) + "::0");
  EXPECT_EQ(shared->devices[19].id, GpuUuid(2) + "::9");
  EXPECT_EQ(shared->devices[0].memory_limit_mib, 2302u);  // floor(23028 / 10)
  EXPECT_EQ(mig->devices.size(), 21u);
  EXPECT_EQ(mig->devices[0].memory_limit_mib, 3285u);  // floor(9856 / 3)
  EXPECT_EQ(mig->devices[0].numa_nodes, (std::vector<int64_t>{1}));
}

TEST(ResourcePlan, SelectorForms) {
  Inventory inv = testing::EightA10();
  inv.gpus.push_back(testing::MigGpu(8, "1g.10gb", 7, 9856));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  // GPU 0 by index, GPU 1 by UUID; MIG 8:0 by index, 8:1 by UUID, 8:2 by the GPU/GI/CI form.
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 4, 0, List({"0", GpuUuid(1)}), "nvidia.com/gpu.shared"));
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/mig-1g.10gb", 2, 1,
            List({"8:0", MigUuid(8, 1), "MIG-" + GpuUuid(8) + "/9/0"}), "nvidia.com/mig.shared"));
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->Find("nvidia.com/gpu.shared")->devices.size(), 8u);
  EXPECT_EQ(plan->Find("nvidia.com/gpu")->devices.size(), 6u);
  const auto* ms = plan->Find("nvidia.com/mig.shared");
  ASSERT_NE(ms, nullptr);
  ASSERT_EQ(ms->devices.size(), 6u);
  EXPECT_EQ(ms->devices[4].device_uuid, MigUuid(8, 2));
  EXPECT_EQ(plan->Find("nvidia.com/mig-1g.10gb")->devices.size(), 4u);
}

TEST(ResourcePlan, GpuIndexSelectsTheMigDevicesOfThatGpu) {
  Inventory inv = testing::OneH100Mig();
  inv.gpus.push_back(testing::MigGpu(1, "1g.10gb", 7, 9856));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/mig-1g.10gb", 3, 0, List({"1"}), "nvidia.com/mig-1g.10gb.shared"));
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->Find("nvidia.com/mig-1g.10gb.shared")->devices.size(), 21u);
  EXPECT_EQ(plan->Find("nvidia.com/mig-1g.10gb")->devices.size(), 7u);
  EXPECT_EQ(plan->Find("nvidia.com/mig-1g.10gb")->devices[0].gpu_index, 0);
}

TEST(ResourcePlan, CountSelectsTheFirstDevices) {
  NodeConfig c;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 0, Count(3), "nvidia.com/gpu.shared"));
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto* s = plan->Find("nvidia.com/gpu.shared");
  ASSERT_EQ(s->devices.size(), 6u);
  EXPECT_EQ(s->devices[5].gpu_index, 2);
  EXPECT_EQ(plan->Find("nvidia.com/gpu")->devices.front().gpu_index, 3);
}

TEST(ResourcePlan, CountAboveTheDevicesIsAnError) {
  NodeConfig c;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 0, Count(9)));
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "sharing.timeSlicing.resources[0].devices: count 9 must be 1..8 (this node has 8 "
            "nvidia.com/gpu devices)");
}

TEST(ResourcePlan, SelectorMatchingNothing) {
  Inventory inv = testing::EightA10();
  inv.gpus.push_back(testing::MigGpu(8, "1g.10gb", 7, 9856));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 2, 0, List({"9", "8", "GPU-00000000-0000-0000-0000-000000000000"})));
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_FALSE(plan.ok());
  auto lines = Lines(plan.status());
  ASSERT_EQ(lines.size(), 3u) << plan.status().message();
  EXPECT_EQ(lines[0],
            "sharing.timeSlicing.resources[0].devices[0]: \"9\" matches no nvidia.com/gpu device "
            "on this node");
  EXPECT_THAT(lines[1], HasSubstr("sharing.timeSlicing.resources[0].devices[1]: \"8\" matches no "
                                  "nvidia.com/gpu device on this node (MIG device 8:0"));
  EXPECT_THAT(lines[1], HasSubstr("is advertised as nvidia.com/mig-1g.10gb)"));
  EXPECT_THAT(lines[2], HasSubstr("resources[0].devices[2]"));
}

TEST(ResourcePlan, AllOnAResourceThisNodeLacksIsANote) {
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 10, 0));
  c.time_slicing.resources.push_back(Entry("nvidia.com/mig-2g.20gb", 2, 1));
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_THAT(plan->notes[0], HasSubstr("sharing.timeSlicing.resources[1]: this node has no "
                                        "nvidia.com/mig-2g.20gb devices"));
}

TEST(ResourcePlan, OverlappingSelectors) {
  NodeConfig c;
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 2, 0, List({"0", "1"}), "nvidia.com/gpu.a"));
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 4, 1, List({"1", "2"}), "nvidia.com/gpu.b"));
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 4, 2, List({"3", "4", "5", "6", "7"}), "nvidia.com/gpu.b"));
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "sharing.timeSlicing.resources[1].devices: GPU 1 (" + GpuUuid(1) +
                ") is also selected by sharing.timeSlicing.resources[0]; each device may be "
                "shared by one entry only");
}

TEST(ResourcePlan, EntriesWithTheSameNameAndReplicasMerge) {
  NodeConfig c;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 4, 0, List({"0", "1", "2", "3"})));
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 4, 1, List({"4", "5", "6", "7"})));
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 1u);
  EXPECT_EQ(plan->resources[0].devices.size(), 32u);
}

TEST(ResourcePlan, SharedAndWholeDevicesCannotShareAName) {
  NodeConfig c;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 10, 0, List({"0", "1"})));
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("sharing.timeSlicing.resources[0].name: nvidia.com/gpu collides with the "
                        "nvidia.com/gpu devices no sharing entry selects (GPU 2"));
  EXPECT_THAT(plan.status().message(), HasSubstr("rename: nvidia.com/gpu.shared"));
}

TEST(ResourcePlan, RenameCollidingWithAnotherEntry) {
  Inventory inv = testing::EightA10();
  inv.gpus.push_back(testing::MigGpu(8, "1g.10gb", 7, 9856));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 10, 0));
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/mig-1g.10gb", 3, 1, {}, "nvidia.com/gpu"));
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("sharing.timeSlicing.resources[1].rename: nvidia.com/gpu collides with "
                        "sharing.timeSlicing.resources[0] (nvidia.com/gpu x 10)"));
}

TEST(ResourcePlan, RenameCollidingWithABaseResource) {
  Inventory inv = testing::EightA10();
  inv.gpus.push_back(testing::MigGpu(8, "1g.10gb", 7, 9856));
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 2, 0, List({"0"}), "nvidia.com/mig-1g.10gb"));
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_FALSE(plan.ok());
  auto lines = Lines(plan.status());
  // Both names collide: the rename with the MIG devices, and GPUs 1-7 still whole under
  // nvidia.com/gpu is fine (nobody else uses that name).
  ASSERT_EQ(lines.size(), 1u) << plan.status().message();
  EXPECT_THAT(lines[0], HasSubstr("sharing.timeSlicing.resources[0].rename: nvidia.com/mig-1g.10gb "
                                  "collides with the nvidia.com/mig-1g.10gb devices no sharing "
                                  "entry selects (MIG device 8:0"));
}

TEST(ResourcePlan, InvalidResultingNames) {
  NodeConfig c;
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 2, 0, List({"0"}), "nvidia.com/" + std::string(70, 'x')));
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 1, List({"1"}), "kubernetes.io/gpu"));
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 2, {}, ""));
  c.time_slicing.resources.back().devices = List({"2", "3", "4", "5", "6", "7"});
  c.time_slicing.rename_by_default = true;
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  const std::string m = plan.status().message();
  EXPECT_THAT(m, HasSubstr("sharing.timeSlicing.resources[0].rename: nvidia.com/xxx"));
  EXPECT_THAT(m, HasSubstr("is not a valid extended resource name: the part after '/' is 70 "
                           "characters, at most 63 are allowed"));
  EXPECT_THAT(m, HasSubstr("sharing.timeSlicing.resources[1].rename: kubernetes.io/gpu is not a "
                           "valid extended resource name"));
  EXPECT_EQ(Lines(plan.status()).size(), 2u) << m;
}

TEST(ResourcePlan, ReplicasAboveTheCeiling) {
  NodeConfig c;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 60, 0));
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), "sharing.timeSlicing.resources[0].replicas: must be 2..48, got 60");
  c.gpushare.max_clients_per_gpu = 64;
  EXPECT_TRUE(BuildResourcePlan(testing::EightA10(), c).ok());
  c.time_slicing.resources[0].replicas = 1;
  EXPECT_FALSE(BuildResourcePlan(testing::EightA10(), c).ok());
}

TEST(ResourcePlan, MigCeilingCountsInstancesTimesReplicas) {
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  c.time_slicing.resources.push_back(Entry("nvidia.com/mig-1g.10gb", 7, 0));
  auto plan = BuildResourcePlan(testing::OneH100Mig(), c);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "sharing.timeSlicing.resources[0].replicas: GPU 0 (" + GpuUuid(0) +
                ") would have 49 clients (7 MIG devices x 7 replicas), more than "
                "gpushare.maxClientsPerGpu 48");
  c.time_slicing.resources[0].replicas = 6;  // 42
  EXPECT_TRUE(BuildResourcePlan(testing::OneH100Mig(), c).ok());
}

TEST(ResourcePlan, AllProblemsAreReported) {
  Inventory inv = testing::EightA10();
  NodeConfig c;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 0, List({"11"}), "nvidia.com/a"));
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 1, List({"12"}), "nvidia.com/b"));
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 2, Count(20), "nvidia.com/c"));
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(Lines(plan.status()).size(), 3u) << plan.status().message();
}

TEST(ResourcePlan, EmptyInventoryPlansNothing) {
  auto plan = BuildResourcePlan(Inventory{}, NodeConfig{});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->resources.empty());
}

// Plan problems grow with the config (one per device an entry selects twice); at most 20 are
// listed and the rest counted, so a hostile config cannot make the message (or the agent's log
// on a reload) grow without bound.
TEST(ResourcePlan, ProblemsAreCappedAtTwentyWithACount) {
  NodeConfig c;
  for (size_t i = 0; i < 1000; ++i) {
    c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, i, List({"0", "1"}), "nvidia.com/gpu.a"));
  }
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  auto lines = SplitLines(plan.status().message());
  ASSERT_EQ(lines.size(), 21u);
  EXPECT_EQ(lines[0], "sharing.timeSlicing.resources[1].devices: GPU 0 (" + GpuUuid(0) +
                          ") is also selected by sharing.timeSlicing.resources[0]; each device may be "
                          "shared by one entry only");
  EXPECT_EQ(lines[20], "... and 1978 more problems (1998 in all)");
}

// A long selector list (50,000 items, about what the config's value limit allows) on a node of
// 1,024 GPUs: items are looked up, not compared with every device (0.7 s before, 0.01 s after on
// the 2-core VM of docs/benchmarks.md). The bound is only a liveness bound.
TEST(ResourcePlan, LongSelectorListsOnALargeNodeArePlannedQuickly) {
  Inventory inv;
  for (int i = 0; i < 1024; ++i) inv.gpus.push_back(testing::WholeGpu(i));
  NodeConfig c;
  c.gpushare.max_clients_per_gpu = 1024;
  std::vector<std::string> items;
  for (int k = 0; k < 50000; ++k) items.push_back(k % 2 ? std::to_string(k % 1024) : GpuUuid(k % 1024));
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 0, List(items)));
  const auto start = std::chrono::steady_clock::now();
  auto plan = BuildResourcePlan(inv, c);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "50000 selector items x 1024 GPUs: " << seconds << " s\n";
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->Find("nvidia.com/gpu")->devices.size(), 2048u);
  EXPECT_LT(seconds, 20.0) << "liveness only";
}

TEST(ResourcePlan, NotesAreCappedToo) {
  NodeConfig c;
  c.mig_strategy = MigStrategy::kMixed;
  for (size_t i = 0; i < 100; ++i) {
    c.time_slicing.resources.push_back(Entry("nvidia.com/mig-2g.20gb", 2, i));
  }
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->notes.size(), 21u);
  EXPECT_EQ(plan->notes[20], "... and 80 more notes (100 in all)");
}

TEST(SocketName, Forms) {
  EXPECT_EQ(SocketNameForResource("nvidia.com/gpu"), "gpushare-gpu.sock");
  EXPECT_EQ(SocketNameForResource("nvidia.com/gpu.shared"), "gpushare-gpu.shared.sock");
  EXPECT_EQ(SocketNameForResource("nvidia.com/mig-1g.10gb"), "gpushare-mig-1g.10gb.sock");
  EXPECT_EQ(SocketNameForResource("aliyun.com/gpu-mem"), "gpushare-aliyun.com-gpu-mem.sock");
}

}  // namespace
}  // namespace gpushare

namespace gpushare {
namespace {

TEST(ResourcePlan, EvenSplitComputeLimitPerReplica) {
  NodeConfig c;
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 4, 0));
  auto off = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->resources[0].devices[0].sm_share_ppm, 0u) << "off unless configured";
  c.gpushare.replica_compute_limit = ReplicaComputeLimit::kEvenSplit;
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const PlannedDevice& d : plan->resources[0].devices) EXPECT_EQ(d.sm_share_ppm, 250'000u) << d.id;
  bool noted = false;
  for (const std::string& n : plan->notes) noted = noted || n.find("compute limits of this plan are advertised but not enforced") != std::string::npos;
  EXPECT_TRUE(noted);
  // Whole GPUs get no share.
  NodeConfig whole;
  whole.gpushare.replica_compute_limit = ReplicaComputeLimit::kEvenSplit;
  auto w = BuildResourcePlan(testing::EightA10(), whole);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->resources[0].devices[0].sm_share_ppm, 0u);
}

}  // namespace
}  // namespace gpushare
