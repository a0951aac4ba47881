// The resource plan's hand-written tests. The plans themselves (inventory + config file -> the
// printed plan or its problem lines) are data: tests/testdata/resource_plan/*.txt, run by
// resource_plan_data_test.cc (docs/testing.md). What stays here does not fit a text comparison:
// the plan's own range checks that the config loader never lets a value reach (replicas outside
// 2..maxClientsPerGpu, invalid resulting names), caps and speed on generated configs of
// hundreds to 50,000 items, and the small functions beside BuildResourcePlan.
#include "core/resource_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>

#include "base/strings.h"
#include "tests/core/test_inventories.h"

namespace gpushare {
namespace {

using testing::GpuUuid;
using ::testing::HasSubstr;

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

std::vector<std::string> Lines(const Status& s) {
  return SplitLines(s.message());
}

TEST(ResourcePlan, FindByName) {
  auto plan = BuildResourcePlan(testing::EightA10(), NodeConfig{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->Find("nvidia.com/gpu"), &plan->resources[0]);
  EXPECT_EQ(plan->Find("nvidia.com/gpu.shared"), nullptr);
}

TEST(ResourcePlan, InvalidResultingNames) {
  NodeConfig c;
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 2, 0, List({"0"}), "nvidia.com/" + std::string(70, 'x')));
  c.time_slicing.resources.push_back(
      Entry("nvidia.com/gpu", 2, 1, List({"1"}), "kubernetes.io/gpu"));
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
  EXPECT_EQ(plan.status().message(),
            "sharing.timeSlicing.resources[0].replicas: must be 2..48, got 60");
  c.gpushare.max_clients_per_gpu = 64;
  EXPECT_TRUE(BuildResourcePlan(testing::EightA10(), c).ok());
  c.time_slicing.resources[0].replicas = 1;
  EXPECT_FALSE(BuildResourcePlan(testing::EightA10(), c).ok());
}

TEST(ResourcePlan, ProblemsAreCappedAtTwentyWithACount) {
  NodeConfig c;
  for (size_t i = 0; i < 1000; ++i) {
    c.time_slicing.resources.push_back(
        Entry("nvidia.com/gpu", 2, i, List({"0", "1"}), "nvidia.com/gpu.a"));
  }
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  auto lines = SplitLines(plan.status().message());
  ASSERT_EQ(lines.size(), 21u);
  EXPECT_EQ(lines[0],
            "sharing.timeSlicing.resources[1].devices: GPU 0 (" + GpuUuid(0) +
                ") is also selected by sharing.timeSlicing.resources[0]; each device may be "
                "shared by one entry only");
  EXPECT_EQ(lines[20], "... and 1978 more problems (1998 in all)");
}

TEST(ResourcePlan, LongSelectorListsOnALargeNodeArePlannedQuickly) {
  Inventory inv;
  for (int i = 0; i < 1024; ++i) inv.gpus.push_back(testing::WholeGpu(i));
  NodeConfig c;
  c.gpushare.max_clients_per_gpu = 1024;
  std::vector<std::string> items;
  for (int k = 0; k < 50000; ++k)
    items.push_back(k % 2 ? std::to_string(k % 1024) : GpuUuid(k % 1024));
  c.time_slicing.resources.push_back(Entry("nvidia.com/gpu", 2, 0, List(items)));
  const auto start = std::chrono::steady_clock::now();
  auto plan = BuildResourcePlan(inv, c);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
