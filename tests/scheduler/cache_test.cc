// GpuCache: truth sources, filter verdicts and reasons, scores, reservations, corrections,
// releases and expiry, without HTTP.
#include "scheduler/cache.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "core/reasons.h"
#include "kube/memshare_pod.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::scheduler {
namespace {

using namespace testing;
using K = NodeVerdict::Kind;
namespace ms = memshare;

class CacheTest : public ::testing::Test {
 protected:
  CacheTest() { cache_ = SyncedCache(&log_); }
  void Node(const std::string& name, const std::vector<GpuSpec>& gpus, int max_clients = 48) {
    cache_->UpsertNode(DecodeNodeOrDie(NodeJson(name, gpus, max_clients)));
  }
  // Reserves and commits as a successful bind would; returns the GPU of the first demand.
  int Bind(const json& pod, const std::string& node, int64_t now = 1) {
    kube::Pod p = DecodePodOrDie(pod);
    Result<Reservation> r = cache_->Reserve(p, Req(pod), node, now);
    if (!r.ok()) {
      last_error_ = r.status().message();
      return -1;
    }
    cache_->Commit(p.metadata.uid, r->token);
    return r->demand_gpus[0];
  }
  // The pod as the API shows it after a bind: bound, annotated.
  json Bound(json pod, const std::string& node, const ms::ContainerGpus& gpus, bool confirmed,
             int64_t assume = 1) {
    pod["spec"]["nodeName"] = node;
    ms::PodRequest req = Req(pod);
    std::vector<int> demand;
    for (const auto& c : req.DemandContainers()) demand.push_back(gpus.at(c));
    auto a = ms::BindAnnotations(req, demand, 24, assume);
    if (confirmed)
      for (const auto& [k, v] : ms::ConfirmAnnotations(req, gpus)) a[k] = v;
    for (const auto& [k, v] : a) pod["metadata"]["annotations"][k] = v;
    return pod;
  }
  int64_t Used(const std::string& node, int gpu) {
    for (const GpuState& g : cache_->NodeGpus(node))
      if (g.index == gpu) return g.used;
    return -1;
  }
  void ExpectNeverOverCommitted(const std::string& node) {
    for (const GpuState& g : cache_->NodeGpus(node))
      EXPECT_LE(g.used, g.capacity) << node << " GPU " << g.index;
  }

  std::unique_ptr<GpuCache> cache_;
  std::string log_, last_error_;
};

TEST_F(CacheTest, SeedShape_64PodsFit8PerGpu_The65thIsRefusedWithTheReason) {
  Node("gpu-1", Uniform(8, 24));
  for (int i = 0; i < 64; ++i)
    ASSERT_GE(Bind(SimplePod("p" + std::to_string(i), 3), "gpu-1"), 0) << i << last_error_;
  for (const GpuState& g : cache_->NodeGpus("gpu-1")) {
    EXPECT_EQ(g.used, 24) << g.index;
    EXPECT_EQ(g.clients, 8) << g.index;
  }
  const json extra = SimplePod("p64", 3);
  std::vector<NodeVerdict> v = cache_->Filter(Req(extra), {"gpu-1"});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, K::kFailed);
  EXPECT_NE(v[0].reason.find("no GPU has 3 GiB free for container main"), std::string::npos)
      << v[0].reason;
  EXPECT_NE(v[0].reason.find("0:0/24"), std::string::npos) << v[0].reason;
  EXPECT_EQ(v[0].code, reasons::kGpuMemoryInsufficient);
  // Which GPU lacked what: the one with the most free memory, by index and UUID.
  EXPECT_NE(v[0].reason.find("the most free is GPU 0 (GPU-1000-0000-0000-0000-000000000000) with 0 "
                             "GiB free of 24 GiB"),
            std::string::npos)
      << v[0].reason;
  EXPECT_EQ(Bind(extra, "gpu-1"), -1);
  EXPECT_NE(last_error_.find("no GPU has 3 GiB free"), std::string::npos) << last_error_;
  ExpectNeverOverCommitted("gpu-1");
}

