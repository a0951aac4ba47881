// Fractions and whole GPUs (alibabacloud.com/gpu-milli) on memory-share GPUs: the request's
// rules (core/memshare.h), and the cache placing them beside aliyun.com/gpu-mem shares, reading
// them back from the API after a restart, and saying why a node cannot take them.
#include <gtest/gtest.h>

#include "core/memshare.h"
#include "core/reasons.h"
#include "kube/memshare_pod.h"
#include "scheduler/cache.h"
#include "scheduler/extender.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::scheduler {
namespace {

using namespace testing;
using K = NodeVerdict::Kind;
namespace ms = memshare;

ms::ContainerUnits Milli(const std::string& name, int64_t m, bool init = false) {
  ms::ContainerUnits c;
  c.name = name;
  c.init = init;
  c.milli_limit = m;
  return c;
}

TEST(MilliRequestTest, FractionsAndWholeGpusAreReadAndResolvedPerGpuSize) {
  Result<ms::PodRequest> r = ms::ComputePodRequest({Milli("a", 500), Milli("b", 2000)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->milli());
  EXPECT_TRUE(r->unresolved());
  // 500 milli of a 15-unit GPU: 7.5 rounded up; two whole GPUs: one demand each.
  Result<ms::PodRequest> on15 = r->Resolve(15);
  ASSERT_TRUE(on15.ok());
  EXPECT_FALSE(on15->unresolved());
  EXPECT_EQ(on15->Demands(), (std::vector<int64_t>{8, 15, 15}));
  EXPECT_EQ(on15->ShapeKey(), (std::vector<int64_t>{8, -15, -15}));
  EXPECT_EQ(on15->DemandContainers(), (std::vector<std::string>{"a", "b", "b/1"}));
  EXPECT_EQ(ms::SlotContainer("b/1"), "b");
  EXPECT_EQ(ms::SlotContainer("b"), "b");
  EXPECT_FALSE(r->Resolve(0).ok());
  // The smallest fraction still holds a unit.
  EXPECT_EQ(ms::ComputePodRequest({Milli("a", 1)})->Resolve(15)->Demands(),
            (std::vector<int64_t>{1}));
  // Four quarters of a 16-unit GPU fill it exactly.
  EXPECT_EQ(ms::ComputePodRequest({Milli("a", 250)})->Resolve(16)->Demands(),
            (std::vector<int64_t>{4}));
}

TEST(MilliRequestTest, InMilliUnitsCountsFractionsExactlyAndEverythingElseTimes1000) {
  const ms::PodRequest on15 =
      *ms::ComputePodRequest({Milli("a", 470), Milli("b", 1000)})->Resolve(15);
  // 470 of 15 units: 7.05 units (rounded to 8 by Resolve); a whole GPU: 15 units.
  EXPECT_EQ(on15.InMilliUnits(15).Demands(), (std::vector<int64_t>{7050, 15000}));
  EXPECT_EQ(on15.InMilliUnits(15).ShapeKey(), (std::vector<int64_t>{7050, -15000}));
  // Without the GPU size a fraction keeps its rounded units.
  EXPECT_EQ(on15.InMilliUnits(0).Demands(), (std::vector<int64_t>{8000, 15000}));
  ms::ContainerUnits init, app;
  init.name = "i";
  init.init = true;
  init.limit = 5;
  app.name = "m";
  app.limit = 3;
  const ms::PodRequest mem = *ms::ComputePodRequest({init, app});
  EXPECT_EQ(mem.InMilliUnits(15).Demands(), (std::vector<int64_t>{5000}));
  EXPECT_EQ(mem.InMilliUnits(15).app[0].units, 3000);
}

TEST(MilliRequestTest, BadRequestsNameTheContainerAndTheRule) {
  auto error = [](std::vector<ms::ContainerUnits> c) {
    Result<ms::PodRequest> r = ms::ComputePodRequest(c);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(error({Milli("a", 1500)}),
            "container \"a\": alibabacloud.com/gpu-milli 1500 is neither a fraction of one GPU "
            "(1..999) nor whole GPUs (1000, 2000, ... 16000)");
  EXPECT_NE(error({Milli("a", 17000)}).find("gpu-milli 17000 is neither"), std::string::npos);
  EXPECT_NE(error({Milli("i", 500, true)}).find("is for app containers only"), std::string::npos);
  ms::ContainerUnits mem;
  mem.name = "m";
  mem.limit = 3;
  EXPECT_EQ(error({mem, Milli("a", 500)}),
            "container \"m\" and container \"a\" ask aliyun.com/gpu-mem and "
            "alibabacloud.com/gpu-milli: a pod asks GPU memory in one of the two, not both");
  ms::ContainerUnits both = Milli("b", 500);
  both.limit = 2;
  EXPECT_NE(error({both}).find("container \"b\" asks both"), std::string::npos);
  ms::ContainerUnits differ = Milli("d", 500);
  differ.milli_request = 400;
  EXPECT_NE(error({differ}).find("request 400 differs from limit 500"), std::string::npos);
  EXPECT_EQ(error({Milli("z", 0)}), "ok");
}

TEST(MilliRequestTest, AKubePodReadsTheResourceOnlyWhereAsked) {
  const kube::Pod pod = DecodePodOrDie(MilliPod("p", 300));
  EXPECT_TRUE(kube::PodGpuRequest(pod)->milli());
  // The node agent's reader (memory shares only) does not see it.
  EXPECT_TRUE(kube::PodMemRequest(pod)->empty());
}

class MilliCacheTest : public ::testing::Test {
 protected:
  MilliCacheTest() { cache_ = Fresh(); }
  std::unique_ptr<GpuCache> Fresh() { return SyncedCache(&log_); }
  // Reserves and commits; returns the reservation (or sets last_error_).
  std::optional<Reservation> Bind(const json& pod, const std::string& node) {
    kube::Pod p = DecodePodOrDie(pod);
    Result<Reservation> r = cache_->Reserve(p, Req(pod), node, 1);
    if (!r.ok()) {
      last_error_ = r.status().message();
      return std::nullopt;
    }
    cache_->Commit(p.metadata.uid, r->token);
    return *r;
  }
  int64_t Used(const std::string& node, int gpu) {
    for (const GpuState& g : cache_->NodeGpus(node))
      if (g.index == gpu) return g.used;
    return -1;
  }
  NodeVerdict FilterOne(const json& pod, const std::string& node) {
    return cache_->Filter(Req(pod), {node}).at(0);
  }
  std::unique_ptr<GpuCache> cache_;
  std::string log_, last_error_;
};

TEST_F(MilliCacheTest, FractionsShareAGpuWithMemorySharesAndWholeGpusTakeFreeOnes) {
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("t4", Uniform(2, 16))));
  // A 4 GiB memory share, then half a GPU: both on one GPU (8 units for 500 milli).
  auto mem = Bind(SimplePod("mem", 4), "t4");
  ASSERT_TRUE(mem) << last_error_;
  auto half = Bind(MilliPod("half", 500), "t4");
  ASSERT_TRUE(half) << last_error_;
  EXPECT_EQ(half->request.Demands(), (std::vector<int64_t>{8}));
  EXPECT_EQ(half->demand_gpus[0], mem->demand_gpus[0]);
  const int shared = mem->demand_gpus[0];
  EXPECT_EQ(Used("t4", shared), 12);
  // A whole GPU: only the other one is entirely free.
  auto whole = Bind(MilliPod("whole", 1000), "t4");
  ASSERT_TRUE(whole) << last_error_;
  EXPECT_EQ(whole->demand_gpus, (std::vector<int>{1 - shared}));
  EXPECT_EQ(Used("t4", 1 - shared), 16);
  // A second whole GPU: none is free, and the verdict says so.
  const NodeVerdict v = FilterOne(MilliPod("whole2", 1000), "t4");
  EXPECT_EQ(v.kind, K::kFailed);
  EXPECT_NE(v.reason.find("16 GiB"), std::string::npos) << v.reason;
  // A quarter (4 units) still fits beside the share and the half.
  EXPECT_EQ(FilterOne(MilliPod("quarter", 250), "t4").kind, K::kFits);
}

TEST_F(MilliCacheTest, SeveralWholeGpusGoToDistinctGpusAndReadBackAfterARestart) {
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("g8", Uniform(4, 32))));
  const json pod = MilliPod("train", 3000);
  auto r = Bind(pod, "g8");
  ASSERT_TRUE(r) << last_error_;
  ASSERT_EQ(r->demand_gpus.size(), 3u);
  std::set<int> gpus(r->demand_gpus.begin(), r->demand_gpus.end());
  EXPECT_EQ(gpus.size(), 3u);
  EXPECT_EQ(r->containers.size(), 3u);
  EXPECT_TRUE(r->containers.count("main") == 1 && r->containers.count("main/1") == 1 &&
              r->containers.count("main/2") == 1);
  // The API's copy after the bind, read by a fresh cache (a restart): the same three GPUs full.
  json bound = pod;
  bound["spec"]["nodeName"] = "g8";
  for (const auto& [k, v] : ms::BindAnnotations(r->request, r->demand_gpus, 32, 1))
    bound["metadata"]["annotations"][k] = v;
  cache_ = Fresh();
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("g8", Uniform(4, 32))));
  cache_->UpsertPod(DecodePodOrDie(bound));
  int full = 0;
  for (const GpuState& g : cache_->NodeGpus("g8")) full += g.used == 32 ? 1 : 0;
  EXPECT_EQ(full, 3);
  // Two whole GPUs no longer fit; one does.
  EXPECT_EQ(FilterOne(MilliPod("two", 2000), "g8").kind, K::kFailed);
  EXPECT_EQ(FilterOne(MilliPod("one", 1000), "g8").kind, K::kFits);
}

