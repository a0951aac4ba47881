// Scores of the reference policies on hand-built nodes, computed by hand from the formulas in
// shared/reference/fgd-benchmark.md §6-7 (and the reference simulator's integer arithmetic).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "core/placement/policy.h"
#include "tests/placement/test_cluster.h"

namespace gpushare::placement {
namespace {

using testing::Add;
using testing::Book;
using testing::BookShare;
using testing::Node;
using testing::Shape;

class PolicyTest : public ::testing::Test {
 protected:
  // The largest node sets the normalisers: 128000 milli-CPU and 8 GPUs (8000), as in the trace.
  void SetUp() override { big_ = Add(c_, Node("big", 128000, 8, "G3")); }
  std::unique_ptr<Policy> Make(const std::string& name) {
    auto p = MakePolicy(name, c_, workload_, PolicyOptions{}, &rng_);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(p).value();
  }
  double ScoreOf(Policy& p, NodeId n, const PodRequest& r) {
    return p.Evaluate(n, Shape(c_, r)).score.value;
  }
  ClusterState c_;
  TargetWorkload workload_;
  Rng rng_{1};
  NodeId big_ = -1;
};

TEST_F(PolicyTest, UnknownPolicyNamesTheKnownOnes) {
  auto p = MakePolicy("tetris", c_, workload_, PolicyOptions{}, &rng_);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("fgd"), std::string::npos);
  EXPECT_FALSE(MakePolicy("random", c_, workload_, PolicyOptions{}, nullptr).ok());
  EXPECT_EQ(PolicyNames().size(), 7u);
}

TEST_F(PolicyTest, DotProdPrefersTheSmallestDotProduct) {
  const NodeId a = Add(c_, Node("a", 64000, 8));
  const NodeId b = Add(c_, Node("b", 16000, 8));
  Book(c_, b, MakePodRequest(6000, 0, 6, 1000));  // b: 10000 CPU and 2000 GPU free
  auto p = Make("dotprod");
  const PodRequest pod = MakePodRequest(4000, 0, 1, 500);
  // a: 1 - (0.5*0.03125 + 1*0.0625)/2 = 0.9609 -> 96; b: 1 - (0.078125*0.03125 + 0.25*0.0625)/2
  // -> 99.
  EXPECT_EQ(ScoreOf(*p, a, pod), 96);
  EXPECT_EQ(ScoreOf(*p, b, pod), 99);
}

TEST_F(PolicyTest, ClusteringBands) {
  const NodeId empty = Add(c_, Node("empty", 96000, 8));
  const NodeId shares = Add(c_, Node("shares", 96000, 8));
  const NodeId mixed = Add(c_, Node("mixed", 96000, 8));
  const NodeId whole = Add(c_, Node("whole", 96000, 8));
  BookShare(c_, shares, 0, 500);
  BookShare(c_, mixed, 0, 500);
  Book(c_, mixed, MakePodRequest(1000, 0, 1, 1000));
  Book(c_, whole, MakePodRequest(1000, 0, 1, 1000));
  auto p = Make("clustering");
  const PodRequest share = MakePodRequest(1000, 0, 1, 300);
  EXPECT_EQ(ScoreOf(*p, shares, share), 75 + 25 * 500 / 8000);  // only this kind: (75, 100]
  EXPECT_EQ(ScoreOf(*p, mixed, share), 50 + 25 * 1500 / 8000);  // this kind among others
  EXPECT_EQ(ScoreOf(*p, empty, share), 25);                     // no GPU pods: (25, 50]
  EXPECT_EQ(ScoreOf(*p, whole, share), 25 * 1000 / 8000);       // only other kinds: (0, 25]
  EXPECT_EQ(ScoreOf(*p, whole, MakePodRequest(1000, 0, 1, 1000)), 75 + 25 * 1000 / 8000);
  EXPECT_EQ(ScoreOf(*p, shares, MakePodRequest(1000, 0, 0, 0)),
            0);  // CPU-only: the tie rule decides
}

TEST_F(PolicyTest, PackingOrder) {
  const NodeId n = Add(c_, Node("n", 96000, 4));
  BookShare(c_, n, 0, 800);  // free [200, 1000, 1000, 500]
  BookShare(c_, n, 3, 500);
  const NodeId idle8 = Add(c_, Node("idle8", 96000, 8));
  const NodeId idle1 = Add(c_, Node("idle1", 96000, 1));
  auto p = Make("packing");
  // The reference's own test: 2 GPUs x 200 go on GPUs with 200 and 500 free: 100 - (20+50)/10.
  PodRequest two;
  two.cpu_milli = 100;
  two.gpus = {GpuDemand{200, false}, GpuDemand{200, false}};
  EXPECT_EQ(ScoreOf(*p, n, two), 93);
  EXPECT_EQ(ScoreOf(*p, n, MakePodRequest(100, 0, 1, 450)), 100 - 50 / 10);  // shared GPU
  EXPECT_EQ(ScoreOf(*p, n, MakePodRequest(100, 0, 2, 1000)), 50 - 2);        // free GPUs, used node
  EXPECT_EQ(ScoreOf(*p, idle8, MakePodRequest(100, 0, 1, 1000)), 33 - 8);    // idle node
  EXPECT_EQ(ScoreOf(*p, idle1, MakePodRequest(100, 0, 1, 1000)), 33 - 1);    // smaller idle first
  EXPECT_EQ(ScoreOf(*p, n, MakePodRequest(100, 0, 0, 0)), 0);
}

TEST_F(PolicyTest, BestFitMinMaxNormalises) {
  const NodeId a = Add(c_, Node("a", 64000, 8));
  auto p = Make("bestfit");
  const PodRequest pod = MakePodRequest(4000, 0, 1, 1000);
  // raw = int(100 * (1 - (0.5 * 60000/128000 + 0.5 * 7000/8000))) = int(32.81) = 32
  EXPECT_EQ(ScoreOf(*p, a, pod), 32);
  ASSERT_TRUE(p->normalizes());
  std::vector<Score> s = {{80, 0}, {90, 0}, {100, 0}, {81, 0}};
  p->Normalize(s);
  EXPECT_EQ(s[0].value, 0);
  EXPECT_EQ(s[1].value, 50);
  EXPECT_EQ(s[2].value, 100);
  EXPECT_EQ(s[3].value, 5);  // integer division, as in the reference
  std::vector<Score> same = {{70, 0}, {70, 0}};
  p->Normalize(same);
  EXPECT_EQ(same[0].value, 0);
}

class FgdTest : public PolicyTest {
 protected:
  void SetUp() override {
    PolicyTest::SetUp();
    TargetShape share;
    share.cpu_milli = 1000;
    share.num_gpus = 1;
    share.share = 500;
    share.weight = 0.5;
    TargetShape whole;
    whole.cpu_milli = 8000;
    whole.num_gpus = 1;
    whole.whole = true;
    whole.weight = 0.5;
    workload_.shapes = {share, whole};
  }
};

TEST_F(FgdTest, SharingPodOnPartlyUsedGpus) {
  const NodeId n = Add(c_, Node("n", 32000, 2));
  BookShare(c_, n, 1, 400);  // free [1000, 600]; F = 0.5*0 + 0.5*600 = 300
  auto p = Make("fgd");
  const PodShape pod = Shape(c_, MakePodRequest(1000, 0, 1, 400));
  const NodeChoice ch = p->Evaluate(n, pod);
  // GPU 0 -> [600, 600]: F = 0 + 0.5*1200 = 600, delta +300, int(sigmoid(-0.3)*100) = 42.
  // GPU 1 -> [1000, 200]: F = 0.5*200 + 0.5*200 = 200, delta -100, int(sigmoid(0.1)*100) = 52.
  EXPECT_EQ(ch.score.value, 52);
  EXPECT_EQ(ch.gpus.gpu[0], 1);
  EXPECT_DOUBLE_EQ(ch.detail, -100);
}

TEST_F(FgdTest, WholeAndMultiGpuPods) {
  const NodeId n = Add(c_, Node("n", 32000, 2));
  BookShare(c_, n, 1, 400);
  auto p = Make("fgd");
  // [1000, 600] -> [0, 600]: F = 0.5*0 + 0.5*600 (no free GPU: all idle) = 300: delta 0 -> 50.
  const NodeChoice whole = p->Evaluate(n, Shape(c_, MakePodRequest(8000, 0, 1, 1000)));
  EXPECT_EQ(whole.score.value, 50);
  EXPECT_EQ(whole.gpus.gpu[0], 0);
  // A 2-GPU pod needs two entirely free GPUs on one node.
  const NodeId two = Add(c_, Node("two", 32000, 2));
  const NodeChoice multi = p->Evaluate(two, Shape(c_, MakePodRequest(8000, 0, 2, 1000)));
  EXPECT_EQ(multi.gpus.count, 2);
  EXPECT_EQ(CheckFit(c_.node(n), Shape(c_, MakePodRequest(8000, 0, 2, 1000))),
            Rejection::kWholeGpus);
}

TEST_F(FgdTest, CpuOnlyPodsThatStrandGpusScoreLower) {
  const NodeId tight = Add(c_, Node("tight", 10000, 1));
  const NodeId roomy = Add(c_, Node("roomy", 100000, 1));
  auto p = Make("fgd");
  const PodRequest cpu = MakePodRequest(4000, 0, 0, 0);
  // tight: 6000 CPU left < 8000 for the whole-GPU shape: its GPU is stranded, delta +500 -> 37.
  EXPECT_EQ(ScoreOf(*p, tight, cpu), 37);
  EXPECT_EQ(ScoreOf(*p, roomy, cpu), 50);
}

TEST_F(FgdTest, ModelConstrainedShapesSeeOtherModelsAsFragmented) {
  workload_.shapes[0].models = {"T4"};
  ResolveModels(workload_, c_);
  const NodeId t4 = Add(c_, Node("t4", 32000, 1, "T4"));
  ResolveModels(workload_, c_);
  auto p = Make("fgd");
  // On the T4 node a 500 share keeps the GPU usable by the T4-only 500 shape:
  // F: 0.5*0 + 0.5*0 -> 0.5*0 + 0.5*500: delta +250 -> int(sigmoid(-0.25)*100) = 43.
  EXPECT_EQ(ScoreOf(*p, t4, MakePodRequest(1000, 0, 1, 500)), 43);
  // On the G3 node the T4 shape has no access (all idle counts): F 0.5*8000 + 0 -> 0.5*7500 +
  // 0.5*500: delta 0 -> 50. FGD prefers leaving T4 capacity to T4-only pods.
  EXPECT_EQ(ScoreOf(*p, big_, MakePodRequest(1000, 0, 1, 500)), 50);
}

TEST_F(PolicyTest, RandomPicksUniformlyAmongFeasible) {
  auto p = Make("random");
  ASSERT_TRUE(p->picks());
  std::vector<NodeId> feasible = {3, 5, 9};
  std::vector<int> hits(3, 0);
  for (int i = 0; i < 3000; ++i) {
    const int k = p->Pick(feasible);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 3);
    ++hits[k];
  }
  for (int h : hits) EXPECT_GT(h, 850);
  const NodeId n = Add(c_, Node("n", 32000, 4));
  BookShare(c_, n, 2, 900);
  std::vector<int> gpu(4, 0);
  for (int i = 0; i < 400; ++i)
    ++gpu[p->Evaluate(n, Shape(c_, MakePodRequest(100, 0, 1, 500))).gpus.gpu[0]];
  EXPECT_EQ(gpu[2], 0);  // never a GPU without room
  EXPECT_GT(gpu[0], 80);
  EXPECT_GT(gpu[3], 80);
}

}  // namespace
}  // namespace gpushare::placement