// A pod's GPU choice (HAMi's nvidia.com/use-gputype ... annotations): the filter, the scores and
// the bind use only the GPUs it allows; a node where it allows none is refused as unresolvable,
// naming each GPU and the annotation that excluded it. The masks leave the engine as it was.
TEST_F(CacheTest, AGpuChoiceKeepsFilterScoresAndBindToTheGpusItAllows) {
  const GpuSpec a10{24, true, "memory", "NVIDIA A10"};
  const GpuSpec a100{80, true, "memory", "NVIDIA A100-SXM4-80GB"};
  Node("mixed", {a10, a100});
  Node("a10s", {a10, a10});
  ASSERT_EQ(Bind(SimplePod("plain", 3), "mixed"), 0) << "best fit: the smaller GPU";
  json pod = SimplePod("wants-a100", 3);
  pod["metadata"]["annotations"]["nvidia.com/use-gputype"] = "a100";
  std::vector<NodeVerdict> v = cache_->Filter(Req(pod), {"mixed", "a10s"});
  EXPECT_EQ(v[0].kind, K::kFits) << v[0].reason;
  EXPECT_EQ(v[1].kind, K::kUnresolvable);
  EXPECT_EQ(v[1].code, reasons::kGpuExcluded);
  EXPECT_EQ(v[1].reason,
            "the pod's GPU choice excludes every GPU here: GPU 0: nvidia.com/use-gputype=a100 does "
            "not match \"NVIDIA A10\"; GPU 1: nvidia.com/use-gputype=a100 does not match \"NVIDIA "
            "A10\"");
  const std::vector<int64_t> scores = cache_->Score(Req(pod), {"mixed", "a10s"});
  EXPECT_EQ(scores[0], 10);
  EXPECT_EQ(scores[1], 0);
  EXPECT_EQ(Bind(pod, "a10s"), -1);
  EXPECT_NE(last_error_.find("excludes every GPU here"), std::string::npos) << last_error_;
  EXPECT_EQ(Bind(pod, "mixed"), 1) << last_error_;
  // By UUID: not the A10.
  json by_uuid = SimplePod("not-gpu0", 3);
  by_uuid["metadata"]["annotations"]["nvidia.com/nouse-gpuuuid"] =
      "GPU-1000-0000-0000-0000-000000000000";
  EXPECT_EQ(Bind(by_uuid, "mixed"), 1) << last_error_;
  // Whole GPUs too: the second A10 of a10s.
  json whole = MilliPod("whole", 1000);
  whole["metadata"]["annotations"]["nvidia.com/use-gpuuuid"] =
      "GPU-1001-0000-0000-0000-000000000000";
  EXPECT_EQ(Bind(whole, "a10s"), 1) << last_error_;
  // The allowed GPU full: refused for room, and the reason says what the choice excluded.
  ASSERT_EQ(Bind(SimplePod("fills-a100", 74), "mixed"), 1) << last_error_;
  json more = SimplePod("more-a100", 3);
  more["metadata"]["annotations"]["nvidia.com/use-gputype"] = "A100";
  v = cache_->Filter(Req(more), {"mixed"});
  EXPECT_EQ(v[0].kind, K::kFailed);
  EXPECT_EQ(v[0].code, reasons::kGpuMemoryInsufficient);
  EXPECT_NE(v[0].reason.find("; the pod's GPU choice excludes GPU 0: nvidia.com/use-gputype=A100 "
                             "does not match \"NVIDIA A10\""),
            std::string::npos)
      << v[0].reason;
  // The masks are gone: an unconstrained pod still fits the A10's 21 GiB.
  EXPECT_EQ(Used("mixed", 0), 3);
  EXPECT_EQ(Used("mixed", 1), 80);
  v = cache_->Filter(Req(SimplePod("plain-2", 21)), {"mixed"});
  EXPECT_EQ(v[0].kind, K::kFits) << v[0].reason;
  EXPECT_EQ(Bind(SimplePod("plain-2", 21), "mixed"), 0) << last_error_;
  ExpectNeverOverCommitted("mixed");
  ExpectNeverOverCommitted("a10s");
}

TEST_F(CacheTest, PacksGpusBeforeSpreading) {
  // The default policy (best fit in one node) fills a GPU before opening the next one.
  Node("gpu-1", Uniform(8, 24));
  for (int i = 0; i < 8; ++i) ASSERT_GE(Bind(SimplePod("p" + std::to_string(i), 3), "gpu-1"), 0);
  int full = 0;
  for (const GpuState& g : cache_->NodeGpus("gpu-1")) full += g.used == 24;
  EXPECT_EQ(full, 1);
}

TEST_F(CacheTest, GpusOfDifferentSizes) {
  Node("mixed", {{16}, {24}, {40}});
  int placed = 0;
  for (int i = 0; i < 10; ++i) placed += Bind(SimplePod("p" + std::to_string(i), 10), "mixed") >= 0;
  EXPECT_EQ(placed, 1 + 2 + 4);
  EXPECT_EQ(Used("mixed", 0), 10);
  EXPECT_EQ(Used("mixed", 1), 20);
  EXPECT_EQ(Used("mixed", 2), 40);
  ExpectNeverOverCommitted("mixed");
  // A 30 GiB container fits only the 40 GiB GPU: refused now (full), unresolvable elsewhere.
  Node("small", {{16}, {24}});
  std::vector<NodeVerdict> v = cache_->Filter(Req(SimplePod("big", 30)), {"mixed", "small"});
  EXPECT_EQ(v[0].kind, K::kFailed);
  EXPECT_EQ(v[0].code, reasons::kGpuMemoryInsufficient);
  EXPECT_EQ(v[1].kind, K::kUnresolvable);
  EXPECT_EQ(v[1].code, reasons::kGpuMemoryInsufficient);
  EXPECT_NE(
      v[1].reason.find("container main asks 30 GiB, more than any GPU here has (largest: 24 GiB)"),
      std::string::npos)
      << v[1].reason;
}

TEST_F(CacheTest, UnresolvableNodesSayWhy) {
  cache_->UpsertNode(DecodeNodeOrDie(json{{"metadata", {{"name", "plain"}}}}));
  json broken = NodeJson("broken", Uniform(2, 24));
  broken["metadata"]["annotations"]["gpushare.io/gpu-inventory"] = "{\"version\":1";
  cache_->UpsertNode(DecodeNodeOrDie(broken));
  cache_->UpsertNode(
      DecodeNodeOrDie(NodeJson("mib", Inventory(Uniform(2, 24576), 48, ms::MemoryUnit::kMiB))));
  Node("sick", {{24, false}, {24, true, "time-slicing"}});
  Node("ok", Uniform(1, 24));
  std::vector<NodeVerdict> v =
      cache_->Filter(Req(SimplePod("p", 3)), {"plain", "broken", "mib", "sick", "nowhere", "ok"});
  ASSERT_EQ(v.size(), 6u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(v[i].kind, K::kUnresolvable) << i << " " << v[i].reason;
  EXPECT_NE(v[0].reason.find("no gpushare.io/gpu-inventory annotation"), std::string::npos)
      << v[0].reason;
  EXPECT_NE(v[1].reason.find("unreadable"), std::string::npos) << v[1].reason;
  EXPECT_NE(v[2].reason.find("MiB"), std::string::npos) << v[2].reason;
  EXPECT_NE(v[3].reason.find("GPU 0 unhealthy, GPU 1 in mode time-slicing"), std::string::npos)
      << v[3].reason;
  EXPECT_NE(v[4].reason.find("not in gpushare-scheduler's cache"), std::string::npos)
      << v[4].reason;
  EXPECT_EQ(v[0].code, reasons::kNodeUnknown);
  EXPECT_EQ(v[1].code, reasons::kNodeUnknown);
  EXPECT_EQ(v[2].code, reasons::kNoSharedGpu);
  EXPECT_EQ(v[3].code, reasons::kGpuUnhealthy);  // GPU 0 would serve shares if it were healthy
  EXPECT_EQ(v[4].code, reasons::kNodeUnknown);
  EXPECT_EQ(v[5].kind, K::kFits);
  EXPECT_TRUE(v[5].code.empty());
  EXPECT_NE(log_.find("event=node_inventory_invalid node=broken"), std::string::npos) << log_;
}

// gpushare-node publishes the GPUs of every node; a node without memory GPUs says what its GPUs
// serve, whatever unit its config names (a unit only matters where units are counted).
TEST_F(CacheTest, ANodeWithoutMemoryGpusSaysWhatItsGpusServe) {
  cache_->UpsertNode(
      DecodeNodeOrDie(NodeJson("sliced", Inventory({{0, true, "time-slicing"}, {0, true, "mig"}},
                                                   48, ms::MemoryUnit::kMiB))));
  std::vector<NodeVerdict> v = cache_->Filter(Req(SimplePod("p", 3)), {"sliced"});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, K::kUnresolvable);
  EXPECT_EQ(v[0].code, reasons::kNoSharedGpu);
  EXPECT_NE(v[0].reason.find("no GPU serves memory shares (GPU 0 in mode time-slicing, GPU 1 in "
                             "mode mig)"),
            std::string::npos)
      << v[0].reason;
}