TEST_F(MilliCacheTest, APodBoundBeforeItsNodeIsKnownCountsWhenTheInventoryArrives) {
  json bound = MilliPod("early", 1000);
  bound["spec"]["nodeName"] = "late";
  ms::PodRequest resolved = *Req(bound).Resolve(16);
  for (const auto& [k, v] : ms::BindAnnotations(resolved, {1}, 16, 1))
    bound["metadata"]["annotations"][k] = v;
  cache_->UpsertPod(DecodePodOrDie(bound));
  EXPECT_NE(log_.find("event=pod_request_waits pod=default/early node=late"), std::string::npos)
      << log_;
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("late", Uniform(2, 16))));
  EXPECT_EQ(Used("late", 1), 16);
  EXPECT_EQ(Used("late", 0), 0);
}

TEST_F(MilliCacheTest, ANodeWithGpusOfTwoSizesRefusesFractionsAndSaysWhy) {
  cache_->UpsertNode(
      DecodeNodeOrDie(NodeJson("mixed", std::vector<GpuSpec>{GpuSpec{16}, GpuSpec{24}})));
  const NodeVerdict v = FilterOne(MilliPod("p", 500), "mixed");
  EXPECT_EQ(v.kind, K::kUnresolvable);
  EXPECT_EQ(v.code, reasons::kNoSharedGpu);
  EXPECT_NE(v.reason.find("differ in size"), std::string::npos) << v.reason;
  EXPECT_FALSE(Bind(MilliPod("p", 500), "mixed"));
  EXPECT_NE(last_error_.find("differ in size"), std::string::npos) << last_error_;
  // Memory shares still go there.
  EXPECT_EQ(FilterOne(SimplePod("m", 20), "mixed").kind, K::kFits);
}

