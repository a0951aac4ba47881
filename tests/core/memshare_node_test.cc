// The node side of memory shares as pure functions (core/memshare_node.h): the inventory
// annotation, GetPreferredAllocation's choice, Allocate's one-GPU check and environment, and
// what the reconciler writes from PodResources records.
#include "core/memshare_node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/interposer_contract.h"
#include "tests/core/test_inventories.h"

namespace gpushare::memshare {
namespace {

using gpushare::testing::GpuUuid;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Inventory Sized(std::vector<uint64_t> mib) {
  Inventory inv;
  for (size_t i = 0; i < mib.size(); ++i)
    inv.gpus.push_back(gpushare::testing::WholeGpu(static_cast<int>(i), mib[i]));
  return inv;
}

ResourcePlan Plan(const Inventory& inv, const NodeConfig& c) {
  auto p = BuildResourcePlan(inv, c);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : ResourcePlan{};
}

NodeConfig MemoryOn(std::vector<std::string> gpus = {}) {
  NodeConfig c;
  DeviceSelector s;
  if (!gpus.empty()) {
    s.kind = DeviceSelector::Kind::kList;
    s.items = gpus;
  }
  c.gpushare.memory_shares.devices = s;
  return c;
}

std::vector<std::string> UnitsOf(int gpu, std::vector<int> js) {
  std::vector<std::string> out;
  for (int j : js) out.push_back(UnitDeviceId(GpuUuid(gpu), j));
  return out;
}

std::vector<std::string> AllUnits(const PlannedResource& r) {
  std::vector<std::string> out;
  for (const auto& d : r.devices) out.push_back(d.id);
  return out;
}

TEST(NodeInventory, ModesUnitsAndHealthPerGpu) {
  Inventory inv = Sized({24576, 24576, 16160, 23028});
  NodeConfig c = MemoryOn({"0", "1", "2"});
  c.gpushare.max_clients_per_gpu = 20;
  ResourcePlan p = Plan(inv, c);
  // GPU 1 lost its health.
  for (auto& r : p.resources)
    for (auto& d : r.devices)
      if (d.gpu_index == 1) d.healthy = false;
  NodeInventory n = BuildNodeInventory(inv, c, p);
  ASSERT_EQ(n.gpus.size(), 4u);
  EXPECT_EQ(n.max_clients_per_gpu, 20);
  EXPECT_EQ(n.unit, MemoryUnit::kGiB);
  EXPECT_EQ(n.gpus[0].mode, "memory");
  EXPECT_EQ(n.gpus[0].units, 24);
  EXPECT_EQ(n.gpus[0].uuid, GpuUuid(0));
  EXPECT_EQ(n.gpus[0].model, "NVIDIA A10");
  EXPECT_EQ(n.gpus[0].memory_mib, 24576);
  EXPECT_TRUE(n.gpus[0].healthy);
  EXPECT_FALSE(n.gpus[1].healthy);
  EXPECT_EQ(n.gpus[2].units, 15);
  EXPECT_EQ(n.gpus[3].mode, "exclusive");
  EXPECT_EQ(n.gpus[3].units, 0);
  GpuCount count = CountMemoryGpus(n);
  EXPECT_EQ(count.capacity, 3);
  EXPECT_EQ(count.allocatable, 2);
  // The encoding round-trips through the scheduler's decoder.
  auto back = DecodeInventory(EncodeInventory(n));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->gpus.size(), 4u);
  EXPECT_FALSE(back->gpus[1].ServesMemoryShares());
  EXPECT_FALSE(back->gpus[3].ServesMemoryShares());
  EXPECT_TRUE(back->gpus[2].ServesMemoryShares());
}

TEST(NodeInventory, TimeSlicedGpusAreMarked) {
  Inventory inv = Sized({24576, 24576});
  NodeConfig c = MemoryOn({"0"});
  ReplicatedResource r;
  r.name = "nvidia.com/gpu";
  r.replicas = 4;
  r.devices.kind = DeviceSelector::Kind::kList;
  r.devices.items = {"1"};
  r.field_path = "sharing.timeSlicing.resources[0]";
  c.time_slicing.resources.push_back(r);
  NodeInventory n = BuildNodeInventory(inv, c, Plan(inv, c));
  EXPECT_EQ(n.gpus[0].mode, "memory");
  EXPECT_EQ(n.gpus[1].mode, "time-slicing");
}

PodRequest Request(std::vector<ContainerShare> app, std::vector<ContainerShare> init = {}) {
  PodRequest r;
  r.app = std::move(app);
  r.init = std::move(init);
  return r;
}

// A pod of one container `c` of `units`, planned on `gpu`.
PlannedPod Planned(const std::string& key, int64_t units, int gpu, int64_t t) {
  return {key, Request({{"c", units}}), {{"c", gpu}}, t};
}

class ChooseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    inv_ = Sized({24576, 24576, 24576});
    plan_ = Plan(inv_, MemoryOn());
    res_ = FindMemoryResource(plan_);
    ASSERT_NE(res_, nullptr);
  }
  Inventory inv_;
  ResourcePlan plan_;
  const PlannedResource* res_ = nullptr;
};

