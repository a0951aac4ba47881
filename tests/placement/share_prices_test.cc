#include "core/placement/share_prices.h"

#include <gtest/gtest.h>

namespace gpushare::placement {
namespace {

TEST(SharePricesTest, HalvesPairUp) {
  const SharePrices p = SharePrices::Solve(1000, {500}, {10});
  EXPECT_NEAR(p.Price(500), 0.5, 1e-9);
  EXPECT_NEAR(p.Value(1000), 1.0, 1e-9);
  EXPECT_NEAR(p.Value(499), 0.0, 1e-9);
  EXPECT_NEAR(p.Cost(500, 500), 0.0, 1e-9);
  EXPECT_NEAR(p.Cost(500, 1000), 0.0, 1e-9);
  EXPECT_NEAR(p.lp_bins(), 5.0, 1e-9);
}

TEST(SharePricesTest, ThePricesOfTheTracesBigItems) {
  // 810 needs a GPU of its own; the small 160 fills the 190 it leaves, so it is worth nothing.
  const SharePrices p =
      SharePrices::Solve(1000, {810, 160, 470, 650, 320}, {1000, 70, 700, 250, 300});
  EXPECT_NEAR(p.Price(810), 1.0, 1e-9);
  EXPECT_NEAR(p.Price(160), 0.0, 1e-9);
  EXPECT_NEAR(p.Price(470), 0.5, 1e-9);
  EXPECT_NEAR(p.Price(650) + p.Price(320), 1.0, 1e-9);
  EXPECT_NEAR(p.Cost(160, 190), 0.0, 1e-9);
  // A 320 into the 530 a 470 left spoils a gap another 470 would fill.
  EXPECT_GT(p.Cost(320, 530), 0.1);
  EXPECT_NEAR(p.Cost(320, 350), 0.0, 1e-9);
  // The LP bound: at least as many GPUs as items of more than half a GPU.
  EXPECT_GE(p.lp_bins(), 1000 + 250 - 1e-6);
}

TEST(SharePricesTest, ADegenerateLpEndsWhenTheOracleRepeatsAPattern) {
  // Every size seen once on a 79-unit GPU (fractions of an 80 GB GPU in GiB, as the scheduler
  // books alibabacloud.com/gpu-milli): the knapsack kept returning a pattern the LP already had
  // (rounding), and the solve added it until its round limit, about 975 patterns and seconds to
  // minutes under gpushare-scheduler's lock. It ends at the repeat, with the same optimum.
  const std::vector<int64_t> sizes = {3,  5,  6,  9,  13, 4,  11, 12, 15,
                                      26, 18, 22, 27, 30, 35, 38, 52, 64};
  const SharePrices p = SharePrices::Solve(79, sizes, std::vector<double>(sizes.size(), 1.0));
  EXPECT_LT(p.patterns(), sizes.size() + 100);
  EXPECT_NEAR(p.lp_bins(), 4.946507, 1e-5);
  for (int64_t gap : {79, 40, 13})
    for (int64_t d : sizes)
      if (d <= gap) {
        EXPECT_GE(p.Cost(d, gap), -1e-9);
      }
}

TEST(SharePricesTest, EmptyAndOddInputs) {
  const SharePrices none = SharePrices::Solve(1000, {}, {});
  EXPECT_NEAR(none.Cost(300, 1000), 0.0, 1e-12);
  const SharePrices big = SharePrices::Solve(1000, {2000, 0, 300}, {5, 5, 0});  // all ignored
  EXPECT_NEAR(big.Value(1000), 0.0, 1e-12);
  EXPECT_TRUE(SharePrices::Solve(0, {1}, {1}).empty());
  // MiB units with an odd capacity: the discretisation keeps costs non-negative.
  const SharePrices mib = SharePrices::Solve(81251, {3072, 4096, 13312}, {100, 50, 80});
  for (int64_t gap : {81251, 40000, 3072, 100})
    for (int64_t d : {3072, 4096, 13312}) {
      if (d > gap) continue;
      EXPECT_GE(mib.Cost(d, gap), 0.0);
    }
  EXPECT_GT(mib.Value(81251), 0.9);
}

}  // namespace
}  // namespace gpushare::placement