TEST_F(CacheTest, MultiContainerPodsAndInitContainers) {
  Node("n", Uniform(2, 24));
  // Two 20 GiB containers cannot share a 24 GiB GPU: one per GPU.
  const json two = PodJson("two", {{"a", 20}, {"sidecar", 0}, {"b", 20}}, "default", "u-two");
  ASSERT_GE(Bind(two, "n"), 0) << last_error_;
  ms::ContainerGpus g = cache_->PodGpus("u-two");
  ASSERT_EQ(g.size(), 2u);
  EXPECT_NE(g["a"], g["b"]);
  // A third 20 GiB container does not fit anywhere now; on the empty node it would.
  std::vector<NodeVerdict> v =
      cache_->Filter(Req(PodJson("three", {{"a", 2}, {"b", 2}, {"c", 4}})), {"n"});
  EXPECT_EQ(v[0].kind, K::kFits);
  v = cache_->Filter(Req(PodJson("big", {{"a", 20}, {"b", 20}, {"c", 20}})), {"n"});
  EXPECT_EQ(v[0].kind, K::kUnresolvable) << v[0].reason;
  EXPECT_NE(v[0].reason.find("cannot fit on this node's GPUs even when they are empty"),
            std::string::npos)
      << v[0].reason;
  EXPECT_EQ(v[0].code, reasons::kNoGpuFitsContainer);
  // Init containers run on the first app container's GPU and hold their units there.
  Node("m", Uniform(1, 24));
  const json with_init = PodJson("init", {{"setup", 10, true}, {"main", 2}}, "default", "u-init");
  ASSERT_EQ(Bind(with_init, "m"), 0);
  EXPECT_EQ(Used("m", 0), 10);
  EXPECT_EQ(cache_->PodGpus("u-init"), (ms::ContainerGpus{{"main", 0}, {"setup", 0}}));
}

TEST_F(CacheTest, ClientCeilingPerGpu) {
  Node("n", Uniform(2, 24), /*max_clients=*/2);
  int placed = 0;
  for (int i = 0; i < 6; ++i) placed += Bind(SimplePod("p" + std::to_string(i), 1), "n") >= 0;
  EXPECT_EQ(placed, 4);
  std::vector<NodeVerdict> v = cache_->Filter(Req(SimplePod("x", 1)), {"n"});
  EXPECT_EQ(v[0].kind, K::kFailed);
  EXPECT_NE(v[0].reason.find("already serve 2 containers each (maxClientsPerGpu)"),
            std::string::npos)
      << v[0].reason;
  EXPECT_EQ(v[0].code, reasons::kClientCeilingReached);
}

TEST_F(CacheTest, UsageFromAnnotationsConfirmedWinsAndCorrectsSwaps) {
  Node("n", Uniform(2, 24));
  // The scheduler assumed a on GPU 0 and b on GPU 1; the node agent found them swapped.
  json a = Bound(SimplePod("a", 20), "n", {{"main", 0}}, false);
  json b = Bound(SimplePod("b", 4), "n", {{"main", 1}}, false);
  cache_->UpsertPod(DecodePodOrDie(a));
  cache_->UpsertPod(DecodePodOrDie(b));
  EXPECT_EQ(Used("n", 0), 20);
  EXPECT_EQ(Used("n", 1), 4);
  cache_->UpsertPod(DecodePodOrDie(Bound(SimplePod("a", 20), "n", {{"main", 1}}, true)));
  cache_->UpsertPod(DecodePodOrDie(Bound(SimplePod("b", 4), "n", {{"main", 0}}, true)));
  EXPECT_EQ(Used("n", 0), 4);
  EXPECT_EQ(Used("n", 1), 20);
  EXPECT_NE(log_.find("event=pod_assignment_changed pod=default/a"), std::string::npos) << log_;
  // The engine follows: 20 GiB fits only on GPU 0 now.
  EXPECT_EQ(Bind(SimplePod("c", 20), "n"), 0);
  ExpectNeverOverCommitted("n");
}