TEST_F(ChooseTest, OldestPendingSlotOfThisSizeGetsUnitsOnItsGpu) {
  SlotLedger l = BuildLedger(
      {Planned("ns/young", 3, 0, 200), Planned("ns/old", 3, 2, 100), Planned("ns/big", 5, 1, 50)},
      {});
  EXPECT_EQ(l.pending.front().pod, "ns/big");
  auto c = ChooseUnits(*res_, {AllUnits(*res_), {}, 3}, l);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->gpu, 2);
  EXPECT_EQ(c->reason, "planned");
  EXPECT_TRUE(c->matched_pending);
  ASSERT_TRUE(c->steered.has_value());
  EXPECT_EQ(c->steered->pod, "ns/old");
  EXPECT_EQ(c->key, (SlotKey{3, 3}));
  EXPECT_EQ(c->ids, UnitsOf(2, {0, 1, 2}));
}

// Kubelet admitted X (planned on GPU 1) into W's slot on GPU 0. W's turn: its own GPU has no
// open slot any more, X's vacated slot on GPU 1 has.
TEST_F(ChooseTest, ADisplacedPodTakesTheSlotItsSwapPartnerVacated) {
  std::vector<PlannedPod> plans = {Planned("ns/w", 3, 0, 100), Planned("ns/x", 3, 1, 200),
                                   Planned("ns/z", 3, 2, 300)};
  SlotLedger l = BuildLedger(plans, {{{3, 3}, 0, "ns/x", 0}});
  EXPECT_EQ(l.Open({3, 3}, 0), 0);
  EXPECT_EQ(l.Vacated({3, 3}, 1), 1);
  auto c = ChooseUnits(*res_, {AllUnits(*res_), {}, 3}, l);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "swapped");
  EXPECT_EQ(c->gpu, 1);
  EXPECT_EQ(c->steered->pod, "ns/w");
  // The same while the allocation is not listed yet (held by an unknown pod).
  l = BuildLedger(plans, {{{3, 3}, 0, "", -1}});
  c = ChooseUnits(*res_, {AllUnits(*res_), {}, 3}, l);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->gpu, 1);
}

