// The target workload gpushare-scheduler's policy weighs nodes against: the file an operator
// gives (--target-workload: scheduler/target_workload.h), the pods the cache learns it from when
// none is given (GPU pods and pods asking no GPU), and how equally good nodes are ordered.
#include "scheduler/target_workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "scheduler/cache.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::scheduler {
namespace {

using namespace testing;

TEST(TargetWorkloadFileTest, ReadsAPodListMergingEqualPodsAndIgnoringOtherColumns) {
  // gpushare simulate's pod list as it is (name, memory_mib and the rest are not needed).
  Result<std::vector<TargetPod>> w =
      ParseTargetWorkload("pods.csv",
                          "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                          "p1,8000,100,1,250,\n"
                          "p2,8000,200,1,250,V100M16\n"
                          "p3,4000,1,2,1000,\n"
                          "p4,2000,1,0,0,\n");
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ(w->size(), 3u);
  EXPECT_EQ((*w)[0], (TargetPod{2000, 0, 1, {}}));
  EXPECT_EQ((*w)[1], (TargetPod{4000, 2000, 1, {}}));
  EXPECT_EQ((*w)[2], (TargetPod{8000, 250, 2, {}}));
  EXPECT_TRUE((*w)[0].request.empty());
  // The request of each is the pod's alibabacloud.com/gpu-milli: two whole GPUs, a quarter.
  EXPECT_EQ((*w)[1].request.Resolve(16)->Demands(), (std::vector<int64_t>{16, 16}));
  EXPECT_EQ((*w)[2].request.Resolve(16)->Demands(), (std::vector<int64_t>{4}));
  EXPECT_EQ(TargetPodCount(*w), 4);
  // A count column: a row stands for that many pods.
  w = ParseTargetWorkload("w.csv",
                          "cpu_milli,num_gpu,gpu_milli,count\n1000,1,500,3\n1000,1,500,2\n");
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(*w, (std::vector<TargetPod>{{1000, 500, 5, {}}}));
}

TEST(TargetWorkloadFileTest, BadRowsAreRefusedNamingLineColumnAndField) {
  const auto error = [](std::string_view content) {
    Result<std::vector<TargetPod>> w = ParseTargetWorkload("w.csv", content);
    EXPECT_FALSE(w.ok());
    return w.ok() ? std::string() : w.status().message();
  };
  EXPECT_EQ(error("cpu_milli,num_gpu\n1000,1\n"),
            "w.csv:1:1: missing column 'gpu_milli' (header: cpu_milli,num_gpu)");
  EXPECT_EQ(error("cpu_milli,num_gpu,gpu_milli\n1000,2,500\n"),
            "w.csv:2:8: gpu_milli: a share below 1000 needs num_gpu = 1, got 2 GPUs x 500");
  EXPECT_EQ(error("cpu_milli,num_gpu,gpu_milli\n1000,0,500\n"),
            "w.csv:2:8: gpu_milli: must be 0 exactly when num_gpu is 0, got 0 GPUs x 500");
  EXPECT_EQ(error("cpu_milli,num_gpu,gpu_milli\n1000,1,0\n"),
            "w.csv:2:8: gpu_milli: must be 0 exactly when num_gpu is 0, got 1 GPUs x 0");
  EXPECT_THAT(error("cpu_milli,num_gpu,gpu_milli\n1000,1,1500\n"),
              ::testing::HasSubstr("w.csv:2:8: gpu_milli:"));
  EXPECT_THAT(error("cpu_milli,num_gpu,gpu_milli\n1000,17,1000\n"),
              ::testing::HasSubstr("w.csv:2:6: num_gpu:"));
  EXPECT_THAT(error("cpu_milli,num_gpu,gpu_milli\n-1,1,500\n"),
              ::testing::HasSubstr("w.csv:2:1: cpu_milli:"));
  EXPECT_THAT(error("cpu_milli,num_gpu,gpu_milli,count\n1000,1,500,0\n"),
              ::testing::HasSubstr("w.csv:2:12: count:"));
  EXPECT_EQ(error("cpu_milli,num_gpu,gpu_milli\n"), "w.csv: no pods");
  EXPECT_FALSE(LoadTargetWorkload("/nonexistent/workload.csv").ok());
}

// A node of two 16-unit GPUs with `cpu` allocatable.
kube::Node Node(const std::string& name, const std::string& cpu) {
  json n = NodeJson(name, Uniform(2, 16));
  n["status"]["allocatable"]["cpu"] = cpu;
  n["status"]["allocatable"]["memory"] = "262144Mi";
  return DecodeNodeOrDie(n);
}

std::unique_ptr<GpuCache> FgdCache(std::vector<TargetPod> workload) {
  CacheOptions o;
  o.policy = "fgd";
  o.target_workload = std::move(workload);
  auto c = std::make_unique<GpuCache>(o);
  c->SetSynced(true);
  c->UpsertNode(Node("roomy", "64"));
  c->UpsertNode(Node("tight", "4"));
  return c;
}

// FGD with a typical pod of 8 CPUs and a quarter GPU: `tight` (4 CPUs) strands its GPUs for it,
// so a small pod belongs there. Given as the target workload, the policy knows it from the first
// decision; learnt, it knows only the pods it has seen (here: the small pod itself).
TEST(TargetWorkloadCacheTest, AConfiguredWorkloadDecidesFromTheFirstPod) {
  Result<std::vector<TargetPod>> w =
      ParseTargetWorkload("w.csv", "cpu_milli,num_gpu,gpu_milli,count\n8000,1,250,100\n");
  ASSERT_TRUE(w.ok()) << w.status().message();
  const kube::CpuMemory small{2000, 0};
  const std::unique_ptr<GpuCache> given = FgdCache(*w);
  std::vector<int64_t> s = given->Score(Req(MilliPod("small", 250)), {"roomy", "tight"}, small);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1], 10);
  EXPECT_LT(s[0], 10);
  EXPECT_EQ(given->stats().workload_pods, 100);
  EXPECT_EQ(given->stats().workload_shapes, 1);
  // Pods seen do not change a configured workload.
  for (int i = 0; i < 20; ++i) {
    const json p = MilliPod("seen-" + std::to_string(i), 500);
    Result<Reservation> r = given->Reserve(DecodePodOrDie(p), Req(p), "roomy", 1);
    ASSERT_TRUE(r.ok()) << r.status().message();
    given->Commit(DecodePodOrDie(p).metadata.uid, r->token);
    if (i == 3) break;  // 4 x 500 milli fill roomy's two GPUs
  }
  (void)given->Score(Req(MilliPod("small", 250)), {"roomy", "tight"}, small);
  EXPECT_EQ(given->stats().workload_pods, 100);
  const uint64_t refreshes = given->stats().policy_refreshes;
  (void)given->Score(Req(MilliPod("other", 750)), {"roomy", "tight"}, {16000, 0});
  EXPECT_EQ(given->stats().policy_refreshes, refreshes);  // a new shape asked: nothing to learn

  const std::unique_ptr<GpuCache> learnt = FgdCache({});
  (void)learnt->Score(Req(MilliPod("small", 250)), {"roomy", "tight"}, small);
  s = learnt->Score(Req(MilliPod("small", 250)), {"roomy", "tight"}, small);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_FALSE(s[1] == 10 && s[0] < 10) << s[0] << " " << s[1];
  EXPECT_EQ(learnt->stats().workload_pods, 1);  // the asked shape, once
}