// Issue 10, step 3: X (planned on GPU 1) was admitted into W's slot on GPU 0 and confirmed
// there while W still says GPU 0. Counting the annotations alone shows GPU 0 over-full and a
// free slot on GPU 1 that W is about to take: a bind in that window over-booked the node.
TEST_F(CacheTest, ASwapInFlightLeavesNoRoomForAnotherPod) {
  Node("n", Uniform(2, 22));
  for (int g = 0; g < 2; ++g) {
    for (int i = 0; i < 7; ++i) {
      const std::string name = "g" + std::to_string(g) + "-" + std::to_string(i);
      cache_->UpsertPod(DecodePodOrDie(Bound(SimplePod(name, 3), "n", {{"main", g}}, false)));
    }
  }
  EXPECT_EQ(Used("n", 0), 21);
  EXPECT_EQ(Used("n", 1), 21);
  // X = g1-0 confirmed on GPU 0; its assumed map still says GPU 1.
  json x = Bound(SimplePod("g1-0", 3), "n", {{"main", 1}}, false);
  for (const auto& [k, v] : ms::ConfirmAnnotations(Req(x), {{"main", 0}}))
    x["metadata"]["annotations"][k] = v;
  cache_->UpsertPod(DecodePodOrDie(x));
  EXPECT_EQ(Used("n", 1), 21) << "W will take X's slot on GPU 1";
  EXPECT_GE(Used("n", 0), 22);
  std::vector<NodeVerdict> v = cache_->Filter(Req(SimplePod("y", 3)), {"n"});
  EXPECT_EQ(v[0].kind, K::kFailed) << "a 15th pod of 3 GiB does not fit on 2 x 22 GiB";
  EXPECT_EQ(Bind(SimplePod("y", 3), "n"), -1);
}

// W (planned on 0) and X (planned on 1) were swapped by kubelet; W is deleted before the agent
// confirmed X on GPU 0. The API then says nothing about GPU 0's units: W's slot stays counted
// until X is confirmed.
TEST_F(CacheTest, AReleasedSlotStaysCountedWhileASwapIntoItIsUnconfirmed) {
  Node("n", Uniform(2, 4));
  json w = Bound(SimplePod("w", 3), "n", {{"main", 0}}, false);
  json x = Bound(SimplePod("x", 3), "n", {{"main", 1}}, false);
  cache_->UpsertPod(DecodePodOrDie(w));
  cache_->UpsertPod(DecodePodOrDie(x));
  cache_->DeletePod(DecodePodOrDie(w));
  EXPECT_EQ(Used("n", 0), 3) << log_;
  EXPECT_NE(log_.find("event=slot_guarded node=n pod=default/w"), std::string::npos) << log_;
  EXPECT_EQ(Bind(SimplePod("y", 3), "n"), -1) << "GPU 0 may hold X";
  // X confirmed on GPU 0: counted there, and on GPU 1 until the agent moves its plan.
  for (const auto& [k, v] : ms::ConfirmAnnotations(Req(x), {{"main", 0}}))
    x["metadata"]["annotations"][k] = v;
  cache_->UpsertPod(DecodePodOrDie(x));
  EXPECT_EQ(Used("n", 0), 3);
  EXPECT_EQ(Used("n", 1), 3);
  x["metadata"]["annotations"][std::string(ms::kAssumedAnnotation)] =
      ms::EncodeContainerGpus({{"main", 0}});
  cache_->UpsertPod(DecodePodOrDie(x));
  EXPECT_EQ(Used("n", 1), 0);
  EXPECT_EQ(Bind(SimplePod("y", 3), "n"), 1);
  // A pod confirmed where it was planned leaves nothing behind.
  json y = Bound(SimplePod("y", 3), "n", {{"main", 1}}, true);
  cache_->UpsertPod(DecodePodOrDie(y));
  cache_->DeletePod(DecodePodOrDie(y));
  EXPECT_EQ(Used("n", 1), 0);
}

// A swapped pair, then one of them is deleted: the other sits where its partner was planned and
// its own planned slot is empty. Once no pod of that size is pending, the plan moves.
TEST_F(CacheTest, AnEmptyPlannedSlotIsGivenBackOnceNothingPendingNeedsIt) {
  Node("n", Uniform(2, 4));
  json w = Bound(SimplePod("w", 3), "n", {{"main", 0}}, false);
  json x = Bound(SimplePod("x", 3), "n", {{"main", 1}}, false);
  for (json* p : {&w, &x}) {
    const int real = p == &w ? 1 : 0;
    for (const auto& [k, v] : ms::ConfirmAnnotations(Req(*p), {{"main", real}}))
      (*p)["metadata"]["annotations"][k] = v;
    cache_->UpsertPod(DecodePodOrDie(*p));
  }
  EXPECT_EQ(Used("n", 0), 3);
  EXPECT_EQ(Used("n", 1), 3);
  EXPECT_TRUE(cache_->PlanMoves().empty()) << "a swapped pair leaves nothing empty";
  cache_->DeletePod(DecodePodOrDie(w));  // x stays on GPU 0, planned on 1
  EXPECT_EQ(Used("n", 1), 3) << "the empty slot is still counted";
  // A pending pod of the same size may need it: nothing moves.
  json y = Bound(SimplePod("y", 3), "n", {{"main", 1}}, false);
  cache_->UpsertPod(DecodePodOrDie(y));
  EXPECT_TRUE(cache_->PlanMoves().empty());
  cache_->DeletePod(DecodePodOrDie(y));
  std::vector<PlanMove> moves = cache_->PlanMoves();
  ASSERT_EQ(moves.size(), 1u) << log_;
  EXPECT_EQ(moves[0].key, "default/x");
  EXPECT_EQ(moves[0].to, (ms::ContainerGpus{{"main", 0}}));
  EXPECT_EQ(Used("n", 1), 0);
  EXPECT_EQ(Bind(SimplePod("z", 4), "n"), 1);
}