TEST_F(ChooseTest, LowestFreeUnitsOfTheGpuAreTakenAndOnlyFromIt) {
  std::vector<std::string> avail = AllUnits(*res_);
  // GPU 1 units 0..20 are in use: 3 left.
  avail.erase(std::remove_if(avail.begin(), avail.end(),
                             [](const std::string& id) {
                               auto u = ParseUnitDeviceId(id);
                               return u->gpu_uuid == GpuUuid(1) && u->j <= 20;
                             }),
              avail.end());
  auto c = ChooseUnits(*res_, {avail, {}, 3}, BuildLedger({Planned("ns/p", 3, 1, 1)}, {}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ids, UnitsOf(1, {21, 22, 23}));
  // 4 do not fit on GPU 1 any more: best fit elsewhere, never a mix.
  c = ChooseUnits(*res_, {avail, {}, 4}, BuildLedger({Planned("ns/p", 4, 1, 1)}, {}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "unpromised_best_fit");
  EXPECT_FALSE(c->key.has_value());
  EXPECT_EQ(c->gpu, 0);
  EXPECT_EQ(c->ids, UnitsOf(0, {0, 1, 2, 3}));
}

TEST_F(ChooseTest, WithoutAPlanBestFitPacksAndKeepsPromises) {
  std::vector<std::string> avail;
  for (int j = 0; j < 24; ++j) avail.push_back(UnitDeviceId(GpuUuid(0), j));
  for (int j = 10; j < 24; ++j) avail.push_back(UnitDeviceId(GpuUuid(1), j));  // 14 free
  for (int j = 20; j < 24; ++j) avail.push_back(UnitDeviceId(GpuUuid(2), j));  // 4 free
  auto c = ChooseUnits(*res_, {avail, {}, 3}, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "unpromised_best_fit");
  EXPECT_EQ(c->gpu, 2);
  EXPECT_FALSE(c->steered.has_value());
  EXPECT_FALSE(c->matched_pending);
  // GPU 2's 4 free units are promised to a pending 4-unit pod: a 3-unit pod nobody planned
  // goes to GPU 1.
  c = ChooseUnits(*res_, {avail, {}, 3}, BuildLedger({Planned("ns/four", 4, 2, 1)}, {}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "unpromised_best_fit");
  EXPECT_EQ(c->gpu, 1);
  c = ChooseUnits(*res_, {avail, {}, 30}, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "no_gpu_has_room");
  EXPECT_EQ(c->gpu, 0);
  EXPECT_EQ(c->ids.size(), 24u);  // kubelet fills the rest; Allocate will refuse the mix
}

TEST_F(ChooseTest, AnOddSlotNeedsRoomForItsWholeDemand) {
  // init 2 GiB then app 3 GiB: kubelet asks 2 first; GPU 2 has only 2 free.
  std::vector<std::string> avail = UnitsOf(2, {22, 23});
  for (int j = 0; j < 24; ++j) avail.push_back(UnitDeviceId(GpuUuid(0), j));
  PlannedPod p{"ns/odd", Request({{"app", 3}}, {{"init", 2}}), {{"app", 2}, {"init", 2}}, 1};
  SlotLedger l = BuildLedger({p}, {});
  EXPECT_EQ(l.pending.front().key, (SlotKey{2, 3}));
  auto c = ChooseUnits(*res_, {avail, {}, 2}, l);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->gpu, 2);
}

TEST_F(ChooseTest, MustIncludeDecidesTheGpu) {
  std::vector<std::string> avail = AllUnits(*res_);
  auto c = ChooseUnits(*res_, {avail, UnitsOf(1, {5, 6}), 4},
                       BuildLedger({Planned("ns/p", 4, 2, 1)}, {}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "must_include");
  EXPECT_EQ(c->ids,
            (std::vector<std::string>{UnitDeviceId(GpuUuid(1), 5), UnitDeviceId(GpuUuid(1), 6),
                                      UnitDeviceId(GpuUuid(1), 0), UnitDeviceId(GpuUuid(1), 1)}));
}

TEST_F(ChooseTest, BadQueries) {
  EXPECT_FALSE(ChooseUnits(*res_, {AllUnits(*res_), {}, 0}, {}).ok());
  auto c = ChooseUnits(*res_, {AllUnits(*res_), UnitsOf(0, {0, 1, 2}), 2}, {});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("more than allocation_size 2"));
  // Unknown IDs are ignored.
  c = ChooseUnits(*res_, {{"bogus", "GPU-x-_-1", UnitDeviceId(GpuUuid(0), 3)}, {}, 1}, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ids, UnitsOf(0, {3}));
}

TEST_F(ChooseTest, CheckUnitsRefusesAMixAndDerivesTheLimit) {
  std::vector<const PlannedDevice*> one, mix;
  for (const auto& d : res_->devices) {
    if (d.gpu_index == 2 && d.replica < 3) one.push_back(&d);
    if (d.replica < 2 && d.gpu_index < 2) mix.push_back(&d);
  }
  auto a = CheckUnits(*res_, one);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->gpu, 2);
  EXPECT_EQ(a->units, 3);
  EXPECT_EQ(a->gpu_units, 24);
  EXPECT_EQ(a->limit_mib, 3072);
  auto env = AllocationEnv(*a);
  EXPECT_EQ(env["ALIYUN_COM_GPU_MEM_IDX"], "2");
  EXPECT_EQ(env["ALIYUN_COM_GPU_MEM_CONTAINER"], "3");
  EXPECT_EQ(env["ALIYUN_COM_GPU_MEM_POD"], "3");
  EXPECT_EQ(env["ALIYUN_COM_GPU_MEM_DEV"], "24");
  auto bad = CheckUnits(*res_, mix);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("span 2 GPUs (GPU 0: 2 units, GPU 1: 2 units)"));
  EXPECT_THAT(bad.status().message(), HasSubstr("must come from one GPU"));
}

