#include "sim/generator.h"

#include <gtest/gtest.h>

#include <set>

namespace gpushare::sim {
namespace {

TEST(GeneratorTest, DeterministicMixedAndSized) {
  const Workload a = GenerateDefaultWorkload();
  const Workload b = GenerateDefaultWorkload();
  ASSERT_EQ(a.pods.size(), b.pods.size());
  for (size_t i = 0; i < a.pods.size(); ++i) {
    EXPECT_EQ(a.pods[i].name, b.pods[i].name);
    EXPECT_EQ(a.pods[i].gpu_demand(), b.pods[i].gpu_demand());
  }
  GeneratorOptions o;
  o.seed = 7;
  EXPECT_NE(GenerateDefaultWorkload(o).pods.size(), 0u);
  EXPECT_EQ(a.nodes.size(), 120u);
  std::set<int64_t> capacities;
  int64_t capacity = 0;
  for (const auto& n : a.nodes)
    for (int64_t c : n.gpu_capacity) {
      capacities.insert(c);
      capacity += c;
    }
  EXPECT_GE(capacities.size(), 3u);  // GPUs of different memory sizes
  int knative = 0, cpu_only = 0, multi = 0;
  double demand = 0;
  for (const auto& p : a.pods) {
    demand += static_cast<double>(p.gpu_demand());
    if (!p.request.gpus.empty() && !p.request.gpus[0].whole && p.request.gpus[0].share == 3072)
      ++knative;
    if (p.request.gpus.empty()) ++cpu_only;
    if (p.request.gpus.size() > 1) ++multi;
    ASSERT_TRUE(p.creation_time && p.deletion_time);
    EXPECT_LT(*p.creation_time, *p.deletion_time);
  }
  EXPECT_GT(knative, 50);
  EXPECT_GT(cpu_only, 50);
  EXPECT_GT(multi, 3);
  EXPECT_NEAR(demand / static_cast<double>(capacity), 0.8, 0.05);
}

TEST(GeneratorTest, SharingNeedsFewerGpusThanWholeGpus) {
  const Workload w = GenerateDefaultWorkload();
  auto c = CompareSharing(w, "default", 42);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  int64_t gpus = 0;
  for (const auto& p : w.pods) gpus += static_cast<int64_t>(p.request.gpus.size());
  EXPECT_EQ(c->whole_gpus_needed, gpus);
  EXPECT_EQ(c->shared.placed + c->shared.failed, c->pods);
  EXPECT_LE(c->shared.gpus_in_use, c->cluster_gpus);
  EXPECT_LT(c->shared.gpus_in_use, c->whole_gpus_needed);
  EXPECT_GT(c->whole.failed, c->shared.failed);
  const std::string report = SharingReport(*c, "default");
  EXPECT_NE(report.find("whole GPUs only"), std::string::npos);
  EXPECT_FALSE(CompareSharing(w, "nosuch", 1).ok());
}

}  // namespace
}  // namespace gpushare::sim