TEST(CacheStart, NodesWithPendingPodsWaitForTheirConfirmation) {
  CacheOptions o;
  o.restart_hold_ns = 30'000'000'000;
  std::string log;
  o.log = [&](const std::string& l) { log += l + "\n"; };
  GpuCache cache(o);
  cache.UpsertNode(DecodeNodeOrDie(NodeJson("busy", Uniform(2, 24))));
  cache.UpsertNode(DecodeNodeOrDie(NodeJson("idle", Uniform(2, 24))));
  json a = SimplePod("a", 3);
  a["spec"]["nodeName"] = "busy";
  ms::PodRequest req = Req(a);
  for (const auto& [k, v] : ms::BindAnnotations(req, {0}, 24, 1))
    a["metadata"]["annotations"][k] = v;
  cache.UpsertPod(DecodePodOrDie(a));
  cache.SetSynced(true);
  std::vector<NodeVerdict> v = cache.Filter(Req(SimplePod("b", 3)), {"busy", "idle"});
  EXPECT_EQ(v[0].kind, K::kFailed);
  EXPECT_NE(v[0].reason.find("started recently"), std::string::npos) << v[0].reason;
  EXPECT_EQ(v[0].code, reasons::kNodeHeldBack);
  EXPECT_EQ(v[1].kind, K::kFits);
  for (const auto& [k, val] : ms::ConfirmAnnotations(req, {{"main", 0}}))
    a["metadata"]["annotations"][k] = val;
  cache.UpsertPod(DecodePodOrDie(a));
  EXPECT_EQ(cache.Filter(Req(SimplePod("b", 3)), {"busy"})[0].kind, K::kFits) << log;
  // The hold also ends after restart_hold_ns, counted from the first sweep.
  GpuCache other(o);
  other.UpsertNode(DecodeNodeOrDie(NodeJson("busy", Uniform(2, 24))));
  json stuck = a;
  stuck["metadata"]["annotations"].erase(std::string(ms::kConfirmedAnnotation));
  stuck["metadata"]["annotations"][std::string(ms::kAssignedKey)] = "false";
  other.UpsertPod(DecodePodOrDie(stuck));
  other.SetSynced(true);
  other.ExpireAssumed(1'000'000'000, int64_t{1} << 62);
  EXPECT_EQ(other.Filter(Req(SimplePod("b", 3)), {"busy"})[0].kind, K::kFailed);
  other.ExpireAssumed(31'000'000'000, int64_t{1} << 62);
  EXPECT_EQ(other.Filter(Req(SimplePod("b", 3)), {"busy"})[0].kind, K::kFits);
}

// Compute shares (ACK's aliyun.com/gpu-core.percentage, HAMi's nvidia.com/gpucores): each GPU's
// shares stay at or below 100 % whatever its free memory; a node where no GPU has the share
// left is refused for now (not unresolvable: pods leave), naming each GPU's booked compute; a
// pending pod that asks the same size first with another share makes the next one wait.
TEST_F(CacheTest, ComputeSharesStayAtOrBelowAHundredPercentPerGpu) {
  Node("n", Uniform(2, 24));
  const json a = WithCore(SimplePod("a", 3), 70, "aliyun.com/gpu-core.percentage");
  ASSERT_EQ(Bind(a, "n"), 0) << last_error_;
  // 40 %: GPU 0 has the memory, not the compute (best fit would pack it there).
  const json b = WithCore(SimplePod("b", 4), 40, "nvidia.com/gpucores");
  ASSERT_EQ(Bind(b, "n"), 1) << last_error_;
  // 3 GiB first like pending `a`, another share: gpushare-node could not tell the two apart.
  const json c = WithCore(SimplePod("c", 3), 35, "aliyun.com/gpu-core.percentage");
  std::vector<NodeVerdict> v = cache_->Filter(Req(c), {"n"});
  EXPECT_EQ(v[0].kind, K::kFailed);
  EXPECT_EQ(v[0].code, reasons::kPendingSlotConflict);
  EXPECT_NE(v[0].reason.find("3 GiB, compute 70/100"), std::string::npos) << v[0].reason;
  cache_->UpsertPod(DecodePodOrDie(Bound(a, "n", {{"main", 0}}, true)));
  cache_->UpsertPod(DecodePodOrDie(Bound(b, "n", {{"main", 1}}, true)));
  ASSERT_EQ(Bind(c, "n"), 1) << last_error_;  // 70 + 35 > 100 on GPU 0
  const json d = WithCore(SimplePod("d", 1), 30, "aliyun.com/gpu-core.percentage");
  ASSERT_EQ(Bind(d, "n"), 0) << last_error_;  // 40 + 35 + 30 > 100 on GPU 1
  std::vector<GpuState> gpus = cache_->NodeGpus("n");
  EXPECT_EQ(gpus[0].core, 100);
  EXPECT_EQ(gpus[1].core, 75);
  // Neither GPU has 30 % left; both have the memory.
  const json e = WithCore(SimplePod("e", 2), 30, "aliyun.com/gpu-core.percentage");
  v = cache_->Filter(Req(e), {"n"});
  EXPECT_EQ(v[0].kind, K::kFailed);
  EXPECT_EQ(v[0].code, reasons::kGpuComputeFull);
  EXPECT_EQ(v[0].reason,
            "no GPU here has the pod's compute share left: GPU 0: compute 100/100 booked and the "
            "pod asks 30 (aliyun.com/gpu-core.percentage); GPU 1: compute 75/100 booked and the "
            "pod asks 30 (aliyun.com/gpu-core.percentage)");
  EXPECT_EQ(v[0].reason.find('%'), std::string::npos) << "kube-scheduler formats it";
  EXPECT_EQ(cache_->Score(Req(e), {"n"})[0], 0);
  EXPECT_EQ(Bind(e, "n"), -1);
  // 25 % fits GPU 1 only; a pod without a compute share still fits anywhere with memory.
  EXPECT_EQ(Bind(WithCore(SimplePod("f", 2), 25, "aliyun.com/gpu-core.percentage"), "n"), 1)
      << last_error_;
  EXPECT_GE(Bind(SimplePod("g", 5), "n"), 0) << last_error_;
  gpus = cache_->NodeGpus("n");
  EXPECT_EQ(gpus[0].core, 100);
  EXPECT_EQ(gpus[1].core, 100);
  // Gone pods give their compute back.
  cache_->DeletePod(DecodePodOrDie(Bound(a, "n", {{"main", 0}}, true)));
  EXPECT_EQ(cache_->NodeGpus("n")[0].core, 30);
  ExpectNeverOverCommitted("n");
}

TEST_F(CacheTest, PodsWhoseFirstRequestsLookAlikeWaitForEachOther) {
  Node("n", Uniform(2, 24));
  // Pending: init container of 2 GiB, then the app container's 3 (kubelet asks 2 first).
  json odd = PodJson("odd", {{"setup", 2, true}, {"main", 3}}, "default", "u-odd");
  cache_->UpsertPod(DecodePodOrDie(Bound(odd, "n", {{"main", 0}, {"setup", 0}}, false)));
  std::vector<NodeVerdict> v = cache_->Filter(Req(SimplePod("two", 2)), {"n"});
  EXPECT_EQ(v[0].kind, K::kFailed);
  EXPECT_NE(v[0].reason.find("look the same to gpushare-node"), std::string::npos) << v[0].reason;
  EXPECT_EQ(v[0].code, reasons::kPendingSlotConflict);
  EXPECT_EQ(Bind(SimplePod("two", 2), "n"), -1);
  EXPECT_EQ(cache_->Filter(Req(SimplePod("three", 3)), {"n"})[0].kind, K::kFits);
  // Once confirmed, nothing to confuse.
  cache_->UpsertPod(DecodePodOrDie(Bound(odd, "n", {{"main", 0}, {"setup", 0}}, true)));
  EXPECT_EQ(cache_->Filter(Req(SimplePod("two", 2)), {"n"})[0].kind, K::kFits);
}

TEST_F(CacheTest, AlibabaAnnotationsAndUnassignedPods) {
  Node("n", Uniform(2, 24));
  json ali = SimplePod("ali", 5);
  ali["spec"]["nodeName"] = "n";
  ali["metadata"]["annotations"] = {{"ALIYUN_COM_GPU_MEM_IDX", "1"},
                                    {"ALIYUN_COM_GPU_MEM_ASSIGNED", "true"}};
  cache_->UpsertPod(DecodePodOrDie(ali));
  EXPECT_EQ(Used("n", 1), 5);
  json bare = SimplePod("bare", 5);
  bare["spec"]["nodeName"] = "n";
  cache_->UpsertPod(DecodePodOrDie(bare));
  cache_->UpsertPod(DecodePodOrDie(bare));
  EXPECT_EQ(cache_->stats().unassigned, 1);
  EXPECT_NE(log_.find("event=pod_unassigned pod=default/bare"), std::string::npos);
  json junk = SimplePod("junk", 5);
  junk["spec"]["nodeName"] = "n";
  junk["metadata"]["annotations"] = {{"gpushare.io/gpu-mem-assumed", "{\"main\":99"},
                                     {"ALIYUN_COM_GPU_MEM_IDX", "x"}};
  cache_->UpsertPod(DecodePodOrDie(junk));
  EXPECT_NE(log_.find("event=pod_annotation_unreadable pod=default/junk"), std::string::npos);
  EXPECT_EQ(cache_->stats().pods, 1);
  // Pods without gpu-mem, and unbound pods with stale annotations, count nothing.
  json cpu = PodJson("cpu", {{"app", 0}}, "default", "u-cpu");
  cpu["spec"]["nodeName"] = "n";
  cache_->UpsertPod(DecodePodOrDie(cpu));
  json stale = Bound(SimplePod("stale", 7), "n", {{"main", 0}}, false);
  stale["spec"].erase("nodeName");
  cache_->UpsertPod(DecodePodOrDie(stale));
  EXPECT_EQ(Used("n", 0), 0);
}

TEST_F(CacheTest, FinishedAndDeletedPodsRelease) {
  Node("n", Uniform(1, 24));
  json a = Bound(SimplePod("a", 10), "n", {{"main", 0}}, true);
  json b = Bound(SimplePod("b", 10), "n", {{"main", 0}}, true);
  cache_->UpsertPod(DecodePodOrDie(a));
  cache_->UpsertPod(DecodePodOrDie(b));
  EXPECT_EQ(Used("n", 0), 20);
  a["status"]["phase"] = "Succeeded";
  cache_->UpsertPod(DecodePodOrDie(a));
  EXPECT_EQ(Used("n", 0), 10);
  cache_->DeletePod(DecodePodOrDie(b));
  EXPECT_EQ(Used("n", 0), 0);
  EXPECT_EQ(Bind(SimplePod("c", 24), "n"), 0);
}

TEST_F(CacheTest, ReserveIsIdempotentAndRefusesConflicts) {
  Node("n", Uniform(2, 24));
  Node("m", Uniform(2, 24));
  const json p = SimplePod("p", 3);
  const kube::Pod pod = DecodePodOrDie(p);
  Result<Reservation> r = cache_->Reserve(pod, Req(p), "n", 5);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->already);
  // While the first bind is in flight, a second one for the same pod is refused.
  Result<Reservation> again = cache_->Reserve(pod, Req(p), "n", 6);
  EXPECT_EQ(again.status().code(), StatusCode::kAborted);
  cache_->Commit(pod.metadata.uid, r->token);
  again = cache_->Reserve(pod, Req(p), "n", 6);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already);
  EXPECT_EQ(again->demand_gpus, r->demand_gpus);
  EXPECT_EQ(Used("n", r->demand_gpus[0]), 3);  // booked once
  Result<Reservation> other = cache_->Reserve(pod, Req(p), "m", 6);
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("already assigned to node n"), std::string::npos);
}