TEST(Reconcile, ActualGpusFromUnitIdsWithInitContainersOnTheFirstGpu) {
  Inventory inv = Sized({24576, 24576});
  PodRequest req = Request({{"main", 3}, {"side", 2}}, {{"setup", 4}});
  auto a = ActualGpus(
      req, {{"main", UnitsOf(1, {0, 1, 2})}, {"side", UnitsOf(0, {7, 8})}, {"queue-proxy", {}}},
      inv);
  EXPECT_TRUE(a.complete);
  EXPECT_TRUE(a.problems.empty());
  EXPECT_EQ(a.gpus, (ContainerGpus{{"main", 1}, {"side", 0}, {"setup", 1}}));
  // A container not seen yet: incomplete, nothing for the init container.
  a = ActualGpus(req, {{"main", UnitsOf(1, {0, 1, 2})}}, inv);
  EXPECT_FALSE(a.complete);
  // Problems are reported, not fatal.
  a = ActualGpus(Request({{"main", 3}}),
                 {{"main", {UnitDeviceId("GPU-gone", 0), "junk"}}, {"other", UnitsOf(0, {1})}},
                 inv);
  EXPECT_FALSE(a.complete);
  EXPECT_EQ(a.problems.size(), 3u);
  a = ActualGpus(Request({{"main", 3}}),
                 {{"main", {UnitDeviceId(GpuUuid(0), 0), UnitDeviceId(GpuUuid(1), 0)}}}, inv);
  EXPECT_THAT(a.problems, ElementsAre(HasSubstr("units span GPUs")));
}

TEST(Reconcile, ChangesOnlyWhatIsNotTrueYet) {
  PodRequest req = Request({{"user-container", 3}});
  std::map<std::string, std::string> ann = BindAnnotations(req, {2}, 24, 1000);
  // kubelet gave it GPU 5 (an identical pod took GPU 2).
  auto changes = ReconcileChanges(ann, req, {{"user-container", 5}}, 24);
  EXPECT_EQ(changes["ALIYUN_COM_GPU_MEM_ASSIGNED"], "true");
  EXPECT_EQ(changes["ALIYUN_COM_GPU_MEM_IDX"], "5");
  EXPECT_EQ(changes["gpushare.io/gpu-mem-confirmed"], "{\"user-container\":5}");
  EXPECT_EQ(changes.count("ALIYUN_COM_GPU_MEM_DEV"), 0u);  // same size
  for (const auto& [k, v] : changes) ann[k] = v;
  EXPECT_TRUE(ReconcileChanges(ann, req, {{"user-container", 5}}, 24).empty());
  PodAssignment a = ResolveAssignment(ann, req);
  EXPECT_EQ(a.state, AssignmentState::kConfirmed);
  EXPECT_EQ(a.gpus.at("user-container"), 5);
  // A GPU of another size updates DEV.
  EXPECT_EQ(ReconcileChanges(ann, req, {{"user-container", 5}}, 80)["ALIYUN_COM_GPU_MEM_DEV"],
            "80");
}

