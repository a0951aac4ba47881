#include "core/placement/fragmentation.h"

#include <gtest/gtest.h>

#include "tests/placement/test_cluster.h"

namespace gpushare::placement {
namespace {

using testing::Add;
using testing::BookShare;
using testing::Node;

TargetShape T(int64_t cpu, int gpus, int64_t share, bool whole = false) {
  TargetShape t;
  t.cpu_milli = cpu;
  t.num_gpus = gpus;
  t.share = share;
  t.whole = whole;
  return t;
}

class FragmentationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    n_ = Add(c_, Node("a", 10000, 4));
    BookShare(c_, n_, 1, 500);   // GPU 1: 500 free
    BookShare(c_, n_, 2, 800);   // GPU 2: 200 free
    BookShare(c_, n_, 3, 1000);  // GPU 3: full
    // Free: [1000, 500, 200, 0], idle 1700, CPU 10000.
  }
  ClusterState c_;
  NodeId n_ = -1;
};

TEST_F(FragmentationTest, TheReferenceCases) {
  const NodeState& s = c_.node(n_);
  ASSERT_EQ(s.gpu_free_total, 1700);
  EXPECT_EQ(ShapeFragmentation(s, T(2000, 0, 0)), 1700);           // CPU-only: all idle GPU
  EXPECT_EQ(ShapeFragmentation(s, T(2000, 1, 300)), 200);          // fits: only the 200 sliver
  EXPECT_EQ(ShapeFragmentation(s, T(2000, 1, 600)), 700);          // fits on GPU 0 only
  EXPECT_EQ(ShapeFragmentation(s, T(2000, 1, 1000, true)), 700);   // whole: partial GPUs count
  EXPECT_EQ(ShapeFragmentation(s, T(2000, 2, 1000, true)), 1700);  // lacks GPUs: all idle
  EXPECT_EQ(ShapeFragmentation(s, T(20000, 1, 300)), 1700);        // lacks CPU: all idle
  TargetShape t4 = T(2000, 1, 300);
  t4.any_model = false;
  t4.model_mask = 0;  // no model allowed here
  EXPECT_EQ(ShapeFragmentation(s, t4), 1700);
}

TEST_F(FragmentationTest, NodeFragmentationWeighsShapes) {
  TargetWorkload w;
  TargetShape a = T(2000, 1, 300);
  a.weight = 0.5;
  TargetShape b = T(0, 0, 0);
  b.weight = 0.25;
  TargetShape cc = T(2000, 1, 1000, true);
  cc.weight = 0.25;
  w.shapes = {a, b, cc};
  EXPECT_DOUBLE_EQ(NodeFragmentation(c_.node(n_), w), 0.5 * 200 + 0.25 * 1700 + 0.25 * 700);
}

TEST(TargetWorkloadTest, PopularityCutOrderAndRenormalisation) {
  ClusterState c;
  Add(c, Node("a", 1000, 1, "G2"));
  std::vector<PodRequest> pods;
  auto add = [&](int n, PodRequest r) {
    for (int i = 0; i < n; ++i) pods.push_back(r);
  };
  add(50, MakePodRequest(3150, 0, 1, 810));
  add(20, MakePodRequest(11300, 0, 1, 1000));
  add(20, MakePodRequest(11400, 0, 1, 1000));  // same count: larger CPU sorts first
  add(6, MakePodRequest(12500, 0, 0, 0));
  add(4, MakePodRequest(88000, 0, 8, 1000));
  WorkloadOptions o;
  o.popularity = 0.95;
  TargetWorkload w = BuildTargetWorkload(pods, c, o);
  EXPECT_EQ(w.distinct_shapes, 5);
  ASSERT_EQ(w.shapes.size(), 4u);  // 50+20+20+6 = 96 >= 95: the 8-GPU shape is cut
  EXPECT_EQ(w.shapes[0].share, 810);
  EXPECT_EQ(w.shapes[1].cpu_milli, 11400);
  EXPECT_EQ(w.shapes[2].cpu_milli, 11300);
  EXPECT_EQ(w.shapes[3].num_gpus, 0);
  EXPECT_NEAR(w.coverage, 0.96, 1e-12);
  double sum = 0;
  for (const auto& s : w.shapes) sum += s.weight;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(w.shapes[0].weight, 50.0 / 96.0, 1e-12);
  ASSERT_EQ(w.all_shapes.size(), 5u);
  EXPECT_NEAR(w.all_shapes[4].weight, 0.04, 1e-12);
  EXPECT_TRUE(w.shapes[1].whole);
}

TEST(TargetWorkloadTest, ModelListsResolveAgainstTheCluster) {
  ClusterState c;
  Add(c, Node("t4", 1000, 1, "T4"));
  Add(c, Node("v", 1000, 1, "V100M32"));
  std::vector<PodRequest> pods = {MakePodRequest(100, 0, 1, 500, "V100M32|A100"),
                                  MakePodRequest(100, 0, 1, 500, "A100")};
  TargetWorkload w = BuildTargetWorkload(pods, c, WorkloadOptions{1.0});
  ASSERT_EQ(w.shapes.size(), 2u);
  for (const auto& s : w.shapes) {
    EXPECT_FALSE(s.any_model);
    if (s.models.size() == 2) {
      EXPECT_EQ(s.model_mask, 1ULL << c.ModelId("V100M32"));
    } else {
      EXPECT_EQ(s.model_mask, 0u);  // no such model in the cluster
    }
  }
}

}  // namespace
}  // namespace gpushare::placement