TEST_F(CacheTest, RollbackGivesBackUnlessTheApiShowsThePodBound) {
  Node("n", Uniform(1, 24));
  const json p = SimplePod("p", 20);
  const kube::Pod pod = DecodePodOrDie(p);
  Result<Reservation> r = cache_->Reserve(pod, Req(p), "n", 5);
  ASSERT_TRUE(r.ok());
  // An informer event from before the bind (not bound yet) keeps the reservation.
  cache_->UpsertPod(pod);
  EXPECT_EQ(Used("n", 0), 20);
  cache_->Rollback(pod.metadata.uid, r->token);
  EXPECT_EQ(Used("n", 0), 0);
  // Reserve again; this time the API shows it bound before the (failed-looking) bind returns.
  r = cache_->Reserve(pod, Req(p), "n", 6);
  ASSERT_TRUE(r.ok());
  cache_->UpsertPod(DecodePodOrDie(Bound(p, "n", r->containers, false, 6)));
  cache_->Rollback(pod.metadata.uid, r->token);
  EXPECT_EQ(Used("n", 0), 20);
  // Unsynced caches decide nothing.
  cache_->SetSynced(false);
  EXPECT_EQ(cache_->Reserve(DecodePodOrDie(SimplePod("q", 1)), Req(SimplePod("q", 1)), "n", 7)
                .status()
                .code(),
            StatusCode::kUnavailable);
}

