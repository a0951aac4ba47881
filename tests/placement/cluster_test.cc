#include "core/placement/cluster.h"

#include <gtest/gtest.h>

#include "tests/placement/test_cluster.h"

namespace gpushare::placement {
namespace {

using testing::Add;
using testing::Node;
using testing::Shape;

TEST(ClusterStateTest, AddNodeValidates) {
  ClusterState c;
  EXPECT_TRUE(c.AddNode(Node("a", 8000, 2)).ok());
  EXPECT_EQ(c.AddNode(Node("a", 8000, 2)).status().code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(c.AddNode(Node("", 8000, 2)).ok());
  EXPECT_FALSE(c.AddNode(Node("big", 8000, kMaxGpusPerNode + 1)).ok());
  NodeSpec zero = Node("zero", 8000, 1);
  zero.gpu_capacity[0] = 0;
  EXPECT_FALSE(c.AddNode(zero).ok());
  NodeSpec nomodel = Node("nomodel", 8000, 1);
  nomodel.gpu_model.clear();
  EXPECT_FALSE(c.AddNode(nomodel).ok());
  NodeSpec neg = Node("neg", -1, 1);
  EXPECT_FALSE(c.AddNode(neg).ok());
  EXPECT_EQ(c.num_nodes(), 1);
  EXPECT_EQ(c.FindNode("a"), 0);
  EXPECT_EQ(c.FindNode("b"), -1);
  EXPECT_EQ(c.total_gpus(), 2);
  EXPECT_EQ(c.gpu_capacity_total(), 2000);
}

TEST(ClusterStateTest, CommitAndReleaseRoundTrip) {
  ClusterState c;
  const NodeId n = Add(c, Node("a", 16000, 4));
  const NodeState before = c.node(n);
  PodShape share = Shape(c, MakePodRequest(2000, 1024, 1, 300));
  GpuAssignment on2;
  on2.Add(2);
  auto id = c.Commit(share.resources(), n, on2);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const NodeState& s = c.node(n);
  EXPECT_EQ(s.cpu_free, 14000);
  EXPECT_EQ(s.mem_free, before.mem_free - 1024);
  EXPECT_EQ(s.gpu_free[2], 700);
  EXPECT_EQ(s.gpu_clients[2], 1);
  EXPECT_EQ(s.fully_free_gpus, 3);
  EXPECT_EQ(s.kind_pods[kShareKind], 1);
  EXPECT_EQ(s.kinds_present, 1);
  EXPECT_GT(s.version, before.version);
  EXPECT_EQ(c.gpu_free_total(), 3700);
  EXPECT_EQ(c.PlacementNode(*id), n);

  ASSERT_TRUE(c.Release(*id).ok());
  EXPECT_EQ(c.node(n).cpu_free, before.cpu_free);
  EXPECT_EQ(c.node(n).gpu_free, before.gpu_free);
  EXPECT_EQ(c.node(n).fully_free_gpus, 4);
  EXPECT_EQ(c.node(n).kinds_present, 0);
  EXPECT_EQ(c.gpu_free_total(), 4000);
  EXPECT_EQ(c.live_placements(), 0);
  EXPECT_EQ(c.Release(*id).code(), StatusCode::kNotFound);  // twice
}

TEST(ClusterStateTest, StaleHandleNeverReleasesANewerPod) {
  ClusterState c;
  const NodeId n = Add(c, Node("a", 16000, 2));
  PodShape whole = Shape(c, MakePodRequest(1000, 0, 1, 1000));
  GpuAssignment g0;
  g0.Add(0);
  auto first = c.Commit(whole.resources(), n, g0);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(c.Release(*first).ok());
  auto second = c.Commit(whole.resources(), n, g0);  // reuses the slot
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*first, *second);
  EXPECT_FALSE(c.Release(*first).ok());
  EXPECT_EQ(c.node(n).gpu_free[0], 0);
  EXPECT_TRUE(c.Release(*second).ok());
}

TEST(ClusterStateTest, OverCommitIsRefusedWithoutPartialChanges) {
  ClusterState c;
  NodeSpec spec = Node("a", 4000, 2, "T4", 1000, 8192);
  spec.max_clients_per_gpu = 2;
  const NodeId n = Add(c, spec);
  GpuAssignment g0;
  g0.Add(0);
  GpuAssignment g1;
  g1.Add(1);
  const NodeState before = c.node(n);
  EXPECT_EQ(c.Commit(Shape(c, MakePodRequest(5000, 0, 1, 100)).resources(), n, g0).status().code(),
            StatusCode::kResourceExhausted);  // CPU
  EXPECT_EQ(
      c.Commit(Shape(c, MakePodRequest(100, 9000, 1, 100)).resources(), n, g0).status().code(),
      StatusCode::kResourceExhausted);  // memory
  EXPECT_EQ(c.node(n).version, before.version);
  ASSERT_TRUE(c.Commit(Shape(c, MakePodRequest(100, 0, 1, 600)).resources(), n, g0).ok());
  EXPECT_FALSE(
      c.Commit(Shape(c, MakePodRequest(100, 0, 1, 500)).resources(), n, g0).ok());  // share
  EXPECT_FALSE(
      c.Commit(Shape(c, MakePodRequest(100, 0, 1, 1000)).resources(), n, g0).ok());  // not free
  ASSERT_TRUE(c.Commit(Shape(c, MakePodRequest(100, 0, 1, 100)).resources(), n, g0).ok());
  const NodeState mid = c.node(n);
  EXPECT_FALSE(
      c.Commit(Shape(c, MakePodRequest(100, 0, 1, 100)).resources(), n, g0).ok());  // 2 clients
  EXPECT_EQ(c.node(n).gpu_free, mid.gpu_free);
  EXPECT_EQ(c.node(n).cpu_free, mid.cpu_free);
  // Wrong assignments.
  GpuAssignment bad;
  bad.Add(7);
  EXPECT_FALSE(c.Commit(Shape(c, MakePodRequest(100, 0, 1, 100)).resources(), n, bad).ok());
  GpuAssignment twice;
  twice.Add(1);
  twice.Add(1);
  EXPECT_FALSE(c.Commit(Shape(c, MakePodRequest(100, 0, 2, 1000)).resources(), n, twice).ok());
  EXPECT_FALSE(
      c.Commit(Shape(c, MakePodRequest(100, 0, 2, 1000)).resources(), n, g1).ok());  // count
  EXPECT_EQ(c.node(n).gpu_free, mid.gpu_free);
  EXPECT_FALSE(c.Commit(Shape(c, MakePodRequest(100, 0, 1, 100)).resources(), 9, g1).ok());
}

TEST(ClusterStateTest, PodLimitAndHeterogeneousGpus) {
  ClusterState c;
  NodeSpec spec = Node("mixed", 64000, 0);
  spec.gpu_model = "mixed";
  spec.gpu_capacity = {81920, 24576};  // MiB: an 80 GB and a 24 GB GPU
  spec.max_pods = 1;
  const NodeId n = Add(c, spec);
  EXPECT_EQ(c.node(n).gpu_capacity_total, 81920 + 24576);
  GpuAssignment g1;
  g1.Add(1);
  ASSERT_TRUE(
      c.Commit(Shape(c, MakePodRequest(100, 0, 1, 3072, "", 1 << 30)).resources(), n, g1).ok());
  EXPECT_EQ(c.node(n).gpu_free[1], 24576 - 3072);
  EXPECT_EQ(c.node(n).max_share_free, 81920);
  auto again = c.Commit(Shape(c, MakePodRequest(100, 0, 1, 3072, "", 1 << 30)).resources(), n, g1);
  EXPECT_EQ(again.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(again.status().message().find("pod limit"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::placement
