#include "sim/dynamic.h"

#include <gtest/gtest.h>

#include "sim/experiment.h"

namespace gpushare::sim {
namespace {

TracePod Whole(const std::string& name, int64_t created, std::optional<int64_t> deleted) {
  TracePod p;
  p.name = name;
  p.num_gpu = 1;
  p.gpu_milli = 1000;
  p.request = placement::MakePodRequest(1000, 0, 1, 1000);
  p.creation_time = created;
  p.deletion_time = deleted;
  return p;
}

Workload OneGpu() {
  Workload w;
  w.name = "one";
  placement::NodeSpec n;
  n.name = "n";
  n.cpu_milli = 64000;
  n.memory_mib = 1 << 20;
  n.gpu_model = "G2";
  n.gpu_capacity = {1000};
  w.nodes = {n};
  return w;
}

TEST(DynamicTest, PodsWaitRunLaterOrFail) {
  Workload w = OneGpu();
  w.pods = {Whole("a", 0, 100),   // runs 0..100
            Whole("b", 10, 500),  // waits 10..100, runs 100..500
            Whole("c", 20, 50),   // waits, deleted at 50 without running: failed
            Whole("d", 600, {}),  // runs from 600 to the end
            Whole("z", 30, 30)};  // zero lifetime: skipped
  const auto typical = TypicalWorkload(w, 0.95);
  const DynamicResult r = RunDynamic(w, typical, "default", 1);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.pods, 4);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.placed_on_arrival, 2);
  EXPECT_EQ(r.waited, 1);
  EXPECT_EQ(r.failed, 1);
  EXPECT_DOUBLE_EQ(r.mean_wait_s, 90);
  EXPECT_DOUBLE_EQ(r.max_wait_s, 90);
  EXPECT_EQ(r.max_waiting, 2);
  // The replay spans 0..600; one GPU busy during 0..500.
  EXPECT_NEAR(r.time_weighted_alloc_pct, 100.0 * 500 / 600, 1e-9);
  // Requested by live pods: a 0..100, b 10..500, c 20..50.
  EXPECT_NEAR(r.time_weighted_demand_pct, 100.0 * (100 + 490 + 30) / 600, 1e-9);
  EXPECT_DOUBLE_EQ(r.peak_alloc_pct, 100);
  EXPECT_FALSE(r.samples.empty());
  EXPECT_NE(DynamicSummaryCsv({r}).find("default,1,83.333"), std::string::npos);
  EXPECT_NE(DynamicCsv({r}).find("policy,seed,time_s,allocated_pct,waiting_pods\ndefault,1,0,"),
            std::string::npos);
  EXPECT_NE(DynamicTable({r}).find("default"), std::string::npos);
}

TEST(DynamicTest, CreationTimesAreRequired) {
  Workload w = OneGpu();
  TracePod p = Whole("a", 0, 10);
  p.creation_time.reset();
  p.line = 7;
  w.pods = {p};
  const DynamicResult r = RunDynamic(w, TypicalWorkload(w, 0.95), "fgd", 1);
  EXPECT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("line 7"), std::string::npos);
}

TEST(DynamicTest, ExperimentRunsEveryPolicyAndSeed) {
  Workload w = OneGpu();
  w.pods = {Whole("a", 0, 100), Whole("b", 10, 500)};
  const auto runs = RunDynamicExperiment(w, {"fgd", "bestfit"}, {1, 2}, 2, nullptr);
  ASSERT_EQ(runs.size(), 4u);
  for (const auto& r : runs) {
    EXPECT_TRUE(r.status.ok());
    EXPECT_EQ(r.waited, 1);
  }
}

}  // namespace
}  // namespace gpushare::sim
