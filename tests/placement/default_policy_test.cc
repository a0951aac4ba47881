// The default policy's three costs on hand-built nodes (see policy_default.h).
#include <gtest/gtest.h>

#include "core/placement/engine.h"
#include "core/placement/policy_default.h"
#include "core/placement/share_prices.h"
#include "tests/placement/test_cluster.h"

namespace gpushare::placement {
namespace {

using testing::Add;
using testing::BookShare;
using testing::Node;
using testing::Shape;

TargetWorkload Observed(const ClusterState& c,
                        const std::vector<std::pair<int, PodRequest>>& pods) {
  std::vector<PodRequest> all;
  for (const auto& [n, r] : pods)
    for (int i = 0; i < n; ++i) all.push_back(r);
  return BuildTargetWorkload(all, c, WorkloadOptions{});
}

NodeId Winner(ClusterState& c, Policy& p, const PodRequest& r, GpuAssignment* gpus = nullptr) {
  PlacementEngine e(c, p);
  auto id = e.Intern(r);
  EXPECT_TRUE(id.ok());
  const Decision d = e.Choose(*id);
  if (gpus) *gpus = d.choice.gpus;
  return d.node;
}

TEST(DefaultPolicyTest, SharesGoWhereAnOptimalPackingPutsThem) {
  ClusterState c;
  const NodeId n = Add(c, Node("n", 96000, 2));
  BookShare(c, n, 0, 650);  // GPU 0: 350 free; GPU 1: entirely free
  const TargetWorkload w = Observed(c, {{100, MakePodRequest(4000, 0, 1, 650)},
                                        {100, MakePodRequest(4000, 0, 1, 320)},
                                        {100, MakePodRequest(4000, 0, 1, 230)}});
  // Precondition from the LP prices: a 230 in the 350 gap strands 120 that nothing fills.
  const SharePrices prices = SharePrices::Solve(1000, {230, 320, 650}, {100, 100, 100});
  ASSERT_GT(prices.Cost(230, 350), prices.Cost(230, 1000) + 1e-9);
  EXPECT_NEAR(prices.Cost(320, 350), 0, 1e-9);  // 650 + 320 is an optimal pattern

  auto def = MakeDefaultPolicy(c, w, PolicyOptions{});
  ASSERT_TRUE(def.ok());
  auto bestfit = MakePolicy("bestfit", c, w, PolicyOptions{}, nullptr);
  ASSERT_TRUE(bestfit.ok());
  GpuAssignment g;
  ASSERT_EQ(Winner(c, **bestfit, MakePodRequest(4000, 0, 1, 230), &g), n);
  EXPECT_EQ(g.gpu[0], 0);  // best fit: the tightest gap
  ASSERT_EQ(Winner(c, **def, MakePodRequest(4000, 0, 1, 230), &g), n);
  EXPECT_EQ(g.gpu[0], 1);  // default: keep the 350 gap for a 320
  ASSERT_EQ(Winner(c, **def, MakePodRequest(4000, 0, 1, 320), &g), n);
  EXPECT_EQ(g.gpu[0], 0);
}

TEST(DefaultPolicyTest, CpuOnlyPodsAvoidStrandingGpus) {
  ClusterState c;
  const NodeId g2 = Add(c, Node("g2", 96000, 8));         // 12 cores per GPU
  const NodeId t4 = Add(c, Node("t4", 104000, 2, "T4"));  // 52 cores per GPU
  c.set_tie_rank(g2, 0);                                  // the node order prefers g2
  c.set_tie_rank(t4, 1);
  const TargetWorkload w =
      Observed(c, {{10, MakePodRequest(11000, 0, 1, 1000)}});  // 11 cores per GPU
  auto def = MakeDefaultPolicy(c, w, PolicyOptions{});
  ASSERT_TRUE(def.ok());
  // 40 cores on g2 would leave 56 cores for 8 GPUs (7 per GPU): GPUs stranded. t4 has room.
  EXPECT_EQ(Winner(c, **def, MakePodRequest(40000, 0, 0, 0)), t4);
  // A small CPU-only pod strands nothing anywhere: the node order decides.
  EXPECT_EQ(Winner(c, **def, MakePodRequest(1000, 0, 0, 0)), g2);
}

TEST(DefaultPolicyTest, UnconstrainedPodsLeaveContendedModelsAlone) {
  ClusterState c;
  const NodeId t4 = Add(c, Node("t4", 64000, 2, "T4"));
  const NodeId g2 = Add(c, Node("g2", 64000, 2, "G2"));
  c.set_tie_rank(t4, 0);
  c.set_tie_rank(g2, 1);
  const TargetWorkload w = Observed(
      c, {{10, MakePodRequest(4000, 0, 1, 1000, "T4")}, {10, MakePodRequest(4000, 0, 1, 1000)}});
  auto def = MakeDefaultPolicy(c, w, PolicyOptions{});
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(Winner(c, **def, MakePodRequest(4000, 0, 1, 1000)), g2);
  EXPECT_EQ(Winner(c, **def, MakePodRequest(4000, 0, 1, 1000, "T4")), t4);
  auto fgd = MakePolicy("fgd", c, w, PolicyOptions{}, nullptr);
  ASSERT_TRUE(fgd.ok());
}

TEST(DefaultPolicyTest, EqualSituationsTieAndTheNodeOrderDecides) {
  ClusterState c;
  const NodeId a = Add(c, Node("a", 96000, 8));
  const NodeId b = Add(c, Node("b", 96000, 8));
  c.set_tie_rank(a, 5);
  c.set_tie_rank(b, 2);
  const TargetWorkload w =
      Observed(c, {{10, MakePodRequest(11000, 0, 1, 1000)}, {5, MakePodRequest(3000, 0, 1, 500)}});
  auto def = MakeDefaultPolicy(c, w, PolicyOptions{});
  ASSERT_TRUE(def.ok());
  PlacementEngine e(c, **def);
  auto id = e.Intern(MakePodRequest(11000, 0, 1, 1000));
  ASSERT_TRUE(id.ok());
  const Decision d = e.Choose(*id);
  EXPECT_EQ(d.node, b);
  EXPECT_EQ(d.tied, 2);
  // Once b is used, the next whole-GPU pod follows it (packing), keeping a untouched.
  ASSERT_TRUE(e.Commit(*id, d).ok());
  EXPECT_EQ(e.Choose(*id).node, b);
}

TEST(DefaultPolicyTest, WorksWithoutHistoryAndInMemoryUnits) {
  ClusterState c;
  NodeSpec mixed = Node("mixed", 64000, 0);
  mixed.gpu_model = "A100";
  mixed.gpu_capacity = {81920, 24576};
  const NodeId n = Add(c, mixed);
  TargetWorkload empty;
  PolicyOptions o;
  o.gpu_unit = 40960;
  auto def = MakeDefaultPolicy(c, empty, o);
  ASSERT_TRUE(def.ok());
  GpuAssignment g;
  EXPECT_EQ(Winner(c, **def, MakePodRequest(1000, 0, 1, 3072, "", 1 << 30), &g), n);
  EXPECT_EQ(g.count, 1);
  DefaultPolicyOptions bad;
  bad.cpu_only_rho_scale = 0;
  EXPECT_FALSE(MakeDefaultPolicy(c, empty, o, bad).ok());
}

}  // namespace
}  // namespace gpushare::placement
