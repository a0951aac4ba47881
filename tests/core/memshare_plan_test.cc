// The resource plan with gpushare.memoryShares: units per GPU (rounded down, each GPU its own
// size), unit device IDs that name their GPU, the unit size as each unit's memory limit, GPUs
// taken out of nvidia.com/gpu, overlap and MIG refusals, and the 4 MiB ListAndWatch guard.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/strings.h"
#include "core/memshare.h"
#include "core/resource_plan.h"
#include "tests/core/test_inventories.h"

namespace gpushare {
namespace {

using ::testing::HasSubstr;
using testing::GpuUuid;

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
  for (size_t i = 0; i < mib.size(); ++i) inv.gpus.push_back(testing::WholeGpu(static_cast<int>(i), mib[i], 0));
  return inv;
}

TEST(MemorySharePlan, EveryGpuAdvertisesItsMemoryRoundedDownInGiB) {
  auto plan = BuildResourcePlan(Sized({24576, 24576, 16160, 81920}), MemoryConfig());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->resources.size(), 1u);  // no nvidia.com/gpu left
  const PlannedResource& r = plan->resources[0];
  EXPECT_EQ(r.name, "aliyun.com/gpu-mem");
  EXPECT_EQ(r.socket_name, "gpushare-aliyun.com-gpu-mem.sock");
  EXPECT_TRUE(r.is_memory_shares());
  EXPECT_EQ(r.unit_mib, 1024);
  EXPECT_EQ(r.source_field, "gpushare.memoryShares");
  std::map<int, int> per_gpu;
  for (const PlannedDevice& d : r.devices) {
    per_gpu[d.gpu_index]++;
    auto u = memshare::ParseUnitDeviceId(d.id);
    ASSERT_TRUE(u.ok()) << d.id;
    EXPECT_EQ(u->gpu_uuid, GpuUuid(d.gpu_index)) << "the ID names its GPU";
    EXPECT_EQ(u->j, d.replica);
    EXPECT_EQ(d.device_uuid, GpuUuid(d.gpu_index));  // the container sees the GPU once
    EXPECT_EQ(d.memory_limit_mib, 1024u);
    EXPECT_EQ(d.numa_nodes, std::vector<int64_t>{0});
  }
  EXPECT_EQ(per_gpu, (std::map<int, int>{{0, 24}, {1, 24}, {2, 15}, {3, 80}}));  // 16160 MiB -> 15 GiB
  EXPECT_EQ(r.devices.front().id, GpuUuid(0) + "-_-0");
  EXPECT_EQ(r.devices[23].id, GpuUuid(0) + "-_-23");
}

TEST(MemorySharePlan, DefaultConfigAdvertisesNoMemoryShares) {
  auto plan = BuildResourcePlan(Sized({24576, 24576}), NodeConfig{});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->resources.size(), 1u);
  EXPECT_EQ(plan->resources[0].name, "nvidia.com/gpu");
  EXPECT_FALSE(plan->resources[0].is_memory_shares());
}

TEST(MemorySharePlan, SelectedGpusLeaveTheWholeGpuResource) {
  NodeConfig c = MemoryConfig(Items({"1", GpuUuid(3)}));
  c.gpushare.memory_shares.resource_name = "example.com/vram";
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const PlannedResource* gpu = plan->Find("nvidia.com/gpu");
  const PlannedResource* mem = plan->Find("example.com/vram");
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(gpu->devices.size(), 6u);
  for (const PlannedDevice& d : gpu->devices) EXPECT_TRUE(d.gpu_index != 1 && d.gpu_index != 3);
  EXPECT_EQ(mem->devices.size(), 2u * 22u);  // 23028 MiB -> 22 GiB
  EXPECT_EQ(mem->devices.front().gpu_index, 1);
  EXPECT_EQ(mem->devices.back().gpu_index, 3);
}

TEST(MemorySharePlan, TimeSlicingAndMemorySharesOnTheSameGpuIsAnError) {
  NodeConfig c = MemoryConfig(Items({"0", "1"}));
  ReplicatedResource r;
  r.name = "nvidia.com/gpu";
  r.replicas = 4;
  r.devices = Items({"1", "2"});
  r.field_path = "sharing.timeSlicing.resources[0]";
  c.time_slicing.resources.push_back(r);
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("sharing.timeSlicing.resources[0].devices: GPU 1 (" + GpuUuid(1) +
                        ") serves memory shares (gpushare.memoryShares.devices); a GPU serves one kind of share"));
}

TEST(MemorySharePlan, SelectorProblemsNameTheField) {
  Inventory inv = testing::EightA10();
  inv.gpus.push_back(testing::MigGpu(8, "1g.10gb", 7, 9856));
  NodeConfig c = MemoryConfig(Items({"9", "8", "GPU-ffffffff-0000-4000-8000-000000000000"}));
  c.mig_strategy = MigStrategy::kMixed;
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_FALSE(plan.ok());
  auto lines = SplitLines(plan.status().message());
  EXPECT_THAT(lines, ::testing::Contains("gpushare.memoryShares.devices[0]: \"9\" matches no GPU on this node"));
  EXPECT_THAT(lines, ::testing::Contains(HasSubstr("gpushare.memoryShares.devices[1]: GPU 8 (")));
  EXPECT_THAT(plan.status().message(), HasSubstr("has MIG enabled; memory shares need a GPU without MIG"));
  EXPECT_THAT(lines, ::testing::Contains(HasSubstr("gpushare.memoryShares.devices[2]: \"GPU-ffffffff")));

  DeviceSelector count;
  count.kind = DeviceSelector::Kind::kCount;
  count.count = 12;
  plan = BuildResourcePlan(testing::EightA10(), MemoryConfig(count));
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("gpushare.memoryShares.devices: count 12 must be 1..8"));
}