// Pods asking no GPU, bound to a node with GPUs, are part of the workload the cache learns (the
// trace's CPU-only pods are in gpushare simulate's); bound elsewhere, or gone, they are not.
TEST(TargetWorkloadCacheTest, PodsAskingNoGpuCountInTheLearntWorkload) {
  const std::unique_ptr<GpuCache> c = FgdCache({});
  const auto cpu_pod = [](const std::string& name, const std::string& node) {
    json p = PodJson(name, {{"main", 0}}, "default", "uid-" + name);
    p["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "8"}}}};
    p["spec"]["nodeName"] = node;
    p["status"]["phase"] = "Running";
    return DecodePodOrDie(p);
  };
  for (int i = 0; i < 10; ++i) c->UpsertPod(cpu_pod("cpu-" + std::to_string(i), "roomy"));
  c->UpsertPod(cpu_pod("elsewhere", "a-node-without-gpus"));
  const kube::CpuMemory small{2000, 0};
  (void)c->Score(Req(MilliPod("small", 250)), {"roomy", "tight"}, small);
  EXPECT_EQ(c->stats().workload_pods, 10);  // the ten CPU-only pods on roomy
  EXPECT_EQ(c->stats().workload_shapes, 1);
  (void)c->Score(Req(MilliPod("small", 250)), {"roomy", "tight"}, small);
  EXPECT_EQ(c->stats().workload_pods, 11);  // and the shape asked, once
  EXPECT_EQ(c->stats().workload_shapes, 2);
  for (int i = 0; i < 10; ++i) c->DeletePod(cpu_pod("cpu-" + std::to_string(i), "roomy"));
  (void)c->Score(Req(MilliPod("small", 250)), {"roomy", "tight"}, small);
  EXPECT_EQ(c->stats().workload_pods, 1);
}

// Nodes the policy finds equally good are ordered by a fixed pseudo-random order of their names
// (TieRank), as gpushare simulate orders them by a seeded permutation: neither by the order the
// cache saw them in nor by name, which would send every tie to the first node of a pool of
// alike-named nodes.
TEST(TargetWorkloadCacheTest, TiesGoToAFixedPseudoRandomOrderOfNames) {
  const auto winner = [](const std::vector<std::string>& names, bool reversed) {
    CacheOptions o;
    o.policy = "bestfit";
    GpuCache c(o);
    c.SetSynced(true);
    std::vector<std::string> order = names;
    if (reversed) std::reverse(order.begin(), order.end());
    for (const std::string& n : order) c.UpsertNode(Node(n, "64"));
    const std::vector<std::string_view> listed(names.begin(), names.end());
    const std::vector<int64_t> s = c.Score(Req(MilliPod("p", 500)), listed, {1000, 0});
    std::string won;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == 10) won += names[i];
    return won;
  };
  int first_by_name = 0;
  std::set<std::string> suffixes;
  for (int k = 0; k < 20; ++k) {
    const std::string pool = "pool-" + std::to_string(k) + "-";
    const std::vector<std::string> names = {pool + "a", pool + "b", pool + "c", pool + "d"};
    const std::string won = winner(names, false);
    ASSERT_EQ(won.size(), pool.size() + 1) << "one node scores 10, got " << won;
    EXPECT_EQ(winner(names, true), won);  // the order the nodes were seen in does not matter
    first_by_name += won == names[0];
    suffixes.insert(won.substr(pool.size()));
  }
  EXPECT_LT(first_by_name, 20);
  EXPECT_GE(suffixes.size(), 3u);
}

}  // namespace
}  // namespace gpushare::scheduler
