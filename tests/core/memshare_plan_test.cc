// The resource plan with gpushare.memoryShares. The plans themselves (units per GPU, their IDs
// and limits, GPUs taken out of nvidia.com/gpu, the refusals and notes) are data:
// tests/testdata/resource_plan/memory_shares.txt (docs/testing.md). What stays here: unit IDs
// that parse back to their GPU, a name collision the config loader never lets through, and the
// byte count of the 4 MiB ListAndWatch guard, exact at the limit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/memshare.h"
#include "core/resource_plan.h"
#include "tests/core/test_inventories.h"

namespace gpushare {
namespace {

using testing::GpuUuid;
using ::testing::HasSubstr;

DeviceSelector Items(std::vector<std::string> items) {
  DeviceSelector s;
  s.kind = DeviceSelector::Kind::kList;
  s.items = std::move(items);
  return s;
}

NodeConfig MemoryConfig(std::optional<DeviceSelector> devices = DeviceSelector{},
                        memshare::MemoryUnit unit = memshare::MemoryUnit::kGiB) {
  NodeConfig c;
  c.gpushare.memory_shares.devices = devices;
  c.gpushare.memory_shares.unit = unit;
  return c;
}

Inventory Sized(std::vector<uint64_t> mib) {
  Inventory inv;
  inv.source = "test";
  for (size_t i = 0; i < mib.size(); ++i)
    inv.gpus.push_back(testing::WholeGpu(static_cast<int>(i), mib[i], 0));
  return inv;
}

TEST(MemorySharePlan, UnitIdsNameTheirGpuAndUnit) {
  auto plan = BuildResourcePlan(Sized({24576, 24576, 16160, 81920}), MemoryConfig());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 2u);  // alibabacloud.com/gpu-milli, aliyun.com/gpu-mem
  for (const PlannedResource& r : plan->resources) {
    for (const PlannedDevice& d : r.devices) {
      auto u = memshare::ParseUnitDeviceId(d.id);
      ASSERT_TRUE(u.ok()) << d.id;
      EXPECT_EQ(u->gpu_uuid, GpuUuid(d.gpu_index)) << "the ID names its GPU";
      EXPECT_EQ(u->j, d.replica);
      EXPECT_EQ(u->milli, r.gpu_milli) << d.id;
    }
  }
}

TEST(MemorySharePlan, FractionsAreAThousandDevicesOfEachMemoryGpu) {
  NodeConfig c = MemoryConfig(Items({"1", "3"}));
  c.gpushare.memory_shares.compute_limit = MemoryComputeLimit::kProportional;
  auto plan = BuildResourcePlan(Sized({24576, 24576, 16160, 81920}), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const PlannedResource* m = plan->Find(std::string(memshare::kMilliResource));
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->gpu_milli);
  EXPECT_FALSE(m->is_memory_shares());
  EXPECT_TRUE(m->is_share_resource());
  EXPECT_EQ(m->socket_name, "gpushare-alibabacloud.com-gpu-milli.sock");
  ASSERT_EQ(m->devices.size(), 2000u);
  EXPECT_EQ(m->devices[0].id, GpuUuid(1) + "-_-m0");
  EXPECT_EQ(m->devices[999].id, GpuUuid(1) + "-_-m999");
  EXPECT_EQ(m->devices[1000].id, GpuUuid(3) + "-_-m0");
  EXPECT_EQ(m->devices[1000].memory_limit_mib, 81u);  // 81920 / 1000, for per-device readers
  EXPECT_EQ(m->devices[1000].gpu_milli, 1u);
  EXPECT_EQ(m->devices[1000].sm_share_ppm, 1000u);  // a thousandth of the SMs (proportional)

  c.gpushare.memory_shares.fractions = false;
  auto off = BuildResourcePlan(Sized({24576, 24576, 16160, 81920}), c);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->Find(std::string(memshare::kMilliResource)), nullptr);
  EXPECT_EQ(off->resources.size(), 2u);  // the units and nvidia.com/gpu for GPUs 0 and 2
}

TEST(MemorySharePlan, FractionsNeedTheirNameToThemselves) {
  NodeConfig c = MemoryConfig(Items({"0"}));
  ReplicatedResource r;
  r.name = "nvidia.com/gpu";
  r.rename = std::string(memshare::kMilliResource);
  r.replicas = 2;
  r.devices = Items({"1"});
  c.time_slicing.resources.push_back(r);
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("gpushare.memoryShares.fractions: alibabacloud.com/gpu-milli is also "
                        "advertised by"));
}

TEST(MemorySharePlan, NameCollisionIsAnError) {
  NodeConfig c = MemoryConfig(Items({"0"}));
  c.gpushare.memory_shares.resource_name = "nvidia.com/gpu";
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("gpushare.memoryShares.resourceName: nvidia.com/gpu is also advertised"));
}

TEST(MemorySharePlan, MiBUnitsOfOneGpuFitKubeletsMessageLimit) {
  // One 24 GiB GPU in MiB: 24576 devices, about 1.5 MiB (the 8 x 80 GiB refusal is data).
  auto small =
      BuildResourcePlan(Sized({24576}), MemoryConfig(DeviceSelector{}, memshare::MemoryUnit::kMiB));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_LT(ListAndWatchBytes(small->resources[0]), kMaxListAndWatchBytes);
}

TEST(MemorySharePlan, TheGuardIsExactAtTheLimit) {
  // The largest GPU (in MiB units) whose list still fits, counted device by device.
  const std::string uuid = GpuUuid(0);
  int64_t bytes = 0, fits = 0;
  for (int64_t j = 0;; ++j) {
    PlannedResource one;
    PlannedDevice d;
    d.id = memshare::UnitDeviceId(uuid, j);
    d.numa_nodes = {0};
    one.devices.push_back(d);
    bytes += ListAndWatchBytes(one);  // the message is the sum of its device entries
    if (bytes > kMaxListAndWatchBytes) break;
    fits = j + 1;
  }
  const NodeConfig mib = MemoryConfig(DeviceSelector{}, memshare::MemoryUnit::kMiB);
  auto at = BuildResourcePlan(Sized({static_cast<uint64_t>(fits)}), mib);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_LE(ListAndWatchBytes(at->resources[0]), kMaxListAndWatchBytes);
  auto over = BuildResourcePlan(Sized({static_cast<uint64_t>(fits + 1)}), mib);
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(),
              HasSubstr(std::to_string(fits + 1) + " aliyun.com/gpu-mem devices"));
}

TEST(MemorySharePlan, ListAndWatchBytesCountsIdsHealthAndTopology) {
  PlannedResource r;
  PlannedDevice d;
  d.id = std::string(40, 'x');
  r.devices.push_back(d);
  // Device: ID (1+1+40) + health (1+1+9) = 53; in the response: 1+1+53.
  EXPECT_EQ(ListAndWatchBytes(r), 55);
  r.devices[0].numa_nodes = {0};  // NUMANode{ID:0} is empty: topology 1+1+(1+1+0)
  EXPECT_EQ(ListAndWatchBytes(r), 59);
  r.devices[0].numa_nodes = {1};  // NUMANode{ID:1}: 2 bytes
  EXPECT_EQ(ListAndWatchBytes(r), 61);
}

}  // namespace
}  // namespace gpushare
