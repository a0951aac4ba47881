// GetPreferredAllocation policy: distributed, packed, NUMA alignment, must_include, bounds.
#include "deviceplugin/preferred_allocation.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/deviceplugin/fixtures.h"

namespace gpushare::deviceplugin {
namespace {

using gpushare::testing::GpuUuid;
using gpushare::testing::MakeGpuResource;
using gpushare::testing::MakeMigResource;

std::vector<std::string> AllIds(const PlannedResource& r) {
  std::vector<std::string> ids;
  for (const auto& d : r.devices) ids.push_back(d.id);
  return ids;
}

std::vector<std::string> Without(std::vector<std::string> ids, const std::set<std::string>& used) {
  std::vector<std::string> out;
  for (auto& id : ids) {
    if (!used.count(id)) out.push_back(id);
  }
  return out;
}

std::string GpuOf(const std::string& id) {
  return id.substr(0, id.find("::"));
}

TEST(PreferredAllocatorTest, DistributedSpreadsOverGpus) {
  PlannedResource res = MakeGpuResource(4, 10);
  DeviceIndex idx(res);
  PreferredAllocator alloc(AllocationPolicy::kDistributed);
  std::set<std::string> used;
  std::map<std::string, int> per_gpu;
  // Eight single-replica containers in a row land two per GPU, never three on one while
  // another has fewer.
  for (int i = 0; i < 8; ++i) {
    auto r = alloc.Choose(idx, {Without(AllIds(res), used), {}, 1});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->size(), 1u);
    used.insert((*r)[0]);
    per_gpu[GpuOf((*r)[0])]++;
    int lo = 100, hi = 0;
    for (int g = 0; g < 4; ++g) {
      lo = std::min(lo, per_gpu[GpuUuid(g)]);
      hi = std::max(hi, per_gpu[GpuUuid(g)]);
    }
    EXPECT_LE(hi - lo, 1) << "after " << i + 1 << " containers";
  }
}

TEST(PreferredAllocatorTest, DistributedPicksLeastUsedGpuFromRequestAlone) {
  PlannedResource res = MakeGpuResource(3, 4);
  DeviceIndex idx(res);
  // GPU0 has 3 replicas in use, GPU1 1, GPU2 2: the free list says so.
  std::set<std::string> used = {GpuUuid(0) + "::0", GpuUuid(0) + "::1", GpuUuid(0) + "::2",
                                GpuUuid(1) + "::0", GpuUuid(2) + "::0", GpuUuid(2) + "::1"};
  PreferredAllocator alloc(AllocationPolicy::kDistributed);
  auto r = alloc.Choose(idx, {Without(AllIds(res), used), {}, 1});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(GpuOf((*r)[0]), GpuUuid(1));
  // Two at once: GPU1, then GPU1 and GPU2 tie at 2, either is fine but not GPU0.
  auto two = alloc.Choose(idx, {Without(AllIds(res), used), {}, 2});
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ(GpuOf((*two)[0]), GpuUuid(1));
  EXPECT_NE(GpuOf((*two)[1]), GpuUuid(0));
}

TEST(PreferredAllocatorTest, PackedFillsOneGpuFirst) {
  PlannedResource res = MakeGpuResource(3, 4);
  DeviceIndex idx(res);
  PreferredAllocator alloc(AllocationPolicy::kPacked);
  std::set<std::string> used;
  for (int i = 0; i < 8; ++i) {
    auto r = alloc.Choose(idx, {Without(AllIds(res), used), {}, 1});
    ASSERT_TRUE(r.ok());
    used.insert((*r)[0]);
  }
  // Two GPUs full, one untouched.
  std::map<std::string, int> per_gpu;
  for (auto& id : used) per_gpu[GpuOf(id)]++;
  ASSERT_EQ(per_gpu.size(), 2u);
  for (auto& [g, n] : per_gpu) EXPECT_EQ(n, 4) << g;
}

TEST(PreferredAllocatorTest, TiesRotateAcrossGpus) {
  PlannedResource res = MakeGpuResource(4, 2);
  DeviceIndex idx(res);
  PreferredAllocator alloc(AllocationPolicy::kDistributed);
  std::set<std::string> first_gpus;
  for (int i = 0; i < 4; ++i) {
    auto r = alloc.Choose(idx, {AllIds(res), {}, 1});  // nothing in use each time
    ASSERT_TRUE(r.ok());
    first_gpus.insert(GpuOf((*r)[0]));
  }
  EXPECT_EQ(first_gpus.size(), 4u);
}

TEST(PreferredAllocatorTest, MigReplicasDistributeOverInstances) {
  PlannedResource res = MakeMigResource(1, 7, 3);
  DeviceIndex idx(res);
  PreferredAllocator alloc(AllocationPolicy::kDistributed);
  std::set<std::string> used;
  for (int i = 0; i < 7; ++i) {
    auto r = alloc.Choose(idx, {Without(AllIds(res), used), {}, 1});
    ASSERT_TRUE(r.ok());
    used.insert((*r)[0]);
  }
  std::set<std::string> instances;
  for (auto& id : used) instances.insert(GpuOf(id));
  EXPECT_EQ(instances.size(), 7u);
}

TEST(PreferredAllocatorTest, MustIncludeFirstAndExactSize) {
  PlannedResource res = MakeGpuResource(2, 4);
  DeviceIndex idx(res);
  PreferredAllocator alloc(AllocationPolicy::kDistributed);
  std::string must = GpuUuid(1) + "::3";
  auto r = alloc.Choose(idx, {AllIds(res), {must}, 3});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], must);
  EXPECT_EQ(std::set<std::string>(r->begin(), r->end()).size(), 3u);
}