TEST_F(CacheTest, ExpireAssumedReleasesOnlyPendingUnconfirmedPods) {
  Node("n", Uniform(1, 24));
  const int64_t t0 = 1000;
  json assumed = Bound(SimplePod("assumed", 5), "n", {{"main", 0}}, false, t0);
  json running = Bound(SimplePod("running", 5), "n", {{"main", 0}}, false, t0);
  running["status"]["phase"] = "Running";
  json confirmed = Bound(SimplePod("confirmed", 5), "n", {{"main", 0}}, true, t0);
  for (const json& p : {assumed, running, confirmed}) cache_->UpsertPod(DecodePodOrDie(p));
  ASSERT_GE(Bind(SimplePod("local", 5), "n", t0), 0);  // bound by us, annotations not seen yet
  EXPECT_EQ(Used("n", 0), 20);
  EXPECT_TRUE(cache_->ExpireAssumed(t0 + 99, 100).empty());
  std::vector<ExpiredPod> e = cache_->ExpireAssumed(t0 + 100, 100);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(Used("n", 0), 10);  // running + confirmed remain
  for (const ExpiredPod& x : e) {
    EXPECT_EQ(x.units, 5);
    EXPECT_EQ(x.node, "n");
    EXPECT_TRUE(x.key == "default/assumed" || x.key == "default/local") << x.key;
  }
  // The same assumed annotations again do not bring it back; a confirmation does.
  cache_->UpsertPod(DecodePodOrDie(assumed));
  EXPECT_EQ(Used("n", 0), 10);
  EXPECT_EQ(cache_->stats().expired, 2);
  cache_->UpsertPod(DecodePodOrDie(Bound(SimplePod("assumed", 5), "n", {{"main", 0}}, true, t0)));
  EXPECT_EQ(Used("n", 0), 15);
}

TEST_F(CacheTest, ScoresAreZeroToTenWithOneWinner) {
  Node("a", Uniform(2, 24));
  Node("b", Uniform(2, 24));
  Node("c", Uniform(1, 8));
  Node("d", Uniform(1, 24));
  ASSERT_GE(Bind(SimplePod("x", 20), "d"), 0);
  ASSERT_GE(Bind(SimplePod("y", 4), "b"), 0);
  std::vector<int64_t> s = cache_->Score(Req(SimplePod("p", 6)), {"a", "b", "c", "d", "ghost"});
  ASSERT_EQ(s.size(), 5u);
  int tens = 0;
  for (int64_t v : s) {
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 10);
    tens += v == 10;
  }
  EXPECT_EQ(tens, 1);
  EXPECT_EQ(s[3], 0);  // d cannot take 6 GiB
  EXPECT_EQ(s[4], 0);
}

TEST_F(CacheTest, HealthFlipRebuildsAndKeepsUsage) {
  Node("n", Uniform(2, 24));
  ASSERT_EQ(Bind(SimplePod("p", 20), "n"), 0);
  Node("n", {{24, false}, {24}});  // GPU 0 turns unhealthy
  EXPECT_EQ(Used("n", 0), 20);     // its pod still holds it
  EXPECT_EQ(Bind(SimplePod("q", 20), "n"), 1);
  EXPECT_EQ(Bind(SimplePod("r", 4), "n"), 1);
  EXPECT_EQ(Bind(SimplePod("s", 1), "n"), -1);  // GPU 0 is out of service
  Node("n", Uniform(2, 24));                    // it recovers: 4 GiB free there
  EXPECT_EQ(Bind(SimplePod("s", 1), "n"), 0);
  EXPECT_GE(cache_->stats().rebuilds, 2u);
  ExpectNeverOverCommitted("n");
}

TEST_F(CacheTest, OverFullTruthIsShownFullNeverCrashes) {
  Node("n", Uniform(1, 24), 3);
  for (int i = 0; i < 5; ++i)
    cache_->UpsertPod(
        DecodePodOrDie(Bound(SimplePod("p" + std::to_string(i), 9), "n", {{"main", 0}}, true)));
  EXPECT_EQ(Used("n", 0), 45);
  std::vector<NodeVerdict> v = cache_->Filter(Req(SimplePod("q", 1)), {"n"});
  EXPECT_EQ(v[0].kind, K::kFailed);
  EXPECT_EQ(Bind(SimplePod("q", 1), "n"), -1);
  for (int i = 0; i < 3; ++i)
    cache_->DeletePod(DecodePodOrDie(SimplePod("p" + std::to_string(i), 9)));
  EXPECT_EQ(Used("n", 0), 18);
  EXPECT_EQ(Bind(SimplePod("q", 6), "n"), 0);
  EXPECT_EQ(Bind(SimplePod("r", 1), "n"), -1);  // 3 clients: the ceiling
}

TEST_F(CacheTest, ConcurrentReservationsNeverOverCommit) {
  Node("n", Uniform(8, 24));
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const json p = SimplePod("t" + std::to_string(t) + "-" + std::to_string(i), 3);
        const kube::Pod pod = DecodePodOrDie(p);
        Result<Reservation> r = cache_->Reserve(pod, Req(p), "n", 1);
        if (!r.ok()) continue;
        if (i % 5 == 0) {
          cache_->Rollback(pod.metadata.uid, r->token);  // a failed bind
        } else {
          cache_->Commit(pod.metadata.uid, r->token);
          ok.fetch_add(1);
        }
        (void)cache_->Filter(Req(p), {"n"});
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 64);
  ExpectNeverOverCommitted("n");
}

