// The slot ledger (core/memshare_ledger.h): slot keys, the scheduler's effective count, key
// clashes, the agent's open slots and the allocations not yet listed. The protocol as a whole
// is checked over interleavings in memshare_model_test.cc.
#include "core/memshare_ledger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/memshare_node.h"
#include "tests/core/test_inventories.h"

namespace gpushare::memshare {
namespace {

using gpushare::testing::GpuUuid;
using ::testing::HasSubstr;

PodRequest Request(std::vector<ContainerShare> app, std::vector<ContainerShare> init = {}) {
  PodRequest r;
  r.app = std::move(app);
  r.init = std::move(init);
  return r;
}

std::vector<std::string> UnitsOf(int gpu, std::vector<int> js) {
  std::vector<std::string> out;
  for (int j : js) out.push_back(UnitDeviceId(GpuUuid(gpu), j));
  return out;
}

TEST(SlotKeys, FirstRequestAndDemandPerDemand) {
  EXPECT_EQ(SlotKeys(Request({{"c", 3}})), (std::vector<SlotKey>{{3, 3}}));
  // kubelet asks the init container's 2 first, then the app container's 3 reusing them.
  EXPECT_EQ(SlotKeys(Request({{"a", 3}, {"b", 5}}, {{"i", 2}})),
            (std::vector<SlotKey>{{2, 3}, {5, 5}}));
  EXPECT_EQ(SlotKeys(Request({{"a", 1}}, {{"i", 4}, {"j", 6}})), (std::vector<SlotKey>{{4, 6}}));
  EXPECT_EQ(SlotKeys(Request({}, {{"i", 4}})), (std::vector<SlotKey>{{4, 4}}));
  EXPECT_TRUE((SlotKey{2, 3}).odd());
  EXPECT_EQ(SlotKeyText({2, 3}, MemoryUnit::kGiB), "2 GiB first, 3 GiB in all");
  EXPECT_EQ(SlotKeyText({3, 3}, MemoryUnit::kGiB), "3 GiB");
}

// The window of issue 10: X (planned on 1) was admitted into W's slot on 0 and confirmed
// there; W, still pending, says 0. The current view shows GPU 0 over-full and GPU 1 with room;
// the plan shows both full, which is the truth once W lands on 1.
TEST(EffectiveUsage, ASwapInFlightShowsNoRoom) {
  const std::map<int, int64_t> cap = {{0, 22}, {1, 22}};
  const std::map<int, GpuUse> plan = {{0, {21, 7}}, {1, {21, 7}}};
  const std::map<int, GpuUse> current = {{0, {24, 8}}, {1, {18, 6}}};
  auto u = EffectiveUsage(plan, current, cap);
  EXPECT_EQ(u[0].units, 24);
  EXPECT_EQ(u[1].units, 21);
  EXPECT_EQ(u[1].clients, 7);
  // Once W is confirmed on 1 the two views agree.
  u = EffectiveUsage(plan, {{0, {21, 7}}, {1, {21, 7}}}, cap);
  EXPECT_EQ(u[0].units, 21);
  EXPECT_EQ(u[1].units, 21);
}

TEST(EffectiveUsage, APodOffItsPlanCountsInBothPlacesUntilThePlanMoves) {
  // Planned on 1, held on 0 (its swap partner is gone): the slot on 1 stays counted until the
  // scheduler moves the plan (SettledPlanMoves); a pending pod may still need it.
  auto u = EffectiveUsage({{1, {3, 1}}}, {{0, {3, 1}}}, {{0, 22}, {1, 22}});
  EXPECT_EQ(u[0].units, 3);
  EXPECT_EQ(u[1].units, 3);
  u = EffectiveUsage({{0, {3, 1}}}, {{0, {3, 1}}}, {{0, 22}, {1, 22}});
  EXPECT_EQ(u.count(1), 0u);
}

TEST(EffectiveUsage, ExcessBeyondCapacityIsChargedToTheMostFreeGpu) {
  // Someone's units landed where a pending pod was planned: 25 on a GPU of 22 in both views.
  auto u = EffectiveUsage({{0, {25, 8}}, {1, {10, 3}}, {2, {4, 1}}},
                          {{0, {25, 8}}, {1, {10, 3}}, {2, {4, 1}}}, {{0, 22}, {1, 22}, {2, 22}});
  EXPECT_EQ(u[0].units, 25);
  EXPECT_EQ(u[1].units, 10);
  EXPECT_EQ(u[2].units, 7);  // the node shows 39 units counted, as many as its pods hold
  // GPUs not in `capacity` count as they are and take no charge.
  u = EffectiveUsage({{5, {3, 1}}}, {{5, {3, 1}}}, {{0, 22}});
  EXPECT_EQ(u[5].units, 3);
  EXPECT_EQ(u.count(0), 0u);
}

TEST(FreshConflict, SameFirstRequestOtherDemandWaits) {
  const std::map<SlotKey, int> pending = {{{2, 3}, 1}, {{5, 5}, 2}};
  EXPECT_FALSE(FreshConflict({{5, 5}}, pending, MemoryUnit::kGiB));
  EXPECT_FALSE(FreshConflict({{2, 3}}, pending, MemoryUnit::kGiB));
  auto why = FreshConflict({{2, 2}}, pending, MemoryUnit::kGiB);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("2 GiB first, 3 GiB in all"));
  EXPECT_TRUE(FreshConflict({{5, 7}}, pending, MemoryUnit::kGiB).has_value());
  EXPECT_FALSE(FreshConflict({{5, 7}}, {{{5, 5}, 0}}, MemoryUnit::kGiB).has_value());
}

TEST(Ledger, HeldSlotsFromPodResources) {
  Inventory inv;
  for (int i = 0; i < 2; ++i) inv.gpus.push_back(gpushare::testing::WholeGpu(i, 24576));
  std::vector<PlannedPod> plans = {{"ns/a",
                                    Request({{"main", 3}, {"side", 2}}, {{"init", 1}}),
                                    {{"main", 0}, {"side", 1}, {"init", 0}},
                                    5}};
  std::map<std::string, std::vector<ObservedContainer>> observed = {
      {"ns/a", {{"main", UnitsOf(1, {0, 1, 2})}, {"queue-proxy", {}}}},
      {"ns/new", {{"c", UnitsOf(0, {3, 4})}}},
      {"ns/foreign", {{"c", UnitsOf(0, {5})}}},
      {"ns/broken", {{"c", {UnitDeviceId(GpuUuid(0), 7), UnitDeviceId(GpuUuid(1), 7)}}}},
  };
  std::vector<HeldSlot> held = HeldSlots(plans, observed, {"ns/foreign"}, inv);
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].pod, "ns/a");
  EXPECT_EQ(held[0].key, (SlotKey{1, 3}));
  EXPECT_EQ(held[0].gpu, 1);
  EXPECT_EQ(held[0].demand, 0);
  EXPECT_EQ(held[1].pod, "ns/new");
  EXPECT_EQ(held[1].key, (SlotKey{2, 2}));
  SlotLedger l = BuildLedger(plans, held);
  EXPECT_EQ(l.Open({1, 3}, 0), 1);   // planned, held elsewhere
  EXPECT_EQ(l.Open({1, 3}, 1), -1);  // held beyond the plan
  EXPECT_EQ(l.Open({2, 2}, 1), 1);
  ASSERT_EQ(l.pending.size(), 1u);  // "side" still waits
  EXPECT_EQ(l.pending[0].container, "side");
  EXPECT_EQ(l.PromisedUnits(0), 3);
  EXPECT_EQ(l.PromisedUnits(1), 2);
}

