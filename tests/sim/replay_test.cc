// The pure half of `gpushare replay` (sim/replay.h): the submit order is the simulator's, the
// tally measures the cluster exactly as the simulator measures itself, and what the cluster
// could not have done (an over-commit, an unknown node) is an error, never absorbed.
#include "sim/replay.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/placement/engine.h"
#include "core/placement/rng.h"

namespace gpushare::sim {
namespace {

namespace pl = placement;

Workload Small() {
  Result<std::vector<pl::NodeSpec>> nodes =
      ParseNodeCsv("nodes.csv",
                   "sn,cpu_milli,memory_mib,gpu,model\n"
                   "n0,32000,131072,2,T4\nn1,32000,131072,4,V100M16\nn2,64000,262144,8,G2\n");
  std::string pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n";
  const int64_t milli[] = {50, 220, 470, 650, 1000, 1000, 320, 810};
  for (int i = 0; i < 40; ++i) {
    const int64_t m = milli[i % 8];
    const int gpus = i % 13 == 0 ? 2 : (i % 11 == 0 ? 0 : 1);
    pods += "p" + std::to_string(i) + "," + std::to_string(1000 + 500 * (i % 5)) + ",1024," +
            std::to_string(gpus) + "," + std::to_string(gpus == 0 ? 0 : (gpus == 2 ? 1000 : m)) +
            "," + (i % 7 == 0 ? "V100M16|G2" : "") + "\n";
  }
  Result<std::vector<TracePod>> p = ParsePodCsv("pods.csv", pods);
  EXPECT_TRUE(nodes.ok() && p.ok());
  Workload w;
  w.name = "small";
  w.nodes = *nodes;
  w.pods = *p;
  return w;
}

TEST(ReplayTest, TheTallyOfTheEnginesOwnDecisionsIsTheSimulatorsRun) {
  const Workload w = Small();
  const pl::TargetWorkload typical = TypicalWorkload(w, 0.95);
  for (const std::string policy : {"default", "fgd", "bestfit"}) {
    for (uint64_t seed : {1u, 42u}) {
      const RunResult want = RunOne(w, typical, policy, seed, 1.3);
      ASSERT_TRUE(want.status.ok()) << want.status.message();
      // The simulator's run, step by step, with the cluster's answers fed to the tally.
      pl::ClusterState cluster;
      ASSERT_TRUE(AddNodes(w, &cluster).ok());
      pl::Rng rng(seed);
      std::vector<int> order = ShuffledOrder(w.pods, rng);
      order = TuneOrder(std::move(order), w.pods, cluster.gpu_capacity_total(), 1.3, rng);
      EXPECT_EQ(order, SubmitOrder(w, seed, 1.3));
      const std::vector<int64_t> ranks = TieRanks(w.nodes, rng);
      for (int i = 0; i < cluster.num_nodes(); ++i) cluster.set_tie_rank(i, ranks[i]);
      pl::PolicyOptions po;
      po.gpu_unit = w.gpu_unit;
      auto pol = pl::MakePolicy(policy, cluster, typical, po, &rng);
      ASSERT_TRUE(pol.ok());
      pl::PlacementEngine engine(cluster, **pol);
      ReplayTally tally(w, typical);
      ASSERT_TRUE(tally.status().ok());
      for (int idx : order) {
        const pl::ShapeId s = *engine.Intern(w.pods[idx].request);
        const pl::Decision d = engine.Choose(s);
        Observed where;
        if (d.placed() && engine.Commit(s, d).ok()) {
          where.node = w.nodes[static_cast<size_t>(d.node)].name;
          for (int g = 0; g < d.choice.gpus.count; ++g) where.gpus.push_back(d.choice.gpus.gpu[g]);
        }
        ASSERT_TRUE(tally.Record(idx, where).ok());
      }
      const RunResult got = tally.Finish(policy, seed, 0);
      EXPECT_EQ(tally.overcommits(), 0);
      EXPECT_EQ(got.pods_submitted, want.pods_submitted);
      EXPECT_EQ(got.pods_failed, want.pods_failed);
      EXPECT_EQ(got.failed_gpu_demand, want.failed_gpu_demand);
      ASSERT_EQ(got.curve.size(), want.curve.size()) << policy << " " << seed;
      for (size_t i = 0; i < got.curve.size(); ++i) {
        EXPECT_EQ(got.curve[i].present, want.curve[i].present);
        EXPECT_NEAR(got.curve[i].unallocated_pct, want.curve[i].unallocated_pct, 1e-9);
        EXPECT_NEAR(got.curve[i].frag_pct, want.curve[i].frag_pct, 1e-9);
      }
    }
  }
}

TEST(ReplayTest, WhatTheClusterCannotHaveDoneIsAnErrorAndCounted) {
  const Workload w = Small();
  const pl::TargetWorkload typical = TypicalWorkload(w, 0.95);
  ReplayTally tally(w, typical);
  int share = -1, whole = -1;
  for (size_t i = 0; i < w.pods.size(); ++i) {
    if (share < 0 && w.pods[i].num_gpu == 1 && w.pods[i].gpu_milli == 650)
      share = static_cast<int>(i);
    if (whole < 0 && w.pods[i].num_gpu == 1 && w.pods[i].gpu_milli == 1000)
      whole = static_cast<int>(i);
  }
  ASSERT_GE(share, 0);
  ASSERT_GE(whole, 0);
  EXPECT_TRUE(tally.Record(share, {"n0", {1}}).ok());
  // A whole GPU where the share already is: over-committed.
  Status s = tally.Record(whole, {"n0", {1}});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is not entirely free"), std::string::npos) << s.message();
  EXPECT_EQ(tally.overcommits(), 1);
  // A node the list does not have; GPUs that disagree with the request.
  EXPECT_NE(tally.Record(whole, {"nx", {0}}).message().find("not in the node list"),
            std::string::npos);
  EXPECT_NE(tally.Record(whole, {"n1", {0, 1}}).message().find("holds 2 GPU(s)"),
            std::string::npos);
  EXPECT_EQ(tally.placed(), 4);
  EXPECT_EQ(tally.Record(whole, {}).ok(), true);
  EXPECT_EQ(tally.refused(), 1);
}

TEST(ReplayTest, ATraceTaskBecomesThePodSpecTheDocsMapItTo) {
  const Workload w = Small();
  ReplayPodSpec spec;
  spec.name = "replay-7";
  spec.namespace_ = "ns";
  spec.labels = {{"gpushare.io/replay", "r"}};
  auto pod = [&](int i) {
    return nlohmann::json::parse(ReplayPodJson(w.pods[static_cast<size_t>(i)], spec));
  };
  // p1: 220 milli of one GPU, 1500m CPU, 1 GiB.
  nlohmann::json p = pod(1);
  const auto& c = p["spec"]["containers"][0]["resources"];
  EXPECT_EQ(c["requests"]["cpu"], "1500m");
  EXPECT_EQ(c["requests"]["memory"], "1024Mi");
  EXPECT_EQ(c["limits"]["alibabacloud.com/gpu-milli"], "220");
  EXPECT_EQ(p["metadata"]["labels"]["gpushare.io/replay"], "r");
  EXPECT_FALSE(p["spec"].contains("affinity"));
  // p0: two whole GPUs and a model list: 2000 milli, node affinity on the card model.
  p = pod(0);
  EXPECT_EQ(p["spec"]["containers"][0]["resources"]["limits"]["alibabacloud.com/gpu-milli"],
            "2000");
  const auto& expr =
      p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
       ["nodeSelectorTerms"][0]["matchExpressions"][0];
  EXPECT_EQ(expr["key"], "alibabacloud.com/gpu-card-model");
  EXPECT_EQ(expr["values"], (std::vector<std::string>{"G2", "V100M16"}));
  // p11: CPU only: no GPU resource.
  p = pod(11);
  EXPECT_FALSE(p["spec"]["containers"][0]["resources"].contains("limits"));
}

}  // namespace
}  // namespace gpushare::sim