// Random sequences of everything the informers and binds can do: the cache never books a GPU
// over capacity, and whatever the filter says fits can be reserved.
TEST_F(CacheTest, RandomSequencesKeepTheInvariants) {
  std::mt19937 rng(7);
  const std::vector<std::string> nodes = {"n0", "n1", "n2"};
  for (const auto& n : nodes) Node(n, {{16}, {24}, {40}});
  std::map<std::string, json> live;
  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    const std::string name = "p" + std::to_string(rng() % 60);
    const std::string node = nodes[rng() % nodes.size()];
    if (op < 5) {
      auto units = [&](int m) { return static_cast<int64_t>(1 + rng() % m); };
      const json p = rng() % 3 == 0 ? PodJson(name, {{"a", units(12)}, {"q", 0}, {"b", units(12)}},
                                              "default", "u-" + name)
                                    : SimplePod(name, units(20));
      if (live.count(name)) continue;
      const bool fits = cache_->Filter(Req(p), {node})[0].kind == K::kFits;
      const kube::Pod pod = DecodePodOrDie(p);
      Result<Reservation> r = cache_->Reserve(pod, Req(p), node, step);
      ASSERT_EQ(fits, r.ok()) << step << " " << (r.ok() ? "" : r.status().message());
      if (!r.ok()) continue;
      if (rng() % 4 == 0) {
        cache_->Rollback(pod.metadata.uid, r->token);
        continue;
      }
      cache_->Commit(pod.metadata.uid, r->token);
      live[name] = Bound(p, node, r->containers, rng() % 2 == 0, step);
      if (rng() % 2) cache_->UpsertPod(DecodePodOrDie(live[name]));
    } else if (op < 7 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      if (rng() % 2) {
        cache_->DeletePod(DecodePodOrDie(it->second));
      } else {
        it->second["status"]["phase"] = "Failed";
        cache_->UpsertPod(DecodePodOrDie(it->second));
      }
      live.erase(it);
    } else if (op == 7) {
      std::vector<GpuSpec> g = {
          {16, rng() % 4 != 0}, {24}, {40, true, rng() % 5 == 0 ? "mig" : "memory"}};
      Node(node, g);
    } else if (op == 8) {
      (void)cache_->Score(Req(SimplePod("s", static_cast<int64_t>(1 + rng() % 16))),
                          {nodes.begin(), nodes.end()});
    } else {
      (void)cache_->ExpireAssumed(step, 1000000);
    }
    for (const auto& n : nodes) ExpectNeverOverCommitted(n);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace gpushare::scheduler

namespace gpushare::scheduler {
namespace {

TEST(CacheRenamed, CountsTheConfiguredResourceOnly) {
  CacheOptions o;
  o.resource_name = "example.com/vram";
  GpuCache cache(o);
  cache.SetSynced(true);
  cache.UpsertNode(testing::DecodeNodeOrDie(testing::NodeJson("n", testing::Uniform(1, 24))));
  testing::json p = testing::SimplePod("p", 20);
  p["spec"]["containers"][0]["resources"]["limits"] = {{"example.com/vram", "20"}};
  p["spec"]["nodeName"] = "n";
  p["metadata"]["annotations"] = {{"ALIYUN_COM_GPU_MEM_IDX", "0"}};
  cache.UpsertPod(testing::DecodePodOrDie(p));
  EXPECT_EQ(cache.NodeGpus("n")[0].used, 20);
  testing::json q = testing::SimplePod("q", 20);  // asks for aliyun.com/gpu-mem: not ours
  q["spec"]["nodeName"] = "n";
  q["metadata"]["annotations"] = {{"ALIYUN_COM_GPU_MEM_IDX", "0"}};
  cache.UpsertPod(testing::DecodePodOrDie(q));
  EXPECT_EQ(cache.NodeGpus("n")[0].used, 20);
}

}  // namespace
}  // namespace gpushare::scheduler

namespace gpushare::scheduler {
namespace {

TEST(CacheRepeats, ANameListedTwiceIsAnsweredOnce) {
  GpuCache cache;
  cache.SetSynced(true);
  cache.UpsertNode(testing::DecodeNodeOrDie(testing::NodeJson("a", testing::Uniform(1, 24))));
  cache.UpsertNode(testing::DecodeNodeOrDie(testing::NodeJson("b", testing::Uniform(1, 24))));
  const memshare::PodRequest req =
      *kube::PodMemRequest(testing::DecodePodOrDie(testing::SimplePod("p", 3)));
  std::vector<NodeVerdict> v = cache.Filter(req, {"a", "b", "a", "ghost", "b"});
  EXPECT_FALSE(v[0].repeat);
  EXPECT_FALSE(v[1].repeat);
  EXPECT_TRUE(v[2].repeat);
  EXPECT_FALSE(v[3].repeat);
  EXPECT_TRUE(v[4].repeat);
  std::vector<NodeVerdict> g = cache.Filter(req, {"ghost", "ghost"});
  EXPECT_FALSE(g[0].repeat);
  EXPECT_TRUE(g[1].repeat);
  std::vector<int64_t> gs = cache.Score(req, {"ghost", "a", "ghost"});
  EXPECT_EQ(gs[0], 0);
  EXPECT_EQ(gs[2], -1);
  std::vector<int64_t> s = cache.Score(req, {"a", "a", "b"});
  EXPECT_GE(s[0], 0);
  EXPECT_EQ(s[1], -1);
  EXPECT_GE(s[2], 0);
  // The next request starts afresh.
  EXPECT_FALSE(cache.Filter(req, {"a"})[0].repeat);
}

}  // namespace
}  // namespace gpushare::scheduler
