#include "core/inventory.h"

#include <gtest/gtest.h>

#include "tests/core/test_inventories.h"

namespace gpushare {
namespace {

TEST(ParseMigProfile, GpuInstanceProfiles) {
  auto p = ParseMigProfile("1g.10gb");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->gpu_slices, 1);
  EXPECT_EQ(p->compute_slices, 1);
  EXPECT_EQ(p->memory_gb, 10);
  EXPECT_TRUE(p->attributes.empty());

  p = ParseMigProfile("7g.80gb");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->gpu_slices, 7);
  EXPECT_EQ(p->memory_gb, 80);
}

TEST(ParseMigProfile, ComputeInstanceSubProfile) {
  auto p = ParseMigProfile("1c.2g.20gb");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->compute_slices, 1);
  EXPECT_EQ(p->gpu_slices, 2);
  EXPECT_EQ(p->memory_gb, 20);
}

TEST(ParseMigProfile, Attributes) {
  auto p = ParseMigProfile("1g.10gb+me");
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->attributes.size(), 1u);
  EXPECT_EQ(p->attributes[0], "me");
  p = ParseMigProfile("1g.12gb+me.all+gfx");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->attributes, (std::vector<std::string>{"me.all", "gfx"}));
}

TEST(ParseMigProfile, Malformed) {
  for (const char* bad :
       {"", "1g", "1g.10", "g.10gb", "0g.10gb", "1g.10gb+", "1g.10gb+ME", "3c.2g.20gb",
        "1g.10gb.me", "01g.10gb", "1g10gb", "1x.10gb", "1g.-1gb", " 1g.10gb"}) {
    EXPECT_FALSE(ParseMigProfile(bad).has_value()) << bad;
  }
}

TEST(Uuids, Forms) {
  EXPECT_TRUE(IsGpuUuid("GPU-b1028956-cfa2-0990-bf4a-5da9abb51763"));
  EXPECT_FALSE(IsGpuUuid("GPU-b1028956-cfa2-0990-bf4a-5da9abb5176"));
  EXPECT_FALSE(IsGpuUuid("MIG-b1028956-cfa2-0990-bf4a-5da9abb51763"));
  EXPECT_FALSE(IsGpuUuid("GPU-b1028956xcfa2-0990-bf4a-5da9abb51763"));
  EXPECT_TRUE(IsMigUuid("MIG-b1028956-cfa2-0990-bf4a-5da9abb51763"));
  EXPECT_TRUE(IsMigUuid("MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763/3/0"));
  EXPECT_FALSE(IsMigUuid("MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763/3"));
  EXPECT_FALSE(IsMigUuid("MIG-GPU-b1028956-cfa2-0990-bf4a-5da9abb51763/x/0"));
  EXPECT_FALSE(IsMigUuid("GPU-b1028956-cfa2-0990-bf4a-5da9abb51763"));
}

TEST(Inventory, Lookups) {
  Inventory inv = testing::EightA10();
  inv.gpus.push_back(testing::MigGpu(8, "1g.10gb", 7, 9856));
  ASSERT_NE(inv.FindByIndex(3), nullptr);
  EXPECT_EQ(inv.FindByIndex(3)->uuid, testing::GpuUuid(3));
  EXPECT_EQ(inv.FindByIndex(42), nullptr);
  ASSERT_NE(inv.FindByUuid(testing::GpuUuid(5)), nullptr);
  EXPECT_EQ(inv.FindByUuid(testing::GpuUuid(5))->index, 5);
  EXPECT_EQ(inv.FindByUuid("GPU-nope"), nullptr);

  const MigInstance* mig = nullptr;
  const Gpu* owner = inv.FindMigOwner(testing::MigUuid(8, 4), &mig);
  ASSERT_NE(owner, nullptr);
  EXPECT_EQ(owner->index, 8);
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ(mig->index, 4);
  EXPECT_EQ(mig->gpu_instance_id, 11);
  EXPECT_EQ(inv.FindMigOwner("MIG-nope", &mig), nullptr);
  EXPECT_EQ(mig, nullptr);
  EXPECT_EQ(inv.FindMigOwner(testing::GpuUuid(8), nullptr), nullptr);  // a GPU is not a MIG
}

}  // namespace
}  // namespace gpushare
