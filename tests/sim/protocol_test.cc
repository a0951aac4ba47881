#include <gtest/gtest.h>

#include <algorithm>

#include "sim/experiment.h"

namespace gpushare::sim {
namespace {

TracePod Pod(const std::string& name, int num_gpu, int64_t milli, int64_t cpu = 1000) {
  TracePod p;
  p.name = name;
  p.num_gpu = num_gpu;
  p.gpu_milli = milli;
  p.request = placement::MakePodRequest(cpu, 0, num_gpu, milli);
  return p;
}

std::vector<std::string> Names(const std::vector<TracePod>& pods, const std::vector<int>& order) {
  std::vector<std::string> n;
  for (int i : order) n.push_back(pods[i].name);
  return n;
}

TEST(ProtocolTest, ShuffleStartsFromNameOrderAndDependsOnlyOnTheSeed) {
  std::vector<TracePod> a, b;
  for (int i = 0; i < 50; ++i) a.push_back(Pod("pod-" + std::to_string(100 + i), 1, 1000));
  b = a;
  std::reverse(b.begin(), b.end());
  placement::Rng r1(42), r2(42), r3(43);
  const auto n1 = Names(a, ShuffledOrder(a, r1));
  const auto n2 = Names(b, ShuffledOrder(b, r2));
  EXPECT_EQ(n1, n2);  // the file order does not matter
  EXPECT_NE(n1, Names(a, ShuffledOrder(a, r3)));
  std::vector<std::string> sorted = n1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Names(a, [] {
              std::vector<int> v(50);
              for (int i = 0; i < 50; ++i) v[i] = i;
              return v;
            }()));
}

TEST(ProtocolTest, InflationStopsWithTheReferencesPerGpuQuirk) {
  // One 8-GPU pod on a 10-GPU cluster, tune 1.3 (target 13000): the stop test adds the per-GPU
  // 1000 (8000 + 1000 <= 13000, so one copy is appended) while the total adds 8000 (16000).
  std::vector<TracePod> pods = {Pod("big", 8, 1000)};
  placement::Rng rng(1);
  const auto order = TuneOrder({0}, pods, 10000, 1.3, rng);
  EXPECT_EQ(order, (std::vector<int>{0, 0}));
  // Plain inflation: 1-GPU pods up to exactly the target.
  std::vector<TracePod> ones = {Pod("a", 1, 1000), Pod("b", 0, 0)};
  placement::Rng r2(2);
  const auto up = TuneOrder({0, 1}, ones, 10000, 1.3, r2);
  int64_t total = 0;
  for (int i : up) total += ones[i].gpu_demand();
  EXPECT_EQ(total, 13000);
  EXPECT_EQ(up[0], 0);  // the originals stay first, in their order
  EXPECT_EQ(up[1], 1);
}

TEST(ProtocolTest, DeflationRemovesUniformlyUntilWithinTheTarget) {
  std::vector<TracePod> pods;
  std::vector<int> order;
  for (int i = 0; i < 40; ++i) {
    pods.push_back(Pod("p" + std::to_string(i), 1, 1000));
    order.push_back(i);
  }
  placement::Rng rng(5);
  const auto down = TuneOrder(order, pods, 20000, 1.3, rng);
  EXPECT_EQ(down.size(), 26u);
  EXPECT_TRUE(std::is_sorted(down.begin(), down.end()));  // removal keeps the order
  placement::Rng r2(5);
  EXPECT_EQ(TuneOrder(order, pods, 20000, 0, r2), order);  // tune <= 0: unchanged
  std::vector<TracePod> cpu = {Pod("c", 0, 0)};
  EXPECT_EQ(TuneOrder({0}, cpu, 1000, 1.3, r2), (std::vector<int>{0}));  // no GPU demand: no loop
}

TEST(ProtocolTest, TieRanksArePermutationsKeyedByName) {
  std::vector<placement::NodeSpec> nodes(5);
  for (int i = 0; i < 5; ++i) nodes[i].name = "n" + std::to_string(i);
  std::vector<placement::NodeSpec> reversed(nodes.rbegin(), nodes.rend());
  placement::Rng a(7), b(7);
  const auto ra = TieRanks(nodes, a);
  const auto rb = TieRanks(reversed, b);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(ra[i], rb[4 - i]);
  std::vector<int64_t> sorted = ra;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(ProtocolTest, BinningRoundsHalfToEvenAndFallsBackToNeighbours) {
  // Capacity 1000: arrived 5 is 0.5% (bin 0), 15 is 1.5% (bin 2), 25 is 2.5% (bin 2), 45 is 4.5%
  // (bin 4).
  std::vector<Sample> s = {{5, 4, 0}, {15, 10, 0}, {25, 20, 0}, {45, 40, 0}};
  const auto c = BinSamples(s, 1000, 6);
  ASSERT_EQ(c.size(), 7u);
  EXPECT_TRUE(c[0].present);
  EXPECT_DOUBLE_EQ(c[0].allocated_pct, 0.4);
  EXPECT_TRUE(c[1].present);                   // empty: the mean of bins 0 and 2
  EXPECT_DOUBLE_EQ(c[1].allocated_pct, 1.13);  // (0.4 + 1.0 + 2.0) / 3 rounded to 0.01
  EXPECT_DOUBLE_EQ(c[2].allocated_pct, 1.5);
  EXPECT_DOUBLE_EQ(c[2].unallocated_pct, 98.5);
  EXPECT_DOUBLE_EQ(c[3].allocated_pct, 2.33);  // neighbours 2 and 4: (1 + 2 + 4) / 3
  EXPECT_DOUBLE_EQ(c[4].allocated_pct, 4.0);
  EXPECT_TRUE(c[5].present);
  EXPECT_FALSE(c[6].present);
}

TEST(ProtocolTest, FailedPodsCountAsArrived) {
  Workload w;
  w.name = "tiny";
  placement::NodeSpec n;
  n.name = "only";
  n.cpu_milli = 64000;
  n.memory_mib = 1 << 20;
  n.gpu_model = "G2";
  n.gpu_capacity = {1000};
  w.nodes = {n};
  w.pods = {Pod("a", 1, 1000), Pod("b", 1, 1000), Pod("c", 1, 1000)};
  const auto typical = TypicalWorkload(w, 0.95);
  const RunResult r = RunOne(w, typical, "fgd", 1, 0);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.pods_submitted, 3);
  EXPECT_EQ(r.pods_failed, 2);
  EXPECT_EQ(r.failed_gpu_demand, 2000);
  ASSERT_EQ(r.curve.size(), 301u);  // arrived reaches 300% of the one GPU
  EXPECT_TRUE(r.curve[300].present);
  EXPECT_DOUBLE_EQ(r.curve[300].allocated_pct, 100);
  EXPECT_DOUBLE_EQ(r.curve[100].unallocated_pct, 0);
  EXPECT_FALSE(RunOne(w, typical, "nosuch", 1, 0).status.ok());
}

TEST(ProtocolTest, RunsAreReproducibleAndParallelRunsMatchSerialOnes) {
  Workload w;
  w.name = "small";
  for (int i = 0; i < 6; ++i) {
    placement::NodeSpec n;
    n.name = "n" + std::to_string(i);
    n.cpu_milli = 32000;
    n.memory_mib = 1 << 20;
    n.gpu_model = i % 2 ? "T4" : "G2";
    n.gpu_capacity.assign(4, 1000);
    w.nodes.push_back(n);
  }
  const int64_t shares[] = {810, 470, 320, 1000, 650, 230, 1000};
  for (int i = 0; i < 60; ++i)
    w.pods.push_back(Pod("p" + std::to_string(i), 1, shares[i % 7], 1000 + 500 * (i % 5)));
  w.pods.push_back(Pod("multi", 4, 1000));
  const auto typical = TypicalWorkload(w, 0.95);
  ExperimentOptions o;
  o.policies = {"fgd", "default", "random"};
  o.seeds = {1, 2};
  o.jobs = 3;
  int calls = 0;
  o.progress = [&](int done, int total) {
    ++calls;
    EXPECT_LE(done, total);
  };
  const auto runs = RunExperiment(w, o);
  ASSERT_EQ(runs.size(), 6u);
  EXPECT_EQ(calls, 6);
  for (const auto& r : runs) {
    ASSERT_TRUE(r.status.ok());
    const RunResult again = RunOne(w, typical, r.policy, r.seed, o.tune);
    ASSERT_EQ(again.curve.size(), r.curve.size());
    for (size_t i = 0; i < r.curve.size(); ++i)
      EXPECT_EQ(again.curve[i].allocated_pct, r.curve[i].allocated_pct);
  }
  const auto summary = Summarize(runs);
  ASSERT_FALSE(summary.empty());
  EXPECT_EQ(summary.front().policy, "fgd");
  int both = 0;
  for (const auto& p : summary) both += p.runs == 2;
  EXPECT_GT(both, 50);  // most bins have a sample from both seeds
}

TEST(ProtocolTest, MedianAndOptionParsing) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({}), 0);
  EXPECT_EQ(*ParseSeeds("42-45"), (std::vector<uint64_t>{42, 43, 44, 45}));
  EXPECT_EQ(*ParseSeeds("1,5-6,1"), (std::vector<uint64_t>{1, 5, 6}));
  EXPECT_FALSE(ParseSeeds("5-1").ok());
  EXPECT_FALSE(ParseSeeds("x").ok());
  EXPECT_FALSE(ParseSeeds("").ok());
  EXPECT_EQ(ParsePolicies("all")->size(), 7u);
  EXPECT_EQ(*ParsePolicies("fgd,default,fgd"), (std::vector<std::string>{"fgd", "default"}));
  EXPECT_NE(ParsePolicies("fgd,tetris").status().message().find("unknown policy 'tetris'"),
            std::string::npos);
}

}  // namespace
}  // namespace gpushare::sim
