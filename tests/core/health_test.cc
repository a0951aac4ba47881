#include "core/health.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/core/test_inventories.h"

namespace gpushare {
namespace {

using testing::GpuUuid;
using ::testing::HasSubstr;
using testing::MigUuid;

// One A10 and one MIG GPU with 3 x 1g.10gb.
Inventory Node() {
  Inventory inv;
  inv.gpus.push_back(testing::WholeGpu(0));
  inv.gpus.push_back(testing::MigGpu(1, "1g.10gb", 3, 9856));
  return inv;
}

HealthOptions Options(int64_t recovery_ms = 60'000) {
  HealthOptions o;
  o.recovery_ms = recovery_ms;
  return o;
}

HealthEvent Xid(const std::string& uuid, uint32_t xid, int64_t t) {
  HealthEvent e;
  e.uuid = uuid;
  e.xid = xid;
  e.time_ms = t;
  return e;
}

std::vector<std::string> Uuids(const std::vector<HealthTransition>& ts) {
  std::vector<std::string> v;
  for (const auto& t : ts) v.push_back(t.uuid);
  return v;
}

ResourcePlan PlanFor(const Inventory& inv, MigStrategy strategy, int replicas) {
  NodeConfig c;
  c.mig_strategy = strategy;
  ReplicatedResource r;
  r.name = "nvidia.com/gpu";
  r.replicas = replicas;
  c.time_slicing.resources.push_back(r);
  if (strategy == MigStrategy::kMixed) {
    r.name = "nvidia.com/mig-1g.10gb";
    c.time_slicing.resources.push_back(r);
  }
  auto p = BuildResourcePlan(inv, c);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

TEST(Health, GpuXidMarksTheGpuItsMigInstancesAndAllReplicas) {
  Inventory inv = Node();
  HealthTracker h(inv, Options());
  auto ts = h.OnEvent(Xid(GpuUuid(1), 79, 1000));
  EXPECT_EQ(Uuids(ts),
            (std::vector<std::string>{GpuUuid(1), MigUuid(1, 0), MigUuid(1, 1), MigUuid(1, 2)}));
  for (const auto& t : ts) {
    EXPECT_FALSE(t.healthy);
    EXPECT_EQ(t.time_ms, 1000);
    EXPECT_EQ(t.reason, "xid 79 on " + GpuUuid(1));
  }
  EXPECT_FALSE(h.IsHealthy(MigUuid(1, 2)));
  EXPECT_TRUE(h.IsHealthy(GpuUuid(0)));

  ResourcePlan plan = PlanFor(inv, MigStrategy::kMixed, 3);
  h.ApplyTo(&plan);
  for (const auto& r : plan.resources) {
    for (const auto& d : r.devices) {
      EXPECT_EQ(d.healthy, d.gpu_index == 0) << d.id;
    }
  }
}

TEST(Health, MigScopedEventMarksOnlyThatInstance) {
  Inventory inv = Node();
  HealthTracker h(inv, Options());
  auto ts = h.OnEvent(Xid(MigUuid(1, 1), 94, 5));
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_EQ(ts[0].uuid, MigUuid(1, 1));
  EXPECT_EQ(ts[0].gpu_index, 1);
  EXPECT_EQ(ts[0].mig_index, 1);
  EXPECT_TRUE(h.IsHealthy(GpuUuid(1)));
  EXPECT_TRUE(h.IsHealthy(MigUuid(1, 0)));
  EXPECT_FALSE(h.IsHealthy(MigUuid(1, 1)));

  ResourcePlan mixed = PlanFor(inv, MigStrategy::kMixed, 3);
  h.ApplyTo(&mixed);
  int unhealthy = 0;
  for (const auto& d : mixed.Find("nvidia.com/mig-1g.10gb")->devices) {
    EXPECT_EQ(d.healthy, d.device_uuid != MigUuid(1, 1)) << d.id;
    unhealthy += !d.healthy;
  }
  EXPECT_EQ(unhealthy, 3) << "all three replicas of the instance";

  // Under migStrategy none the MIG GPU is handed out whole, with the faulty instance in it.
  ResourcePlan none = PlanFor(inv, MigStrategy::kNone, 2);
  h.ApplyTo(&none);
  for (const auto& d : none.resources[0].devices) EXPECT_EQ(d.healthy, d.gpu_index == 0) << d.id;
}

TEST(Health, IgnoredXidsChangeNothing) {
  HealthTracker h(Node(), Options());
  for (uint32_t xid : {13u, 31u, 43u, 45u, 68u, 109u}) {
    std::string why;
    EXPECT_TRUE(h.OnEvent(Xid(GpuUuid(0), xid, 1), &why).empty());
    EXPECT_EQ(why, "xid " + std::to_string(xid) + " is in the ignore list");
  }
  EXPECT_TRUE(h.IsHealthy(GpuUuid(0)));
  EXPECT_FALSE(h.OnEvent(Xid(GpuUuid(0), 48, 1)).empty());
}

TEST(Health, ConfiguredIgnoreList) {
  GpushareSettings s;
  s.ignored_xids = {79};
  s.health_recovery_seconds = 10;
  HealthOptions o = HealthOptionsFromSettings(s);
  EXPECT_EQ(o.recovery_ms, 10'000);
  HealthTracker h(Node(), o);
  EXPECT_TRUE(h.OnEvent(Xid(GpuUuid(0), 79, 1)).empty());
  EXPECT_EQ(h.OnEvent(Xid(GpuUuid(0), 13, 1)).size(), 1u);
}

TEST(Health, RecoversAfterTheQuietPeriod) {
  HealthTracker h(Node(), Options(60'000));
  ASSERT_EQ(h.OnEvent(Xid(GpuUuid(0), 48, 1'000)).size(), 1u);
  EXPECT_EQ(h.NextRecoveryMs(), 61'000);
  EXPECT_TRUE(h.Advance(60'999).empty());
  // A new error during the quiet period restarts it.
  EXPECT_TRUE(h.OnEvent(Xid(GpuUuid(0), 48, 30'000)).empty()) << "already Unhealthy";
  EXPECT_EQ(h.NextRecoveryMs(), 90'000);
  EXPECT_TRUE(h.Advance(61'000).empty());
  auto ts = h.Advance(90'000);
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_TRUE(ts[0].healthy);
  EXPECT_EQ(ts[0].uuid, GpuUuid(0));
  EXPECT_EQ(ts[0].reason, "no error for 60s");
  EXPECT_TRUE(h.IsHealthy(GpuUuid(0)));
  EXPECT_EQ(h.NextRecoveryMs(), std::nullopt);
  EXPECT_TRUE(h.Advance(200'000).empty());
}

TEST(Health, MigInstanceStaysUnhealthyWhileItsOwnQuietPeriodRuns) {
  HealthTracker h(Node(), Options(100));
  h.OnEvent(Xid(GpuUuid(1), 48, 0));
  h.OnEvent(Xid(MigUuid(1, 0), 48, 50));
  auto ts = h.Advance(100);  // the GPU recovers; instance 0 has 50 ms to go
  EXPECT_EQ(Uuids(ts), (std::vector<std::string>{GpuUuid(1), MigUuid(1, 1), MigUuid(1, 2)}));
  EXPECT_FALSE(h.IsHealthy(MigUuid(1, 0)));
  EXPECT_EQ(Uuids(h.Advance(150)), (std::vector<std::string>{MigUuid(1, 0)}));
}

TEST(Health, ZeroRecoveryMeansNever) {
  HealthTracker h(Node(), Options(0));
  h.OnEvent(Xid(GpuUuid(0), 48, 0));
  EXPECT_EQ(h.NextRecoveryMs(), std::nullopt);
  EXPECT_TRUE(h.Advance(INT64_MAX / 2).empty());
  EXPECT_FALSE(h.IsHealthy(GpuUuid(0)));
}

TEST(Health, DeviceLostIsSticky) {
  HealthTracker h(Node(), Options(10));
  HealthEvent lost;
  lost.kind = HealthEventKind::kDeviceLost;
  lost.uuid = GpuUuid(0);
  lost.time_ms = 5;
  lost.detail = "fell off the bus";
  auto ts = h.OnEvent(lost);
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_EQ(ts[0].reason, "device lost on " + GpuUuid(0) + " (fell off the bus)");
  EXPECT_EQ(h.NextRecoveryMs(), std::nullopt);
  EXPECT_TRUE(h.Advance(1'000'000).empty());
  EXPECT_FALSE(h.IsHealthy(GpuUuid(0)));
}

TEST(Health, EventWithoutDeviceMarksEveryGpu) {
  HealthTracker h(Node(), Options());
  auto ts = h.OnEvent(Xid("", 48, 7));
  EXPECT_EQ(ts.size(), 5u);  // 2 GPUs + 3 MIG instances
  EXPECT_THAT(ts[0].reason, HasSubstr("every GPU"));
}

TEST(Health, UnknownDeviceAndDisabledChecksAreIgnored) {
  HealthTracker h(Node(), Options());
  std::string why;
  EXPECT_TRUE(h.OnEvent(Xid("GPU-unknown", 48, 1), &why).empty());
  EXPECT_EQ(why, "unknown device GPU-unknown");
  EXPECT_TRUE(h.IsHealthy("GPU-unknown"));

  HealthOptions off = Options();
  off.enabled = false;
  HealthTracker d(Node(), off);
  EXPECT_TRUE(d.OnEvent(Xid(GpuUuid(0), 48, 1), &why).empty());
  EXPECT_EQ(why, "health checks are disabled");
}

}  // namespace
}  // namespace gpushare

namespace gpushare {
namespace {

TEST(Health, ReloadCarriesUnhealthyDevicesOver) {
  HealthTracker before(Node(), Options(60'000));
  ASSERT_EQ(before.OnEvent(Xid(GpuUuid(0), 48, 1'000)).size(), 1u);
  ASSERT_FALSE(before.OnEvent(Xid(MigUuid(1, 2), 94, 2'000)).empty());
  // The new config: another quiet period; a GPU that is gone is simply not carried.
  Inventory smaller = Node();
  HealthTracker after(smaller, Options(120'000));
  EXPECT_EQ(after.CarryOver(before), 2);
  EXPECT_FALSE(after.IsHealthy(GpuUuid(0)));
  EXPECT_FALSE(after.IsHealthy(MigUuid(1, 2)));
  EXPECT_TRUE(after.IsHealthy(MigUuid(1, 0)));
  ResourcePlan p = PlanFor(smaller, MigStrategy::kMixed, 2);
  after.ApplyTo(&p);
  for (const PlannedResource& r : p.resources)
    for (const PlannedDevice& d : r.devices)
      EXPECT_EQ(d.healthy, d.device_uuid != GpuUuid(0) && d.device_uuid != MigUuid(1, 2)) << d.id;
  // The recovery clock runs from the last error, with the new quiet period.
  EXPECT_EQ(after.NextRecoveryMs(), 121'000);
  EXPECT_EQ(after.Advance(121'000).size(), 1u);
  EXPECT_EQ(after.Advance(122'000).size(), 1u);
  // Health checks disabled by the reload: everything is Healthy.
  HealthOptions off = Options();
  off.enabled = false;
  HealthTracker disabled(Node(), off);
  EXPECT_EQ(disabled.CarryOver(before), 0);
  EXPECT_TRUE(disabled.IsHealthy(GpuUuid(0)));
}

}  // namespace
}  // namespace gpushare