TEST_F(MilliCacheTest, ScoresSpanNodesOfDifferentSizesWithOneTopChoice) {
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("small", Uniform(2, 16))));
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("big", Uniform(8, 32))));
  ASSERT_TRUE(Bind(MilliPod("first", 500), "small"));
  const std::vector<int64_t> s =
      cache_->Score(Req(MilliPod("next", 500)), {"small", "big", "small"});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(std::count(s.begin(), s.end(), 10), 1);
  EXPECT_EQ(s[2], -1);  // a repeat
  EXPECT_TRUE(s[0] >= 0 && s[1] >= 0);
}

// Fractions count as the share of the GPU they are, not as units rounded up: two 470s fill a
// 15-unit GPU to 940 of 1000 (rounded to 8 units each they would need 16).
TEST_F(MilliCacheTest, FractionsCountExactlySoTwoOf470ShareA15UnitGpu) {
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("t4", Uniform(1, 15))));
  ASSERT_TRUE(Bind(MilliPod("a", 470), "t4")) << last_error_;
  ASSERT_TRUE(Bind(MilliPod("b", 470), "t4")) << last_error_;
  EXPECT_EQ(Used("t4", 0), 15);  // 14.1 units, reported whole
  EXPECT_EQ(FilterOne(MilliPod("c", 60), "t4").kind, K::kFits);
  const NodeVerdict v = FilterOne(MilliPod("d", 61), "t4");
  EXPECT_EQ(v.kind, K::kFailed);
  // The reason says what is free in units, to the thousandth: 0.9 of 15.
  EXPECT_NE(v.reason.find("with 0.9 GiB free of 15 GiB"), std::string::npos) << v.reason;
  // A memory share counts in whole units beside them: 1 unit is more than is left.
  EXPECT_EQ(FilterOne(SimplePod("m", 1), "t4").kind, K::kFailed);
}