// --- alibabacloud.com/gpu-milli ----------------------------------------------------------------

std::vector<std::string> MilliIds(int gpu, int from, int to) {
  std::vector<std::string> out;
  for (int j = from; j < to; ++j) out.push_back(MilliDeviceId(GpuUuid(gpu), j));
  return out;
}

class MilliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    inv_ = Sized({16384, 16384, 16384, 16384});
    plan_ = Plan(inv_, MemoryOn());
    res_ = plan_.Find(std::string(kMilliResource));
    ASSERT_NE(res_, nullptr);
  }
  std::vector<const PlannedDevice*> Devices(int gpu, int from, int to) const {
    std::vector<const PlannedDevice*> out;
    for (const auto& d : res_->devices)
      if (d.gpu_index == gpu && d.replica >= from && d.replica < to) out.push_back(&d);
    return out;
  }
  Inventory inv_;
  ResourcePlan plan_;
  const PlannedResource* res_ = nullptr;
};

TEST_F(MilliTest, AFractionIsLimitedToItsShareOfTheGpuExactly) {
  auto a = CheckUnits(*res_, Devices(2, 10, 260));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->milli);
  EXPECT_EQ(a->gpu, 2);
  EXPECT_EQ(a->units, 250);
  EXPECT_EQ(a->gpu_units, 1000);
  EXPECT_EQ(a->limit_mib, 4096);  // 250 x 16384 / 1000, not 250 x 16
  EXPECT_EQ(AllocationEnv(*a),
            (std::map<std::string, std::string>{{"ALIYUN_COM_GPU_MEM_IDX", "2"}}));
  // The interposer gets the same exact figure.
  auto d = InterposerDevicesFor(Devices(2, 10, 260));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].memory_limit_mib, 4096u);
  EXPECT_EQ(d[0].sm_limit_percent, 0u);  // computeLimit none
}

TEST_F(MilliTest, WholeGpusTakeEveryDeviceOfEachAndHaveNoLimit) {
  std::vector<const PlannedDevice*> two = Devices(1, 0, 1000);
  for (const PlannedDevice* p : Devices(3, 0, 1000)) two.push_back(p);
  auto a = CheckUnits(*res_, two);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->gpus, (std::vector<int>{1, 3}));
  EXPECT_EQ(a->limit_mib, 0);
  EXPECT_EQ(AllocationEnv(*a).at("ALIYUN_COM_GPU_MEM_IDX"), "1,3");
  for (const InterposerDevice& d : InterposerDevicesFor(two)) {
    EXPECT_EQ(d.memory_limit_mib, 0u) << d.uuid;
    EXPECT_EQ(d.sm_limit_percent, 0u) << d.uuid;
  }
  EXPECT_FALSE(AnyLimited(InterposerDevicesFor(two)));
  // Part of one GPU and all of another is neither a fraction nor whole GPUs.
  std::vector<const PlannedDevice*> mix = Devices(0, 0, 1000);
  for (const PlannedDevice* p : Devices(1, 0, 500)) mix.push_back(p);
  auto bad = CheckUnits(*res_, mix);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("the 1500 milli of this container span 2 GPUs"));
  EXPECT_THAT(bad.status().message(), HasSubstr("whole GPUs take all 1000 of each"));
}