TEST(MemorySharePlan, AllSkipsMigGpusWithANote) {
  Inventory inv = Sized({24576});
  inv.gpus.push_back(testing::MigGpu(1, "1g.10gb", 7, 9856));
  NodeConfig c = MemoryConfig();
  c.mig_strategy = MigStrategy::kMixed;
  auto plan = BuildResourcePlan(inv, c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->Find("aliyun.com/gpu-mem")->devices.size(), 24u);
  EXPECT_EQ(plan->Find("nvidia.com/mig-1g.10gb")->devices.size(), 7u);
  EXPECT_THAT(plan->notes, ::testing::Contains(HasSubstr("GPU 1 has MIG enabled and does not serve memory shares")));
}

TEST(MemorySharePlan, NameCollisionIsAnError) {
  NodeConfig c = MemoryConfig(Items({"0"}));
  c.gpushare.memory_shares.resource_name = "nvidia.com/gpu";
  auto plan = BuildResourcePlan(testing::EightA10(), c);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("gpushare.memoryShares.resourceName: nvidia.com/gpu is also advertised"));
}

TEST(MemorySharePlan, MiBUnitsAreRefusedWhenTheListWouldNotFitKubeletsMessageLimit) {
  // One 24 GiB GPU in MiB: 24576 devices, about 1.5 MiB: fits.
  auto small = BuildResourcePlan(Sized({24576}), MemoryConfig(DeviceSelector{}, memshare::MemoryUnit::kMiB));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  const PlannedResource& r = small->resources[0];
  EXPECT_EQ(r.devices.size(), 24576u);
  EXPECT_EQ(r.unit_mib, 1);
  EXPECT_EQ(r.devices[0].memory_limit_mib, 1u);
  EXPECT_LT(ListAndWatchBytes(r), kMaxListAndWatchBytes);
  // 8 x 80 GiB in MiB: 655360 devices, far beyond 4 MiB: refused with the way out.
  auto big = BuildResourcePlan(Sized(std::vector<uint64_t>(8, 81920)),
                               MemoryConfig(DeviceSelector{}, memshare::MemoryUnit::kMiB));
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("gpushare.memoryShares.unit: 655360 aliyun.com/gpu-mem devices need a "
                                                "ListAndWatch message of"));
  EXPECT_THAT(big.status().message(), HasSubstr("more than kubelet's 4 MiB gRPC limit"));
  EXPECT_THAT(big.status().message(), HasSubstr("use unit GiB"));
  // The same GPUs in GiB are fine.
  EXPECT_TRUE(BuildResourcePlan(Sized(std::vector<uint64_t>(8, 81920)), MemoryConfig()).ok());
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
  EXPECT_THAT(over.status().message(), HasSubstr(std::to_string(fits + 1) + " aliyun.com/gpu-mem devices"));
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

TEST(MemorySharePlan, TinyGpuAdvertisesNothingWithANote) {
  auto plan = BuildResourcePlan(Sized({512, 24576}), MemoryConfig());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->resources[0].devices.size(), 24u);
  EXPECT_THAT(plan->notes, ::testing::Contains(HasSubstr("GPU 0 has 512 MiB, less than one GiB")));
}

}  // namespace
}  // namespace gpushare

namespace gpushare {
namespace {

TEST(MemorySharePlan, ProportionalComputeShareFollowsTheUnitsShareOfMemory) {
  NodeConfig c = MemoryConfig();
  auto off = BuildResourcePlan(Sized({24576}), c);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->resources[0].devices[0].sm_share_ppm, 0u) << "off unless configured";
  c.gpushare.memory_shares.compute_limit = MemoryComputeLimit::kProportional;
  auto plan = BuildResourcePlan(Sized({24576, 81920}), c);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const PlannedDevice& d : plan->resources[0].devices)
    EXPECT_EQ(d.sm_share_ppm, d.gpu_index == 0 ? 1'000'000u / 24 : 1'000'000u / 80) << d.id;
  // Without the library's host directory the limits would not be enforced: a note says so.
  bool noted = false;
  for (const std::string& n : plan->notes) noted = noted || n.find("gpushare.interposer.hostDir is not set") != std::string::npos;
  EXPECT_TRUE(noted);
  c.gpushare.interposer_host_dir = "/opt/gpushare";
  plan = BuildResourcePlan(Sized({24576}), c);
  for (const std::string& n : plan->notes) EXPECT_EQ(n.find("hostDir"), std::string::npos) << n;
}

}  // namespace
}  // namespace gpushare
