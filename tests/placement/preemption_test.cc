// ChooseVictims (core/placement/preemption.h): which pods to evict so that a pending share fits
// one GPU, against kube-scheduler's node-total choice that frees no GPU (issue 23).
#include "core/placement/preemption.h"

#include <gtest/gtest.h>

#include <set>

namespace gpushare::placement {
namespace {

// A node of `gpus` GPUs of `capacity` units each, with pods added by Add().
struct Node {
  PreemptionInput in;
  explicit Node(int gpus, int64_t capacity = 22, int max_clients = 48) {
    in.node.num_gpus = static_cast<uint8_t>(gpus);
    in.node.model = 0;
    in.node.max_clients = max_clients;
    for (int g = 0; g < gpus; ++g) in.node.gpu_capacity[g] = in.node.gpu_free[g] = capacity;
    RefreshTotals(in.node);
  }
  // A pod holding `units` on each listed slot; returns its index.
  size_t Add(std::vector<std::pair<int, int64_t>> use, int32_t priority = 0, int64_t start = 0,
             std::vector<int> budgets = {}) {
    PreemptionPod p;
    p.priority = priority;
    p.start_ns = start;
    p.budgets = std::move(budgets);
    std::vector<SlotUse> uses;
    for (const auto& [slot, units] : use) {
      uses.push_back({slot, units, 1});
      in.node.gpu_free[slot] -= units;
      in.node.gpu_clients[slot] += 1;
    }
    in.node.pods += 1;
    RefreshTotals(in.node);
    return in.Add(p, uses.data(), uses.size());
  }
  // Every GPU holds `per_gpu` pods of `units` (the issue's node: 7 x 3 GiB of 22 GiB each).
  void Fill(int per_gpu, int64_t units, int32_t priority = 0) {
    for (int g = 0; g < in.node.num_gpus; ++g)
      for (int k = 0; k < per_gpu; ++k) Add({{g, units}}, priority, 1000 + g * 100 + k);
  }
};

PodShape Share(std::vector<int64_t> shares) {
  PodShape s;
  s.shares = std::move(shares);
  std::sort(s.shares.begin(), s.shares.end(), std::greater<>());
  s.distinct_gpus = false;
  return s;
}

// The slots the victims hold.
std::set<int> SlotsOf(const PreemptionInput& in, const VictimSet& v) {
  std::set<int> out;
  for (size_t i : v.victims)
    for (uint32_t k = in.pods[i].use_begin; k < in.pods[i].use_end; ++k)
      out.insert(in.uses[k].slot);
  return out;
}

TEST(ChooseVictims, FreesOneWholeGpuForTheIssuesPod) {
  Node n(8);
  n.Fill(7, 3);  // 56 pods, 1 unit free per GPU
  NoVictims why;
  auto v = ChooseVictims(n.in, Share({22}), 1000, &why);
  ASSERT_TRUE(v.has_value()) << static_cast<int>(why);
  EXPECT_EQ(v->victims.size(), 7u);
  EXPECT_EQ(SlotsOf(n.in, *v).size(), 1u) << "all seven victims on one GPU";
  EXPECT_EQ(v->freed_units, 21);
  ASSERT_EQ(v->gpus.count, 1);
  EXPECT_EQ(static_cast<int>(v->gpus.gpu[0]), *SlotsOf(n.in, *v).begin())
      << "the preemptor goes to the GPU its victims free";
  EXPECT_EQ(v->violations, 0);
  // Equal priorities: the GPU whose oldest victim started last (kube-scheduler's last tie-break)
  // is the one with the youngest pods, GPU 7.
  EXPECT_EQ(*SlotsOf(n.in, *v).begin(), 7);
}

TEST(ChooseVictims, LargerThanAnyGpuEvictsNothing) {
  Node n(8);
  n.Fill(7, 3);
  NoVictims why;
  EXPECT_FALSE(ChooseVictims(n.in, Share({23}), 1000, &why).has_value());
  EXPECT_EQ(why, NoVictims::kDoesNotFit);
}

TEST(ChooseVictims, OnlyLowerPriorityPodsAreVictims) {
  Node n(2);
  n.Fill(7, 3, 1000);  // the same priority as the preemptor
  NoVictims why;
  EXPECT_FALSE(ChooseVictims(n.in, Share({22}), 1000, &why).has_value());
  EXPECT_EQ(why, NoVictims::kNoLowerPriority);
  // One GPU of lower-priority pods is enough.
  Node m(2);
  for (int k = 0; k < 7; ++k) m.Add({{0, 3}}, 1000);
  for (int k = 0; k < 7; ++k) m.Add({{1, 3}}, 10);
  auto v = ChooseVictims(m.in, Share({22}), 1000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(SlotsOf(m.in, *v), std::set<int>{1});
  EXPECT_EQ(v->highest_priority, 10);
}

TEST(ChooseVictims, PrefersTheGpuWithLowerPriorityVictims) {
  Node n(2);
  for (int k = 0; k < 7; ++k) n.Add({{0, 3}}, 100);
  for (int k = 0; k < 7; ++k) n.Add({{1, 3}}, 50);
  auto v = ChooseVictims(n.in, Share({22}), 1000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(SlotsOf(n.in, *v), std::set<int>{1});
}

TEST(ChooseVictims, PrefersFewerVictims) {
  Node n(2);
  n.Add({{0, 10}});
  n.Add({{0, 10}});
  for (int k = 0; k < 7; ++k) n.Add({{1, 3}});
  auto v = ChooseVictims(n.in, Share({22}), 1000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->victims.size(), 2u);
  EXPECT_EQ(SlotsOf(n.in, *v), std::set<int>{0});
}

TEST(ChooseVictims, EvictsOnlyWhatTheGpuNeedsLeastImportantFirst) {
  Node n(1);
  const size_t old_pod = n.Add({{0, 3}}, 0, 100);
  const size_t young_pod = n.Add({{0, 3}}, 0, 900);
  const size_t low = n.Add({{0, 3}}, -5, 500);
  n.Add({{0, 2}}, 0, 50);
  // 11 used, 11 free; 14 asked: one 3-unit pod must go, the least important: priority -5.
  auto v = ChooseVictims(n.in, Share({14}), 10);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->victims, std::vector<size_t>{low});
  // Without it, the youngest of the equals goes (an unknown start counts as the youngest).
  n.in.pods[low].priority = 0;
  n.in.pods[low].start_ns = 200;
  v = ChooseVictims(n.in, Share({14}), 10);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->victims, std::vector<size_t>{young_pod});
  (void)old_pod;
}

TEST(ChooseVictims, PodsAlreadyBeingDeletedCountAsFreed) {
  Node n(1);
  for (int k = 0; k < 7; ++k) n.Add({{0, 3}});
  n.in.pods[0].terminating = true;
  n.in.pods[1].terminating = true;
  // 1 free + 6 coming back: 7; asked 13: two more 3-unit pods.
  auto v = ChooseVictims(n.in, Share({13}), 10);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->victims.size(), 2u);
  for (size_t i : v->victims) EXPECT_FALSE(n.in.pods[i].terminating);
  NoVictims why;
  EXPECT_FALSE(ChooseVictims(n.in, Share({7}), 10, &why).has_value());
  EXPECT_EQ(why, NoVictims::kFitsAfterTermination);
}

TEST(ChooseVictims, VetoedPodsAreNeverVictims) {
  Node n(2);
  n.Fill(7, 3);
  for (PreemptionPod& p : n.in.pods)
    if (n.in.uses[p.use_begin].slot == 1) p.evictable = false;
  auto v = ChooseVictims(n.in, Share({22}), 1000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(SlotsOf(n.in, *v), std::set<int>{0});
}

TEST(ChooseVictims, BudgetsSteerToTheGpuTheyAllow) {
  Node n(2);
  // Budget 0 covers GPU 0's pods and allows none; GPU 1's pods have no budget.
  for (int k = 0; k < 7; ++k) n.Add({{0, 3}}, 0, 10, {0});
  for (int k = 0; k < 7; ++k) n.Add({{1, 3}}, 5, 10);
  n.in.allowed = {0};
  auto v = ChooseVictims(n.in, Share({22}), 1000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(SlotsOf(n.in, *v), std::set<int>{1}) << "the higher priority is kept over the budget";
  EXPECT_EQ(v->violations, 0);
}

TEST(ChooseVictims, BudgetsThatAllowNoGpuMeanNoVictimsUnlessBestEffort) {
  Node n(2);
  n.Fill(7, 3);
  for (PreemptionPod& p : n.in.pods) p.budgets = {0};
  n.in.allowed = {6};  // six of the fourteen may go: no GPU frees without a seventh
  NoVictims why;
  EXPECT_FALSE(ChooseVictims(n.in, Share({22}), 1000, &why).has_value());
  EXPECT_EQ(why, NoVictims::kBudgets);
  n.in.mode = BudgetMode::kBestEffort;
  auto v = ChooseVictims(n.in, Share({22}), 1000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->victims.size(), 7u);
  EXPECT_EQ(v->violations, 1);
  // Seven allowed: the GPU frees within the budget.
  n.in.mode = BudgetMode::kRespect;
  n.in.allowed = {7};
  v = ChooseVictims(n.in, Share({22}), 1000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->violations, 0);
}

TEST(ChooseVictims, TwoContainersFreeTwoGpus) {
  Node n(4);
  n.Fill(7, 3);
  auto v = ChooseVictims(n.in, Share({22, 22}), 1000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->victims.size(), 14u);
  EXPECT_EQ(SlotsOf(n.in, *v).size(), 2u);
  ASSERT_EQ(v->gpus.count, 2);
  EXPECT_NE(v->gpus.gpu[0], v->gpus.gpu[1]);
}

TEST(ChooseVictims, ClientCeilingNeedsOneVictim) {
  Node n(1, 22, 3);  // three clients per GPU
  n.Add({{0, 1}}, 0, 1);
  n.Add({{0, 1}}, 0, 5);
  n.Add({{0, 1}}, 0, 9);
  // 19 units free but no client slot: the youngest pod makes room.
  auto v = ChooseVictims(n.in, Share({2}), 10);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->victims, std::vector<size_t>{2});
}

TEST(ChooseVictims, AMultiGpuPodIsOneVictim) {
  Node n(2);
  n.Add({{0, 11}, {1, 11}});  // one pod with a container on each GPU
  n.Add({{0, 10}});
  auto v = ChooseVictims(n.in, Share({21}), 10);
  ASSERT_TRUE(v.has_value());
  // Freeing GPU 1 takes the two-GPU pod alone; GPU 0 would need both.
  EXPECT_EQ(v->victims, std::vector<size_t>{0});
  EXPECT_EQ(v->gpus.gpu[0], 1);
}

TEST(BetterVictims, FollowsKubeSchedulersOrder) {
  VictimSet a, b;
  a.victims = {0, 1, 2};
  b.victims = {0};
  a.violations = 0;
  b.violations = 1;
  EXPECT_TRUE(BetterVictims(a, b));
  b.violations = 0;
  a.highest_priority = 1;
  b.highest_priority = 2;
  EXPECT_TRUE(BetterVictims(a, b));
  b.highest_priority = 1;
  a.priority_sum = 3;
  b.priority_sum = 1;
  EXPECT_TRUE(BetterVictims(b, a));
  b.priority_sum = 3;
  EXPECT_TRUE(BetterVictims(b, a)) << "fewer victims";
  b.victims = a.victims;
  a.earliest_start = 20;
  b.earliest_start = 10;
  EXPECT_TRUE(BetterVictims(a, b)) << "the later earliest start";
  b.earliest_start = 20;
  a.freed_units = 21;
  b.freed_units = 22;
  EXPECT_TRUE(BetterVictims(a, b));
  EXPECT_FALSE(BetterVictims(a, a));
}

}  // namespace
}  // namespace gpushare::placement