TEST_F(MilliTest, WholeGpusGoToThePlannedGpusThenToFreeOnes) {
  std::vector<std::string> avail = MilliIds(0, 0, 1000);
  for (int g : {1, 2, 3}) {
    auto m = MilliIds(g, g == 1 ? 1 : 0, 1000);  // GPU 1 has a fraction on it
    avail.insert(avail.end(), m.begin(), m.end());
  }
  auto c = ChooseWholeGpus(*res_, {avail, {}, 2000}, {3, 1});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->reason, "free_gpu");  // GPU 1 is not whole: GPU 3 planned, then GPU 0 free
  ASSERT_EQ(c->ids.size(), 2000u);
  EXPECT_EQ(c->ids.front(), MilliDeviceId(GpuUuid(3), 0));
  EXPECT_EQ(c->ids.back(), MilliDeviceId(GpuUuid(0), 999));
  c = ChooseWholeGpus(*res_, {avail, {}, 1000}, {2});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "planned");
  EXPECT_EQ(c->gpu, 2);
  // Four asked, three whole: the most free devices, for Allocate to refuse with the counts.
  c = ChooseWholeGpus(*res_, {avail, {}, 4000}, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "no_gpu_has_room");
  EXPECT_EQ(c->ids.size(), 3999u);
  EXPECT_FALSE(ChooseWholeGpus(*res_, {avail, {}, 1500}, {}).ok());
}

TEST_F(MilliTest, FractionsAreSteeredBySlotsInMilli) {
  // Two pods of 250 milli planned on GPUs 2 and 0; kubelet's first request of 250 goes to GPU 2
  // (the older), all 250 from it.
  SlotLedger l = BuildLedger({{"ns/a", Request({{"c", 250}}), {{"c", 2}}, 1},
                              {"ns/b", Request({{"c", 250}}), {{"c", 0}}, 2}},
                             {});
  std::vector<std::string> avail;
  for (const auto& d : res_->devices) avail.push_back(d.id);
  auto c = ChooseUnits(*res_, {avail, {}, 250}, l);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "planned");
  EXPECT_EQ(c->gpu, 2);
  EXPECT_EQ(c->ids, MilliIds(2, 0, 250));
}

TEST(Reconcile, ActualGpusOfMilliDevices) {
  Inventory inv = Sized({16384, 16384, 16384});
  // Resolved as the scheduler resolves it (16 units per GPU): 250 milli hold 4 units.
  PodRequest frac = Request({{"main", 4, 250}});
  auto a = ActualGpus(frac, {{"main", MilliIds(1, 0, 250)}}, inv);
  EXPECT_TRUE(a.complete);
  EXPECT_TRUE(a.problems.empty()) << a.problems[0];
  EXPECT_EQ(a.gpus, (ContainerGpus{{"main", 1}}));
  a = ActualGpus(frac, {{"main", MilliIds(1, 0, 200)}}, inv);
  EXPECT_THAT(a.problems, ElementsAre(HasSubstr("holds 200 milli, its spec asks for 250")));
  // Two whole GPUs: the container's demands in GPU index order.
  PodRequest whole =
      Request({{"main", 16, 2000, true}, {WholeGpuSlotName("main", 1), 16, 2000, true}});
  auto both = MilliIds(2, 0, 1000);
  auto other = MilliIds(0, 0, 1000);
  both.insert(both.end(), other.begin(), other.end());
  a = ActualGpus(whole, {{"main", both}}, inv);
  EXPECT_TRUE(a.complete);
  EXPECT_EQ(a.gpus, (ContainerGpus{{"main", 0}, {"main/1", 2}}));
  a = ActualGpus(whole, {{"main", MilliIds(2, 0, 1000)}}, inv);
  EXPECT_FALSE(a.complete);
  EXPECT_THAT(a.problems, ElementsAre(HasSubstr("its spec asks for 2 whole GPU(s)")));
}

TEST(MilliIds, ParseBackToTheirGpu) {
  auto u = ParseUnitDeviceId(MilliDeviceId("GPU-a", 999));
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->milli);
  EXPECT_EQ(u->gpu_uuid, "GPU-a");
  EXPECT_EQ(u->j, 999);
  EXPECT_FALSE(ParseUnitDeviceId(UnitDeviceId("GPU-a", 3))->milli);
  EXPECT_FALSE(ParseUnitDeviceId("GPU-a-_-m").ok());
  EXPECT_FALSE(ParseUnitDeviceId("GPU-a-_-mm1").ok());
}

}  // namespace
}  // namespace gpushare::memshare