TEST(PreferredAllocatorTest, NeverOutsideAvailable) {
  PlannedResource res = MakeGpuResource(2, 4);
  DeviceIndex idx(res);
  PreferredAllocator alloc(AllocationPolicy::kPacked);
  std::vector<std::string> avail = {GpuUuid(0) + "::1", GpuUuid(1) + "::2", "GPU-unknown::0"};
  auto r = alloc.Choose(idx, {avail, {}, 5});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 2u);  // as many as possible
  for (auto& id : *r) EXPECT_TRUE(id == avail[0] || id == avail[1]) << id;
}

TEST(PreferredAllocatorTest, MalformedQueriesAreInvalid) {
  PlannedResource res = MakeGpuResource(2, 4);
  DeviceIndex idx(res);
  PreferredAllocator alloc(AllocationPolicy::kDistributed);
  auto zero = alloc.Choose(idx, {AllIds(res), {}, 0});
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  auto too_many = alloc.Choose(idx, {AllIds(res), {res.devices[0].id, res.devices[1].id}, 1});
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("must_include"), std::string::npos);
}

TEST(PreferredAllocatorTest, WholeGpusStayOnOneNumaNode) {
  // 8 GPUs, 4 per NUMA node. GPU 0 and 1 are in use, so node 0 has 2 free and node 1 has 4.
  PlannedResource res = MakeGpuResource(8, 1, 4);
  DeviceIndex idx(res);
  PreferredAllocator alloc(AllocationPolicy::kDistributed);
  std::vector<std::string> avail = Without(AllIds(res), {GpuUuid(0), GpuUuid(1)});
  auto two = alloc.Choose(idx, {avail, {}, 2});
  ASSERT_TRUE(two.ok());
  // Best fit: the node with exactly 2 free (keeps node 1 whole for a 4-GPU job).
  EXPECT_EQ(std::set<std::string>(two->begin(), two->end()),
            (std::set<std::string>{GpuUuid(2), GpuUuid(3)}));
  auto four = alloc.Choose(idx, {avail, {}, 4});
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(std::set<std::string>(four->begin(), four->end()),
            (std::set<std::string>{GpuUuid(4), GpuUuid(5), GpuUuid(6), GpuUuid(7)}));
  // must_include on node 0 keeps the choice there when it fits.
  auto with_must = alloc.Choose(idx, {avail, {GpuUuid(3)}, 2});
  ASSERT_TRUE(with_must.ok());
  EXPECT_EQ(std::set<std::string>(with_must->begin(), with_must->end()),
            (std::set<std::string>{GpuUuid(2), GpuUuid(3)}));
  // Five cannot fit one node: span as few as possible (4 from node 1, 1 from node 0).
  auto five = alloc.Choose(idx, {avail, {}, 5});
  ASSERT_TRUE(five.ok());
  ASSERT_EQ(five->size(), 5u);
  int on_node1 = 0;
  for (auto& id : *five) on_node1 += idx.Find(id)->numa_nodes[0] == 1;
  EXPECT_EQ(on_node1, 4);
}

}  // namespace
}  // namespace gpushare::deviceplugin