// A fraction is one shape on GPUs of every size, and the policy compares GPUs by the share of
// them that is free: `bestfit` puts a quarter where the least of a GPU is left (the 32-unit GPU
// with half free), not where the fewest units are left (the 16-unit one with 10 of 16 free).
TEST_F(MilliCacheTest, APolicyComparesGpusOfDifferentSizesByTheirFreeShare) {
  CacheOptions o;
  o.policy = "bestfit";
  o.log = [this](const std::string& l) { log_ += l + "\n"; };
  cache_ = std::make_unique<GpuCache>(o);
  cache_->SetSynced(true);
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("small", Uniform(1, 16))));
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("big", Uniform(1, 32))));
  ASSERT_TRUE(Bind(SimplePod("a", 6), "small")) << last_error_;
  ASSERT_TRUE(Bind(SimplePod("b", 16), "big")) << last_error_;
  const std::vector<int64_t> s = cache_->Score(Req(MilliPod("q", 250)), {"small", "big"});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1], 10);
  EXPECT_LT(s[0], 10);
  EXPECT_NE(log_.find("event=engine_units common_units=32"), std::string::npos) << log_;
}

// A node with a GPU size the engine's unit does not divide changes the unit; what is booked
// stays exact: 470 then 530 fill a 16-unit GPU before and after a 24-unit node joins.
TEST_F(MilliCacheTest, ANewGpuSizeChangesTheEngineUnitAndKeepsBookingsExact) {
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("a", Uniform(1, 16))));
  ASSERT_TRUE(Bind(MilliPod("p", 470), "a")) << last_error_;
  EXPECT_EQ(FilterOne(MilliPod("q", 531), "a").kind, K::kFailed);
  cache_->UpsertNode(DecodeNodeOrDie(NodeJson("b", Uniform(1, 24))));
  EXPECT_EQ(FilterOne(MilliPod("q", 531), "a").kind, K::kFailed);
  EXPECT_EQ(FilterOne(MilliPod("q", 1000), "b").kind, K::kFits);
  ASSERT_TRUE(Bind(MilliPod("q", 530), "a")) << last_error_;
  EXPECT_EQ(Used("a", 0), 16);
  EXPECT_EQ(FilterOne(MilliPod("r", 1), "a").kind, K::kFailed);
  EXPECT_NE(log_.find("event=engine_units common_units=48"), std::string::npos) << log_;
}

}  // namespace
}  // namespace gpushare::scheduler