TEST(RecentAllocations, UnitsGivenOutAgainReplaceAStaleEntry) {
  RecentAllocations r;
  r.Add(UnitsOf(0, {0, 1, 2, 3}), 0, {2, 4}, 1000, false);  // a pod that is gone by now
  r.Add(UnitsOf(0, {0, 1}), 0, {2, 2}, 1001, false);  // kubelet gave two of its units out again
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r.Held()[0].key, (SlotKey{2, 2}));
  EXPECT_EQ(r.Held()[0].ids, UnitsOf(0, {0, 1}));
}

TEST(Ledger, SlotsWhoseUnitsAreFreeAgainAreNotHeld) {
  Inventory inv;
  for (int i = 0; i < 2; ++i) inv.gpus.push_back(gpushare::testing::WholeGpu(i, 24576));
  KubeletHoldings h;
  h.Listed({{"ns/gone", {{"c", UnitsOf(1, {0, 1, 2})}}}}, 0, 2000);
  std::vector<PlannedPod> plans = {{"ns/p", Request({{"c", 3}}), {{"c", 1}}, 1}};
  EXPECT_EQ(h.Ledger(plans, {}, inv).Open({3, 3}, 1), 0);  // the gone pod's units look held
  const std::set<std::string> free = {UnitDeviceId(GpuUuid(1), 0), UnitDeviceId(GpuUuid(1), 1)};
  EXPECT_EQ(h.Ledger(plans, {}, inv, &free).Open({3, 3}, 1), 1);  // kubelet says they are free
}

