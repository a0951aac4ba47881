// core/memshare_reconcile.h: the observe step of memory mode's reconciler, with plain values.
#include "core/memshare_reconcile.h"

#include <gtest/gtest.h>

#include "core/memshare_node.h"
#include "tests/core/test_inventories.h"

namespace gpushare::memshare {
namespace {

using gpushare::testing::GpuUuid;
using Observed = std::map<std::string, std::vector<ObservedContainer>>;

PodRequest OneContainer(int64_t units) {
  PodRequest r;
  r.app.push_back({"main", units});
  return r;
}

std::vector<std::string> UnitsOf(int gpu, std::vector<int> js) {
  std::vector<std::string> out;
  for (int j : js) out.push_back(UnitDeviceId(GpuUuid(gpu), j));
  return out;
}

class PodReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) inventory_.gpus.push_back(gpushare::testing::WholeGpu(i, 24576));
    for (int i = 0; i < 2; ++i) desired_.gpus.push_back({i, GpuUuid(i), "A10", 24576, 24, true});
  }

  // A pod the scheduler bound to GPU `bound` asking for 3 units.
  CachedPod Bound(int bound, const std::string& rv = "1") {
    CachedPod p;
    p.request = OneContainer(3);
    p.annotations = BindAnnotations(*p.request, {bound}, 24, 1000);
    p.resource_version = rv;
    return p;
  }

  Observation Observe(const Observed& observed, const std::map<std::string, CachedPod>& cached) {
    return r_.Observe(observed, cached, inventory_, desired_);
  }

  Inventory inventory_;
  NodeInventory desired_;
  PodReconciler r_;
};

TEST_F(PodReconcilerTest, PatchesWhereKubeletDisagreesWithTheScheduler) {
  const Observed observed = {{"ns/a", {{"main", UnitsOf(1, {0, 1, 2})}}}};
  Observation ob = Observe(observed, {{"ns/a", Bound(0)}});
  ASSERT_EQ(ob.pods.size(), 1u);
  const PodDecision& d = ob.pods[0];
  EXPECT_EQ(d.verdict, PodVerdict::kPatch);
  EXPECT_EQ(d.actual, (ContainerGpus{{"main", 1}}));
  EXPECT_EQ(d.changes.at("ALIYUN_COM_GPU_MEM_IDX"), "1");
  EXPECT_EQ(d.changes.at("ALIYUN_COM_GPU_MEM_ASSIGNED"), "true");
  EXPECT_EQ(d.before.state, AssignmentState::kAssumed);
  EXPECT_EQ(d.before.gpus, (ContainerGpus{{"main", 0}}));
  EXPECT_EQ(ob.confirmed, 1);
  EXPECT_FALSE(ob.retry_soon);
}

TEST_F(PodReconcilerTest, AWrittenPatchIsNotWrittenAgainUntilTheCacheMoves) {
  const Observed observed = {{"ns/a", {{"main", UnitsOf(1, {0, 1, 2})}}}};
  Observation ob = Observe(observed, {{"ns/a", Bound(0, "7")}});
  r_.Written(ob.pods[0]);
  EXPECT_EQ(Observe(observed, {{"ns/a", Bound(0, "7")}}).pods[0].verdict, PodVerdict::kWritten);
  // Someone else changed the pod (a new resourceVersion still saying GPU 0): write again.
  EXPECT_EQ(Observe(observed, {{"ns/a", Bound(0, "9")}}).pods[0].verdict, PodVerdict::kPatch);
  // The cache caught up with our patch: nothing to do.
  CachedPod caught = Bound(0, "8");
  for (const auto& [k, v] : ob.pods[0].changes) caught.annotations[k] = v;
  EXPECT_EQ(Observe(observed, {{"ns/a", caught}}).pods[0].verdict, PodVerdict::kTruthful);
}

TEST_F(PodReconcilerTest, TruthfulPodsAreConfirmedWithoutPatch) {
  const Observed observed = {{"ns/a", {{"main", UnitsOf(0, {0, 1, 2})}}}};
  CachedPod p = Bound(0);
  for (const auto& [k, v] : ConfirmAnnotations(*p.request, {{"main", 0}})) p.annotations[k] = v;
  Observation ob = Observe(observed, {{"ns/a", p}});
  EXPECT_EQ(ob.pods[0].verdict, PodVerdict::kTruthful);
  EXPECT_EQ(ob.confirmed, 1);
}

TEST_F(PodReconcilerTest, PodsTheCacheLacksAreRetriedSoonForAWhile) {
  const Observed observed = {{"ns/ghost", {{"main", UnitsOf(0, {0})}}}};
  for (int round = 1; round <= PodReconciler::kMaxQuickRetries; ++round) {
    Observation ob = Observe(observed, {});
    EXPECT_EQ(ob.pods[0].verdict, PodVerdict::kNotCached);
    EXPECT_TRUE(ob.retry_soon) << "round " << round;
  }
  EXPECT_FALSE(Observe(observed, {}).retry_soon) << "gave up: a pod kubelet is still tearing down";
  // Once kubelet no longer lists it, it is forgotten: a new pod of the same name counts anew.
  Observe({}, {});
  EXPECT_TRUE(Observe(observed, {}).retry_soon);
}

TEST_F(PodReconcilerTest, IncompleteAndUnreadablePods) {
  PodRequest two;
  two.app = {{"main", 3}, {"side", 2}};
  CachedPod incomplete;
  incomplete.request = two;
  CachedPod unreadable;
  unreadable.request_error = "container main: request 2 differs from limit 3";
  const Observed observed = {{"ns/half", {{"main", UnitsOf(0, {0, 1, 2})}}},
                             {"ns/bad", {{"main", UnitsOf(1, {0})}}}};
  Observation ob = Observe(observed, {{"ns/half", incomplete}, {"ns/bad", unreadable}});
  ASSERT_EQ(ob.pods.size(), 2u);
  EXPECT_EQ(ob.pods[0].key, "ns/bad");
  EXPECT_EQ(ob.pods[0].verdict, PodVerdict::kUnreadable);
  EXPECT_EQ(ob.pods[0].problems, std::vector<std::string>{unreadable.request_error});
  EXPECT_EQ(ob.pods[1].verdict, PodVerdict::kIncomplete);
  EXPECT_TRUE(ob.retry_soon) << "kubelet is still admitting ns/half";
  EXPECT_EQ(ob.confirmed, 0);
}

TEST_F(PodReconcilerTest, ProblemsAreReported) {
  const Observed observed = {
      {"ns/a", {{"main", {UnitDeviceId(GpuUuid(0), 0), UnitDeviceId(GpuUuid(1), 0)}}}}};
  Observation ob = Observe(observed, {{"ns/a", Bound(0)}});
  ASSERT_FALSE(ob.pods[0].problems.empty());
  EXPECT_NE(ob.pods[0].problems[0].find("units span GPUs"), std::string::npos);
}

TEST_F(PodReconcilerTest, DevIsTheRealGpusUnits) {
  desired_.gpus[1].units = 80;
  const Observed observed = {{"ns/a", {{"main", UnitsOf(1, {0, 1, 2})}}}};
  Observation ob = Observe(observed, {{"ns/a", Bound(0)}});
  EXPECT_EQ(ob.pods[0].changes.at("ALIYUN_COM_GPU_MEM_DEV"), "80");
}

}  // namespace
}  // namespace gpushare::memshare
