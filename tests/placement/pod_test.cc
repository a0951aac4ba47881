#include "core/placement/pod.h"

#include <gtest/gtest.h>

#include "tests/placement/test_cluster.h"

namespace gpushare::placement {
namespace {

using testing::Add;
using testing::BookShare;
using testing::Node;
using testing::Shape;

TEST(PodTest, MakePodRequestFollowsTheTraceEncoding) {
  PodRequest share = MakePodRequest(3150, 100, 1, 810);
  ASSERT_EQ(share.gpus.size(), 1u);
  EXPECT_FALSE(share.gpus[0].whole);
  EXPECT_EQ(share.gpus[0].share, 810);
  PodRequest whole = MakePodRequest(88000, 0, 8, 1000, "V100M16|V100M32||V100M32");
  ASSERT_EQ(whole.gpus.size(), 8u);
  EXPECT_TRUE(whole.gpus[7].whole);
  EXPECT_EQ(whole.gpu_models, (std::vector<std::string>{"V100M16", "V100M32", "V100M32"}));
  EXPECT_TRUE(MakePodRequest(12500, 0, 0, 0).gpus.empty());
}

TEST(PodTest, CompileValidates) {
  ClusterState c;
  Add(c, Node("a", 8000, 2));
  PodRequest bad = MakePodRequest(-1, 0, 1, 100);
  EXPECT_FALSE(CompileShape(bad, c).ok());
  PodRequest zero;
  zero.gpus.push_back(GpuDemand{0, false});
  EXPECT_FALSE(CompileShape(zero, c).ok());
  EXPECT_FALSE(CompileShape(MakePodRequest(0, 0, kMaxGpusPerNode + 1, 1000), c).ok());
  PodShape s = Shape(c, MakePodRequest(100, 0, 4, 1000));
  EXPECT_EQ(s.num_whole, 4);
  EXPECT_EQ(s.kind, 4);
  EXPECT_EQ(Shape(c, MakePodRequest(100, 0, 1, 100)).kind, kShareKind);
  EXPECT_EQ(Shape(c, MakePodRequest(100, 0, 0, 0)).kind, -1);
}

TEST(PodTest, CheckFitGivesOneReasonPerRefusal) {
  ClusterState c;
  const NodeId g2 = Add(c, Node("g2", 8000, 2, "G2", 1000, 4096));
  const NodeId cpu = Add(c, Node("cpu", 8000, 0));
  BookShare(c, g2, 0, 900);
  BookShare(c, g2, 1, 500);
  const NodeState& s = c.node(g2);
  EXPECT_EQ(CheckFit(s, Shape(c, MakePodRequest(9000, 0, 0, 0))), Rejection::kCpu);
  EXPECT_EQ(CheckFit(s, Shape(c, MakePodRequest(100, 5000, 0, 0))), Rejection::kMemory);
  EXPECT_EQ(CheckFit(s, Shape(c, MakePodRequest(100, 0, 1, 1000))), Rejection::kWholeGpus);
  EXPECT_EQ(CheckFit(s, Shape(c, MakePodRequest(100, 0, 1, 600))), Rejection::kGpuShare);
  EXPECT_EQ(CheckFit(s, Shape(c, MakePodRequest(100, 0, 1, 500))), Rejection::kNone);
  EXPECT_EQ(CheckFit(s, Shape(c, MakePodRequest(100, 0, 1, 100, "T4"))), Rejection::kGpuModel);
  EXPECT_EQ(CheckFit(c.node(cpu), Shape(c, MakePodRequest(100, 0, 1, 100))), Rejection::kNoGpus);
  // CPU-only pods ignore model constraints and fit GPU and CPU nodes alike.
  EXPECT_EQ(CheckFit(c.node(cpu), Shape(c, MakePodRequest(100, 0, 0, 0, "T4"))), Rejection::kNone);
  EXPECT_EQ(CheckFit(s, Shape(c, MakePodRequest(100, 0, 0, 0))), Rejection::kNone);
  const std::string why = ExplainRejection(s, Shape(c, MakePodRequest(9000, 0, 0, 0)), c);
  EXPECT_NE(why.find("8000m free, 9000m requested"), std::string::npos) << why;
  const std::string model =
      ExplainRejection(s, Shape(c, MakePodRequest(100, 0, 1, 100, "T4|V100M16")), c);
  EXPECT_NE(model.find("G2 not in allowed models T4|V100M16"), std::string::npos) << model;
}

TEST(PodTest, ClientCeilingIsAReasonOfItsOwn) {
  ClusterState c;
  NodeSpec spec = Node("a", 64000, 1);
  spec.max_clients_per_gpu = 2;
  const NodeId n = Add(c, spec);
  BookShare(c, n, 0, 100);
  BookShare(c, n, 0, 100);
  EXPECT_EQ(CheckFit(c.node(n), Shape(c, MakePodRequest(100, 0, 1, 100))), Rejection::kClientLimit);
}

TEST(PodTest, ModelListsMatchTheReference) {
  ClusterState c;
  const NodeId v = Add(c, Node("v", 64000, 4, "V100M32"));
  EXPECT_EQ(
      CheckFit(c.node(v), Shape(c, MakePodRequest(100, 0, 1, 500, "V100M16|V100M32|V100M32"))),
      Rejection::kNone);
  EXPECT_EQ(CheckFit(c.node(v), Shape(c, MakePodRequest(100, 0, 1, 500, "||"))),
            Rejection::kNone);  // no model
  EXPECT_EQ(CheckFit(c.node(v), Shape(c, MakePodRequest(100, 0, 1, 500, "A100"))),
            Rejection::kGpuModel);
  // A model added later resolves once shapes are re-resolved.
  PodShape later = Shape(c, MakePodRequest(100, 0, 1, 500, "A100"));
  const NodeId a = Add(c, Node("a100", 64000, 1, "A100"));
  EXPECT_EQ(CheckFit(c.node(a), later), Rejection::kGpuModel);
  ResolveModels(later, c);
  EXPECT_EQ(CheckFit(c.node(a), later), Rejection::kNone);
}

TEST(PodTest, BestFitPicksTheTightestGpuAndLowestFreeGpus) {
  ClusterState c;
  const NodeId n = Add(c, Node("a", 64000, 4));
  BookShare(c, n, 1, 600);  // GPU 1: 400 free
  BookShare(c, n, 3, 300);  // GPU 3: 700 free
  GpuAssignment a;
  ASSERT_TRUE(BestFitAssignment(c.node(n), Shape(c, MakePodRequest(100, 0, 1, 350)), &a));
  EXPECT_EQ(a.count, 1);
  EXPECT_EQ(a.gpu[0], 1);
  ASSERT_TRUE(BestFitAssignment(c.node(n), Shape(c, MakePodRequest(100, 0, 1, 500)), &a));
  EXPECT_EQ(a.gpu[0], 3);
  // Multi-GPU pods need entirely free GPUs on one node: the lowest-indexed ones.
  ASSERT_TRUE(BestFitAssignment(c.node(n), Shape(c, MakePodRequest(100, 0, 2, 1000)), &a));
  EXPECT_EQ(a.count, 2);
  EXPECT_EQ(a.gpu[0], 0);
  EXPECT_EQ(a.gpu[1], 2);
  EXPECT_FALSE(BestFitAssignment(c.node(n), Shape(c, MakePodRequest(100, 0, 3, 1000)), &a));
  EXPECT_EQ(CheckFit(c.node(n), Shape(c, MakePodRequest(100, 0, 3, 1000))), Rejection::kWholeGpus);
}

TEST(PodTest, SeveralContainersMayShareOrSpreadGpus) {
  ClusterState c;
  const NodeId n = Add(c, Node("a", 64000, 2, "A10", 24576));
  PodRequest r;
  r.cpu_milli = 100;
  r.gpus = {GpuDemand{8192, false}, GpuDemand{8192, false}, GpuDemand{8192, false}};
  r.distinct_gpus = false;
  GpuAssignment a;
  ASSERT_TRUE(BestFitAssignment(c.node(n), Shape(c, r), &a));
  EXPECT_EQ(a.count, 3);
  r.distinct_gpus = true;
  EXPECT_EQ(CheckFit(c.node(n), Shape(c, r)), Rejection::kGpuShare);  // three distinct GPUs needed
  r.gpus.pop_back();
  ASSERT_TRUE(BestFitAssignment(c.node(n), Shape(c, r), &a));
  EXPECT_NE(a.gpu[0], a.gpu[1]);
}

TEST(PodTest, ForEachAssignmentSkipsIdenticalGpus) {
  ClusterState c;
  const NodeId n = Add(c, Node("a", 64000, 4));
  BookShare(c, n, 2, 500);
  std::vector<int> seen;
  ForEachAssignment(c.node(n), Shape(c, MakePodRequest(100, 0, 1, 300)),
                    [&](const GpuAssignment& a) { seen.push_back(a.gpu[0]); });
  EXPECT_EQ(seen, (std::vector<int>{0, 2}));  // one free GPU stands for the three identical ones
  int whole = 0;
  ForEachAssignment(c.node(n), Shape(c, MakePodRequest(100, 0, 3, 1000)),
                    [&](const GpuAssignment&) { ++whole; });
  EXPECT_EQ(whole, 1);
  const NodeState after = Apply(c.node(n), Shape(c, MakePodRequest(100, 0, 3, 1000)), [&] {
    GpuAssignment a;
    BestFitAssignment(c.node(n), Shape(c, MakePodRequest(100, 0, 3, 1000)), &a);
    return a;
  }());
  EXPECT_EQ(after.fully_free_gpus, 0);
  EXPECT_EQ(after.gpu_free_total, 500);
}

}  // namespace
}  // namespace gpushare::placement