// Found by the model's random walks (mixed shapes, seed offset 7000, walk 81,758): a List still
// showed a deleted pod on unit 0 of GPU 0 after kubelet had given that unit to the next pod. Both
// counted as held, so the slot a third pod was planned for looked taken; the agent steered it to
// room on GPU 1 that the scheduler still saw as free, and the scheduler booked that room again.
TEST(Ledger, UnitsAllocatedAgainSinceTheListHaveOneHolder) {
  Inventory inv;
  for (int i = 0; i < 2; ++i) inv.gpus.push_back(gpushare::testing::WholeGpu(i, 24576));
  KubeletHoldings h;
  h.Listed({{"ns/gone", {{"c", UnitsOf(0, {0})}}}}, 0,
           2000);  // 1 unit, planned on 0, since deleted
  std::vector<PlannedPod> plans = {{"ns/big", Request({{"c", 3}}), {{"c", 0}}, 1},
                                   {"ns/small", Request({{"c", 1}}), {{"c", 0}}, 2}};
  ASSERT_EQ(h.Ledger(plans, {}, inv).Open({1, 1}, 0),
            0);  // the gone pod looks like it holds small's slot
  // kubelet admits big: the advice and Allocate give it units 0-2 of GPU 0, unit 0 among them.
  h.Advised(0, SlotKey{3, 3}, 3, false);
  h.Allocated(UnitsOf(0, {0, 1, 2}), 0, 100);
  const std::vector<HeldSlot> held = h.Held(plans, {}, inv);
  ASSERT_EQ(held.size(), 1u) << "unit 0 counted for two holders";
  EXPECT_EQ(held[0].key, (SlotKey{3, 3}));
  const SlotLedger l = h.Ledger(plans, {}, inv);
  EXPECT_EQ(l.Open({1, 1}, 0), 1);  // small's own slot is open for it
  EXPECT_EQ(l.Open({3, 3}, 0), 0);
}

// A compute share is part of its slot's key: pending slots that ask the same size first with
// another share clash (the agent gives a first request the share of the slot it serves), and
// the advice kubelet took names the share for Allocate.
TEST(ComputeShares, PartOfTheKeyTheClashAndTheAdvice) {
  ContainerShare a{"a", 3};
  a.core = 30;
  ContainerShare b{"b", 2};
  EXPECT_EQ(SlotKeys(Request({a, b})), (std::vector<SlotKey>{{3, 3, 30}, {2, 2, 0}}));
  EXPECT_EQ(SlotKeyText({3, 3, 30}, MemoryUnit::kGiB), "3 GiB, compute 30/100");
  const std::map<SlotKey, int> pending = {{{3, 3, 30}, 1}};
  EXPECT_FALSE(FreshConflict({{3, 3, 30}}, pending, MemoryUnit::kGiB).has_value());
  auto why = FreshConflict({{3, 3, 0}}, pending, MemoryUnit::kGiB);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("a pod asking 3 GiB, compute 30/100 is still being admitted here and "
                              "this one asks 3 GiB"));
  EXPECT_TRUE(FreshConflict({{3, 3, 50}}, pending, MemoryUnit::kGiB).has_value());
  EXPECT_FALSE(FreshConflict({{4, 4, 50}}, pending, MemoryUnit::kGiB).has_value());
  // The agent: the advised key comes back from Allocated when kubelet took the advice.
  KubeletHoldings h;
  h.Advised(0, SlotKey{3, 3, 30}, 3, false);
  EXPECT_EQ(h.Allocated(UnitsOf(0, {0, 1, 2}), 0, 100), (SlotKey{3, 3, 30}));
  h.Advised(0, SlotKey{3, 3, 30}, 3, false);
  EXPECT_FALSE(h.Allocated(UnitsOf(1, {0, 1, 2}), 1, 100).has_value()) << "another GPU";
  // Without the advice: the share of the pending slots that ask that size first.
  SlotLedger l;
  l.pending = {{"ns/x", "a", {3, 3, 30}, 0, 1}, {"ns/y", "b", {2, 2, 0}, 1, 2}};
  EXPECT_EQ(PendingCore(l, 3), 30);
  EXPECT_EQ(PendingCore(l, 2), 0);
  EXPECT_EQ(PendingCore(l, 7), 0);
}