namespace gpushare::scheduler {
namespace {

// A node of two 16-unit GPUs with `cpu` allocatable and 256 GiB of memory.
kube::Node CpuNode(const std::string& name, const std::string& cpu) {
  json n = NodeJson(name, Uniform(2, 16));
  n["status"]["allocatable"]["cpu"] = cpu;
  n["status"]["allocatable"]["memory"] = "262144Mi";
  return DecodeNodeOrDie(n);
}

// A synced cache of CpuNode(name, cpu) for each pair, in order.
std::unique_ptr<GpuCache> CpuCache(const std::vector<std::pair<std::string, std::string>>& nodes) {
  auto cache = std::make_unique<GpuCache>(CacheOptions{});
  cache->SetSynced(true);
  for (const auto& [name, cpu] : nodes) cache->UpsertNode(CpuNode(name, cpu));
  return cache;
}

TEST(CpuAwareScoreTest, ScoresWeighTheNodesCpuAndMemory) {
  const std::unique_ptr<GpuCache> c = CpuCache({{"roomy", "64000m"}, {"tight", "4"}});
  GpuCache& cache = *c;
  const kube::CpuMemory asks{8000, int64_t{16} << 30};
  const std::vector<int64_t> s = cache.Score(Req(MilliPod("p", 500)), {"roomy", "tight"}, asks);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], 10);  // the only node with 8 CPUs free
  EXPECT_EQ(s[1], 0);
}

// The policy's target workload knows the CPU its pods ask: for FGD a node without the CPU for
// the typical pod (8 CPUs) strands all its idle GPU for it, so a small pod is best placed there
// (it uses GPU nobody typical could); blind to CPU, both nodes tie and the first one wins.
TEST(CpuAwareScoreTest, TheTargetWorkloadCarriesThePodsCpu) {
  CacheOptions o;
  o.policy = "fgd";
  auto c = std::make_unique<GpuCache>(o);
  c->SetSynced(true);
  c->UpsertNode(CpuNode("roomy", "64"));
  c->UpsertNode(CpuNode("tight", "4"));
  json typical = MilliPod("typical", 250);
  typical["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "8"}};
  const kube::Pod t = DecodePodOrDie(typical);
  Result<Reservation> r = c->Reserve(t, Req(typical), "roomy", 1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  c->Commit(t.metadata.uid, r->token);
  const kube::CpuMemory small{2000, 0};
  (void)c->Score(Req(MilliPod("small", 250)), {"roomy", "tight"}, small);  // the shape, known
  const std::vector<int64_t> s = c->Score(Req(MilliPod("small", 250)), {"roomy", "tight"}, small);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1], 10);
  EXPECT_LT(s[0], 10);
}

TEST(CpuAwareScoreTest, PrioritizeCpuRanksPodsWithoutGpusAndLeavesGpuPodsAtZero) {
  const std::unique_ptr<GpuCache> c = CpuCache({{"roomy", "64"}, {"tight", "4"}});
  GpuCache& cache = *c;
  Extender x(cache, nullptr);
  auto args = [](const json& pod) {
    return json{{"Pod", pod}, {"NodeNames", {"roomy", "tight"}}}.dump();
  };
  json cpu_pod = PodJson("cpu", {{"main", 0}}, "default", "uid-cpu");
  cpu_pod["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "8"}}}};
  HttpReply r = x.PrioritizeCpuOnly(args(cpu_pod));
  ASSERT_EQ(r.code, 200) << r.body;
  json got = json::parse(r.body);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["Host"], "roomy");
  EXPECT_EQ(got[0]["Score"], 10);  // only roomy has 8 CPUs for it
  EXPECT_EQ(got[1]["Score"], 0);
  // The GPU entry leaves it alone; the CPU entry leaves GPU pods alone.
  for (const auto& h : json::parse(x.Prioritize(args(cpu_pod)).body)) EXPECT_EQ(h["Score"], 0);
  for (const auto& h : json::parse(x.PrioritizeCpuOnly(args(MilliPod("g", 500))).body))
    EXPECT_EQ(h["Score"], 0);
}

