// A short simulation of the real Alibaba trace (../shared/data), checked against the reference.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/placement/engine.h"
#include "sim/experiment.h"
#include "sim/trace.h"

namespace gpushare::sim {
namespace {

const std::string kTrace = std::string(GPUSHARE_SHARED_DIR) + "/data/alibaba-gpu-v2023";
const std::string kReference = std::string(GPUSHARE_SHARED_DIR) + "/data/fgd-reference";

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string nodes = kTrace + "/openb_node_list_gpu_node.csv";
    const std::string pods = kTrace + "/openb_pod_list_default.csv";
    if (!Exists(nodes) || !Exists(pods)) GTEST_SKIP() << "SKIPPED: " << kTrace << " absent";
    auto w = LoadWorkload(nodes, pods);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    w_ = std::move(w).value();
  }
  Workload w_;
};

TEST_F(TraceTest, TheDefaultTraceAsTheReferenceDescribesIt) {
  EXPECT_EQ(w_.nodes.size(), 1213u);
  int gpus = 0;
  for (const auto& n : w_.nodes) gpus += static_cast<int>(n.gpu_capacity.size());
  EXPECT_EQ(gpus, 6212);
  EXPECT_EQ(w_.pods.size(), 8152u);
  int64_t demand = 0, cpu_only = 0;
  for (const auto& p : w_.pods) {
    demand += p.gpu_demand();
    cpu_only += p.num_gpu == 0;
  }
  EXPECT_EQ(demand, 6086800);
  EXPECT_EQ(cpu_only, 1088);
}

TEST_F(TraceTest, TypicalPodsMatchTheAuthorsList) {
  const std::string path = kReference + "/typical_pods_default.txt";
  if (!Exists(path)) GTEST_SKIP() << "SKIPPED: " << path << " absent";
  const auto typical = TypicalWorkload(w_, 0.95);
  EXPECT_EQ(typical.distinct_shapes, 91);
  EXPECT_NEAR(typical.coverage, 0.9526, 5e-5);
  std::ifstream in(path);
  std::string line;
  const std::regex row(
      R"(\[\s*(\d+)\] cpu=\s*([\d.]+) num_gpu=(\d+) gpu_milli=\s*(\d+) type='([^']*)'\s+count=\s*(\d+) p_raw=[\d.]+ p_renorm=([\d.]+))");
  size_t rows = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const size_t i = std::stoul(m[1]);
    ASSERT_LT(i, typical.shapes.size());
    const auto& s = typical.shapes[i];
    EXPECT_NEAR(static_cast<double>(s.cpu_milli), std::stod(m[2]) * 1000, 5.0)
        << line;  // printed in cores, 2 decimals
    EXPECT_EQ(s.num_gpus, std::stoi(m[3])) << line;
    EXPECT_EQ(s.whole ? 1000 : s.share, s.num_gpus == 0 ? 0 : std::stoll(m[4])) << line;
    EXPECT_EQ(s.count, std::stoll(m[6])) << line;
    EXPECT_NEAR(s.weight, std::stod(m[7]), 5e-5) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 35u);
  EXPECT_EQ(typical.shapes.size(), 35u);
}

TEST_F(TraceTest, AShortRunStaysOnTheIdealLine) {
  // The first 2000 pods of seed 42's order (about a quarter of the capacity): every policy
  // places everything, so allocated equals arrived.
  const auto typical = TypicalWorkload(w_, 0.95);
  for (const std::string policy : {"fgd", "default"}) {
    placement::ClusterState cluster;
    for (const auto& n : w_.nodes) ASSERT_TRUE(cluster.AddNode(n).ok());
    placement::Rng rng(42);
    std::vector<int> order = ShuffledOrder(w_.pods, rng);
    order.resize(2000);
    const auto ranks = TieRanks(w_.nodes, rng);
    for (int i = 0; i < cluster.num_nodes(); ++i) cluster.set_tie_rank(i, ranks[i]);
    auto p = placement::MakePolicy(policy, cluster, typical, placement::PolicyOptions{}, &rng);
    ASSERT_TRUE(p.ok());
    placement::PlacementEngine engine(cluster, **p);
    int64_t arrived = 0;
    for (int i : order) {
      auto id = engine.Intern(w_.pods[i].request);
      ASSERT_TRUE(id.ok());
      const auto d = engine.Choose(*id);
      ASSERT_TRUE(d.placed()) << policy << ": " << engine.Explain(*id, d);
      ASSERT_TRUE(engine.Commit(*id, d).ok());
      arrived += w_.pods[i].gpu_demand();
    }
    EXPECT_EQ(cluster.gpu_capacity_total() - cluster.gpu_free_total(), arrived) << policy;
    EXPECT_GT(arrived, 6212000 / 5);
  }
}

}  // namespace
}  // namespace gpushare::sim