TEST(SettledPlanMoves, APodOffItsPlanFollowsItWhenNobodyOfItsKeyIsPending) {
  // X planned on 1 sits on 0: its swap partner (planned on 0, held on 1) is gone.
  CountedPod x{
      "ns/x", Request({{"c", 3}}, {{"i", 1}}), {{"c", 1}, {"i", 1}}, {{"c", 0}, {"i", 0}}, true};
  auto moves = SettledPlanMoves({x}, true);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves["ns/x"], (ContainerGpus{{"c", 0}, {"i", 0}}));
  EXPECT_TRUE(SettledPlanMoves({x}, /*settled=*/false).empty());
  // A swapped pair: both held where the other was planned; nothing is empty.
  CountedPod w{
      "ns/w", Request({{"c", 3}}, {{"i", 1}}), {{"c", 0}, {"i", 0}}, {{"c", 1}, {"i", 1}}, true};
  EXPECT_TRUE(SettledPlanMoves({x, w}, true).empty());
  // A pod of the same key still pending (it may need the slot on 1): nothing moves.
  CountedPod p{
      "ns/p", Request({{"c", 3}}, {{"i", 1}}), {{"c", 0}, {"i", 0}}, {{"c", 0}, {"i", 0}}, false};
  EXPECT_TRUE(SettledPlanMoves({x, p}, true).empty());
  // A pending pod of another key does not hold X back.
  CountedPod q{"ns/q", Request({{"c", 5}}), {{"c", 0}}, {{"c", 0}}, false};
  EXPECT_EQ(SettledPlanMoves({x, q}, true).size(), 1u);
}

TEST(SettledPlanMoves, AChainOfSwapsUnwinds) {
  // X planned 1 held 0, Y planned 2 held 1: the slot on 2 is empty, GPU 0 over-held.
  CountedPod x{"ns/x", Request({{"c", 3}}), {{"c", 1}}, {{"c", 0}}, true};
  CountedPod y{"ns/y", Request({{"c", 3}}), {{"c", 2}}, {{"c", 1}}, true};
  auto moves = SettledPlanMoves({y, x}, true);
  ASSERT_EQ(moves.size(), 1u) << "Y's move is safe only once X's is made";
  EXPECT_EQ(moves["ns/x"], (ContainerGpus{{"c", 0}}));
  x.planned = moves["ns/x"];
  moves = SettledPlanMoves({y, x}, true);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves["ns/y"], (ContainerGpus{{"c", 1}}));
}

TEST(RecentAllocations, ListedOrStaleEntriesGo) {
  RecentAllocations r;
  r.Add(UnitsOf(0, {0, 1}), 0, {2, 3}, 1000, false);
  r.Add(UnitsOf(0, {0, 1, 2}), 0, {3, 3}, 1001,
        true);  // the app container reusing the init's units
  r.Add(UnitsOf(1, {4, 5, 6}), 1, {3, 3}, 1002, false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r.Held()[0].key, (SlotKey{2, 3}));
  EXPECT_EQ(r.Held()[0].pod, "");
  // A List that started before kubelet recorded them does not drop them within the grace.
  r.Observe({}, 1500, 2000);
  EXPECT_EQ(r.size(), 2u);
  // One shows up; the other is gone after the grace (the admission failed).
  r.Observe({UnitDeviceId(GpuUuid(0), 2)}, 1600, 2000);
  EXPECT_EQ(r.size(), 1u);
  r.Observe({}, 5000, 2000);
  EXPECT_EQ(r.size(), 0u);
}

}  // namespace
}  // namespace gpushare::memshare