// --filter-keep-best: one exchange per pod. The filter passes only the node the policy ranks
// best (what prioritize would have scored 10), and nothing else changes: a pod no node fits is
// refused with the reasons as before.
TEST(FilterKeepBestTest, TheFilterPassesOnlyThePolicysBestNodes) {
  const std::unique_ptr<GpuCache> c = CpuCache({{"tight", "4"}, {"roomy", "64"}, {"mid", "16"}});
  GpuCache& cache = *c;
  json pod = MilliPod("p", 500);
  pod["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "8"}};
  const std::string args = json{{"Pod", pod}, {"NodeNames", {"tight", "roomy", "mid"}}}.dump();
  auto passed = [](const HttpReply& r) {
    EXPECT_EQ(r.code, 200) << r.body;
    std::vector<std::string> out;
    const json j = json::parse(r.body);
    if (j["NodeNames"].is_array())
      for (const auto& n : j["NodeNames"]) out.push_back(n.get<std::string>());
    if (out.empty()) ADD_FAILURE() << r.body;
    return out;
  };
  Extender all(cache, nullptr);
  EXPECT_EQ(passed(all.Filter(args)), (std::vector<std::string>{"tight", "roomy", "mid"}));
  ExtenderOptions one;
  one.filter_keep_best = 1;
  Extender best(cache, nullptr, one);
  // Once the policy's target workload knows the pod's shape (its CPU included: the first
  // prioritize adds it), the filter keeps the node prioritize scores 10, and only that one.
  (void)best.Prioritize(args);
  std::string top;
  for (const auto& h : json::parse(best.Prioritize(args).body))
    if (h["Score"] == 10) top += (top.empty() ? "" : ",") + h["Host"].get<std::string>();
  ASSERT_TRUE(top == "roomy" || top == "mid") << top;  // tight lacks the CPU
  EXPECT_EQ(passed(best.Filter(args)), (std::vector<std::string>{top}));
  // A pod with soft placement preferences keeps every node that fits, for kube-scheduler's score
  // plugins to weigh (and prioritize to rank); a hard spread constraint is no preference.
  auto with = [&](const std::string& path, const json& value) {
    json p = pod;
    p["spec"][json::json_pointer(path)] = value;
    return json{{"Pod", p}, {"NodeNames", {"tight", "roomy", "mid"}}}.dump();
  };
  const json preferred = json::array({{{"weight", 10}, {"preference", json::object()}}});
  const std::vector<std::string> all3{"tight", "roomy", "mid"};
  for (const std::string kind : {"nodeAffinity", "podAffinity", "podAntiAffinity"})
    EXPECT_EQ(
        passed(best.Filter(with(
            "/affinity/" + kind + "/preferredDuringSchedulingIgnoredDuringExecution", preferred))),
        all3)
        << kind;
  auto spread = [](const std::string& when) {
    return json::array(
        {{{"maxSkew", 1}, {"topologyKey", "kubernetes.io/hostname"}, {"whenUnsatisfiable", when}}});
  };
  EXPECT_EQ(passed(best.Filter(with("/topologySpreadConstraints", spread("ScheduleAnyway")))),
            all3);
  EXPECT_EQ(passed(best.Filter(with("/topologySpreadConstraints", spread("DoNotSchedule")))),
            (std::vector<std::string>{top}));
  EXPECT_EQ(passed(best.Filter(with("/affinity/nodeAffinity/"
                                    "preferredDuringSchedulingIgnoredDuringExecution",
                                    json::array()))),
            (std::vector<std::string>{top}))
      << "an empty list is no preference";
  ExtenderOptions two;
  two.filter_keep_best = 2;
  Extender top2(cache, nullptr, two);
  const std::vector<std::string> kept = passed(top2.Filter(args));
  ASSERT_EQ(kept.size(), 2u);  // in kube-scheduler's order
  EXPECT_NE(std::find(kept.begin(), kept.end(), top), kept.end());
  EXPECT_EQ(std::find(kept.begin(), kept.end(), "tight"), kept.end());
  // Nothing fits: refused as before, with the reasons.
  const json none = json::parse(
      best.Filter(json{{"Pod", MilliPod("w", 9000)}, {"NodeNames", {"tight"}}}.dump()).body);
  EXPECT_TRUE(none["NodeNames"].is_null() || none["NodeNames"].empty()) << none.dump();
  EXPECT_FALSE(none["FailedNodes"].empty() && none["FailedAndUnresolvableNodes"].empty())
      << none.dump();
}

}  // namespace
}  // namespace gpushare::scheduler
