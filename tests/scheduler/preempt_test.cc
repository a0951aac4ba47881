// Preemption for memory shares (issue 23): the preempt verb's choice of victims on the cache's
// state (scheduler/preempt.h), the hold on the GPUs it frees (GpuCache::Nominate) and its end,
// and the wire format of ExtenderPreemptionArgs / ExtenderPreemptionResult.
#include "scheduler/preempt.h"

#include <gtest/gtest.h>

#include <set>

#include "core/reasons.h"
#include "kube/memshare_pod.h"
#include "scheduler/extender.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::scheduler {
namespace {

using namespace testing;
using K = NodeVerdict::Kind;
namespace ms = memshare;

// A pod of `units` with a priority (and labels, start time).
json PriorityPod(const std::string& name, int64_t units, int32_t priority,
                 const std::string& start = "2026-12-01T00:00:00Z",
                 const std::map<std::string, std::string>& labels = {{"app", "batch"}}) {
  json p = SimplePod(name, units);
  p["spec"]["priority"] = priority;
  p["status"]["startTime"] = start;
  for (const auto& [k, v] : labels) p["metadata"]["labels"][k] = v;
  return p;
}

class PreemptTest : public ::testing::Test {
 protected:
  PreemptTest() {
    cache_ = SyncedCache(&log_);
    PreemptOptions po;
    po.pod_lookup = [this](const std::string& key) -> std::shared_ptr<const kube::Pod> {
      auto it = pods_.find(key);
      return it == pods_.end() ? nullptr : std::make_shared<const kube::Pod>(it->second);
    };
    po.pod_list = [this] {
      std::vector<std::shared_ptr<const kube::Pod>> out;
      for (const auto& [k, p] : pods_) out.push_back(std::make_shared<const kube::Pod>(p));
      return out;
    };
    po.budget_list = [this] { return budgets_; };
    po.clock = std::make_shared<SimulatedClock>(1000, now_);  // wall time now_, held still
    po.warn = [this](const kube::ObjectReference& pod, std::string_view reason,
                     const std::string& message) {
      events_.push_back(pod.name + " " + std::string(reason) + ": " + message);
    };
    preemptor_ = std::make_unique<Preemptor>(*cache_, po);
  }

  void Node(const std::string& name, int gpus, int64_t units = 22) {
    cache_->UpsertNode(DecodeNodeOrDie(NodeJson(name, Uniform(gpus, units))));
  }
  // Binds `pod` to `node` on GPU `gpu` as the API would show it once gpushare-node confirmed it
  // (planned there by the scheduler, or on `planned` when kubelet admitted it elsewhere).
  void Running(json pod, const std::string& node, int gpu, int planned = -1) {
    pod["spec"]["nodeName"] = node;
    pod["status"]["phase"] = "Running";
    const ms::PodRequest req = Req(pod);
    std::vector<int> demand(req.DemandContainers().size(), planned >= 0 ? planned : gpu);
    ms::ContainerGpus gpus;
    for (const std::string& c : req.DemandContainers()) gpus[c] = gpu;
    auto a = ms::BindAnnotations(req, demand, 22, 1);
    for (const auto& [k, v] : ms::ConfirmAnnotations(req, gpus)) a[k] = v;
    for (const auto& [k, v] : a) pod["metadata"]["annotations"][k] = v;
    kube::Pod p = DecodePodOrDie(pod);
    pods_[p.Key()] = p;
    cache_->UpsertPod(p);
  }
  // The issue's node: `gpus` GPUs of 22 GiB, each holding seven 3 GiB pods of priority 0.
  void FullNode(const std::string& node, int gpus = 8) {
    Node(node, gpus);
    for (int g = 0; g < gpus; ++g)
      for (int k = 0; k < 7; ++k)
        Running(PriorityPod(node + "-g" + std::to_string(g) + "-" + std::to_string(k), 3, 0,
                            "2026-12-01T00:0" + std::to_string(g) + ":0" + std::to_string(k) + "Z"),
                node, g);
  }
  std::string Uid(const std::string& name) { return "uid-" + name; }
  // kube-scheduler's node-total choice on a FullNode of `gpus` GPUs: `n` pods spread over two
  // GPUs (6 and 3 of eight).
  NodeVictims SpreadVictims(const std::string& node, int n, int gpus = 8) {
    NodeVictims v;
    for (int i = 0; i < n; ++i)
      v.uids.push_back(
          Uid(node + "-g" + std::to_string((i < 4 ? 6 : 3) % gpus) + "-" + std::to_string(i)));
    return v;
  }
  // The GPU each victim holds.
  std::set<int> GpusOf(const std::vector<std::string>& uids) {
    std::set<int> out;
    for (const auto& [key, p] : pods_)
      if (std::find(uids.begin(), uids.end(), p.metadata.uid) != uids.end())
        for (const auto& [c, g] :
             ms::ResolveAssignment(p.metadata.annotations, *kube::PodMemRequest(p)).gpus)
          out.insert(g);
    return out;
  }
  // A one-GPU node emptied by preemption for "serving" (22 GiB, priority 1000): the GPU is held.
  void HoldTheOnlyGpuForServing() {
    FullNode("mem", 1);
    const json big = PriorityPod("serving", 22, 1000);
    Result<PreemptDecision> d =
        preemptor_->Decide(DecodePodOrDie(big), Req(big), {{"mem", SpreadVictims("mem", 1, 1)}});
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(d->node, "mem");
    for (auto it = pods_.begin(); it != pods_.end();) {
      cache_->DeletePod(it->second);
      it = pods_.erase(it);
    }
  }
  // Node mem, two GPUs of 22 GiB, six 3 GiB pods on each, and a and b (3 GiB) admitted by
  // kubelet into each other's planned slots: a on GPU 0 planned on 1, b (with `b_labels`) on 1
  // planned on 0.
  void SwappedPair(const std::map<std::string, std::string>& b_labels = {{"app", "batch"}}) {
    Node("mem", 2);
    for (int k = 0; k < 6; ++k) {
      Running(PriorityPod("g0-" + std::to_string(k), 3, 0), "mem", 0);
      Running(PriorityPod("g1-" + std::to_string(k), 3, 0), "mem", 1);
    }
    Running(PriorityPod("a", 3, 0, "2026-12-01T00:09:00Z"), "mem", /*gpu=*/0, /*planned=*/1);
    Running(PriorityPod("b", 3, 0, "2026-12-01T00:09:00Z", b_labels), "mem", /*gpu=*/1,
            /*planned=*/0);
  }
  // kube-scheduler's victims on node mem, by pod name.
  NodeVictims Proposed(std::initializer_list<std::string> names) {
    NodeVictims v;
    for (const std::string& n : names) v.uids.push_back(Uid(n));
    return v;
  }
  // kube-scheduler asks for "serving" (22 GiB, priority 1000) with `proposed` on node mem.
  Result<PreemptDecision> DecideServing(NodeVictims proposed) {
    const json big = PriorityPod("serving", 22, 1000);
    return preemptor_->Decide(DecodePodOrDie(big), Req(big), {{"mem", std::move(proposed)}});
  }
  // kube-scheduler deletes the victims.
  void DeleteVictims(const std::vector<std::string>& uids) {
    for (const std::string& uid : uids)
      for (auto it = pods_.begin(); it != pods_.end(); ++it)
        if (it->second.metadata.uid == uid) {
          cache_->DeletePod(it->second);
          pods_.erase(it);
          break;
        }
  }
  void Budget(const std::string& name, const std::map<std::string, std::string>& selector,
              int32_t allowed) {
    kube::PodDisruptionBudget b;
    b.metadata.name = name;
    b.metadata.namespace_ = "default";
    b.selector.match_labels = selector;
    b.disruptions_allowed = allowed;
    budgets_.push_back(std::make_shared<const kube::PodDisruptionBudget>(b));
  }

  std::unique_ptr<GpuCache> cache_;
  std::unique_ptr<Preemptor> preemptor_;
  std::map<std::string, kube::Pod> pods_;
  std::vector<std::shared_ptr<const kube::PodDisruptionBudget>> budgets_;
  std::vector<std::string> events_;
  std::string log_;
  int64_t now_ = 1'000'000'000;
};

TEST_F(PreemptTest, FreesOneGpuInsteadOfTheNodeTotalsVictims) {
  FullNode("mem");
  const json big = PriorityPod("serving", 22, 1000);
  Result<PreemptDecision> d =
      preemptor_->Decide(DecodePodOrDie(big), Req(big), {{"mem", SpreadVictims("mem", 5)}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->node, "mem");
  EXPECT_EQ(d->victims.size(), 7u) << "every pod of one GPU, not kube-scheduler's five";
  const std::set<int> gpus = GpusOf(d->victims);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(d->gpus.at("main"), *gpus.begin()) << "the pod goes to the GPU its victims free";
  EXPECT_EQ(d->pdb_violations, 0);
  // The GPU is held for it.
  std::vector<Nomination> held = cache_->Nominations();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].node, "mem");
  EXPECT_EQ(held[0].gpus, d->gpus);
  EXPECT_EQ(held[0].victims, d->victims);
}

// Kubelet admitted two identical pods swapped (a planned on GPU 1 sits on GPU 0, b the other way):
// the scheduler counts each GPU as the larger of its planned slots and its pods, so evicting
// GPU 0's seven pods would leave b's slot planned there, and the 22 GiB pod could never bind (what
// the Helm e2e found). With nothing pending on the node, b's plan moves to where b is when the GPU
// is held: the victims are the seven pods on the GPU, even where a budget covers b.
TEST_F(PreemptTest, ASwappedPodsPlanMovesWithTheHoldInsteadOfItsEviction) {
  SwappedPair({{"app", "guarded"}});
  Budget("guard", {{"app", "guarded"}}, 0);
  const json big = PriorityPod("serving", 22, 1000);
  const kube::Pod serving = DecodePodOrDie(big);
  NodeVictims proposed;
  proposed.uids = {Uid("g0-0")};
  Result<PreemptDecision> d = preemptor_->Decide(serving, Req(big), {{"mem", proposed}});
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->node, "mem") << (d->refused.empty() ? "" : d->refused.begin()->second);
  EXPECT_EQ(d->victims.size(), 7u) << "the seven pods on GPU 0, and not b";
  EXPECT_EQ(GpusOf(d->victims), std::set<int>{0});
  EXPECT_EQ(d->pdb_violations, 0);
  // b's plan follows b, first; the service writes it to the pod (Sweep). (a's plan then settles
  // where a is, as any swap whose partner's plan moved.)
  std::vector<PlanMove> moves = cache_->PlanMoves();
  ASSERT_GE(moves.size(), 1u);
  EXPECT_EQ(moves[0].key, "default/b");
  EXPECT_EQ(moves[0].from.at("main"), 0);
  EXPECT_EQ(moves[0].to.at("main"), 1);
  for (size_t i = 1; i < moves.size(); ++i) EXPECT_EQ(moves[i].key, "default/a");
  EXPECT_NE(log_.find("event=plan_moved pod=default/b"), std::string::npos) << log_;
  DeleteVictims(d->victims);
  std::vector<NodeVerdict> v = cache_->Filter(Req(big), {"mem"}, Asker::Of(serving));
  EXPECT_EQ(v[0].kind, K::kFits) << v[0].reason;
  Result<Reservation> r = cache_->Reserve(serving, Req(big), "mem", now_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->demand_gpus[0], 0);
}

// With a pod placed on the node and not yet confirmed, the swap's open slot may be the one that
// pod is admitted into, so no plan moves: the planned slot is freed by evicting its pod.
TEST_F(PreemptTest, WithAPodPendingOnTheNodeAPlannedSlotIsFreedByEvictingItsPod) {
  SwappedPair();
  // Bound to GPU 1 by the scheduler, not yet admitted (priority 1000: not a victim).
  json pending = PriorityPod("pending", 1, 1000);
  pending["spec"]["nodeName"] = "mem";
  for (const auto& [k, v] : ms::BindAnnotations(Req(pending), {1}, 22, 1))
    pending["metadata"]["annotations"][k] = v;
  kube::Pod pp = DecodePodOrDie(pending);
  pods_[pp.Key()] = pp;
  cache_->UpsertPod(pp);
  Result<PreemptDecision> d = DecideServing(Proposed({"g0-0"}));
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->node, "mem");
  EXPECT_EQ(d->victims.size(), 8u) << "the seven pods on GPU 0 and b, whose slot is planned there";
  EXPECT_TRUE(cache_->PlanMoves().empty());
}

// A pod that may not use GPU 0 (nvidia.com/nouse-gpuuuid) frees GPU 1: evicting GPU 0's pods
// would not help it. Excluded everywhere, it evicts nothing and says why.
TEST_F(PreemptTest, VictimsOnlyOnTheGpusThePodMayUse) {
  FullNode("mem", 2);
  json big = PriorityPod("serving", 22, 1000);
  big["metadata"]["annotations"]["nvidia.com/nouse-gpuuuid"] =
      "GPU-1000-0000-0000-0000-000000000000";
  NodeVictims on_gpu0;
  for (int k = 0; k < 7; ++k) on_gpu0.uids.push_back(Uid("mem-g0-" + std::to_string(k)));
  Result<PreemptDecision> d = preemptor_->Decide(DecodePodOrDie(big), Req(big), {{"mem", on_gpu0}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->node, "mem");
  EXPECT_EQ(GpusOf(d->victims), std::set<int>{1});
  EXPECT_EQ(d->gpus.at("main"), 1);
  big["metadata"]["annotations"]["nvidia.com/use-gputype"] = "H100";
  d = preemptor_->Decide(DecodePodOrDie(big), Req(big), {{"mem", on_gpu0}});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->victims.empty());
  ASSERT_EQ(d->refused.count("mem"), 1u);
  EXPECT_NE(d->refused.at("mem").find("the pod's GPU choice excludes every GPU here"),
            std::string::npos)
      << d->refused.at("mem");
}

// Evictions free memory, not compute: a GPU without the pod's compute share left keeps its pods,
// and a node where no GPU has it evicts nothing and says why.
TEST_F(PreemptTest, AGpuWithoutThePodsComputeShareLeftKeepsItsPods) {
  Node("mem", 2);
  for (int k = 0; k < 6; ++k) Running(PriorityPod("g0-" + std::to_string(k), 3, 0), "mem", 0);
  Running(WithCore(PriorityPod("g0-hot", 3, 0), 80), "mem", 0);
  for (int k = 0; k < 7; ++k) Running(PriorityPod("g1-" + std::to_string(k), 3, 0), "mem", 1);
  const json serving = WithCore(PriorityPod("serving", 3, 1000), 50);
  NodeVictims proposed = Proposed({"g0-hot", "g0-0"});
  Result<PreemptDecision> d =
      preemptor_->Decide(DecodePodOrDie(serving), Req(serving), {{"mem", proposed}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->node, "mem");
  EXPECT_EQ(GpusOf(d->victims), std::set<int>{1});
  EXPECT_EQ(d->gpus.at("main"), 1);
  // GPU 1 with 60 % booked too: nothing to evict for.
  DeleteVictims({Uid("g1-0")});
  Running(WithCore(PriorityPod("g1-hot", 3, 0), 60), "mem", 1);
  d = preemptor_->Decide(DecodePodOrDie(serving), Req(serving), {{"mem", proposed}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_TRUE(d->victims.empty());
  ASSERT_EQ(d->refused.count("mem"), 1u);
  EXPECT_NE(d->refused.at("mem").find("no GPU here has the pod's compute share left: GPU 0: "
                                      "compute 80/100 booked"),
            std::string::npos)
      << d->refused.at("mem");
}

// The GPU held for a nominee with a compute share keeps room for that share: its own hold does
// not count against it (40 % booked + its 50 % held is 90 %, not 140 %).
TEST_F(PreemptTest, TheNomineesOwnHoldLeavesItsComputeShareRoom) {
  Node("mem", 2);
  for (int k = 0; k < 6; ++k) Running(PriorityPod("g0-" + std::to_string(k), 3, 0), "mem", 0);
  Running(WithCore(PriorityPod("g0-hot", 3, 2000), 60), "mem", 0);  // GPU 0: no 50 % left
  for (int k = 0; k < 6; ++k) Running(PriorityPod("g1-" + std::to_string(k), 3, 0), "mem", 1);
  Running(WithCore(PriorityPod("g1-hot", 3, 2000), 40), "mem", 1);  // never a victim
  const json serving = WithCore(PriorityPod("serving", 3, 1000), 50);
  Result<PreemptDecision> d =
      preemptor_->Decide(DecodePodOrDie(serving), Req(serving), {{"mem", Proposed({"g1-0"})}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->node, "mem");
  EXPECT_EQ(GpusOf(d->victims), std::set<int>{1});
  DeleteVictims(d->victims);
  const kube::Pod pod = DecodePodOrDie(serving);
  std::vector<NodeVerdict> v = cache_->Filter(Req(serving), {"mem"}, Asker::Of(pod));
  EXPECT_EQ(v[0].kind, NodeVerdict::Kind::kFits) << v[0].reason;
  // Anyone else of lower priority: GPU 1's 50 % is held (40 % + 50 % leaves no 45 %), and GPU 0
  // has 40 % left.
  json other = WithCore(PriorityPod("other", 1, 0), 45);
  v = cache_->Filter(Req(other), {"mem"}, Asker::Of(DecodePodOrDie(other)));
  EXPECT_EQ(v[0].code, reasons::kGpuComputeFull) << v[0].reason;
  EXPECT_NE(v[0].reason.find("GPU 1: compute 90/100 booked"), std::string::npos) << v[0].reason;
}

TEST_F(PreemptTest, APodLargerThanAnyGpuEvictsNothingAndSaysWhy) {
  FullNode("mem");
  const json huge = PriorityPod("huge", 23, 1000);
  Result<PreemptDecision> d =
      preemptor_->Decide(DecodePodOrDie(huge), Req(huge), {{"mem", SpreadVictims("mem", 5)}});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->node.empty());
  EXPECT_TRUE(d->victims.empty());
  ASSERT_EQ(d->refused.count("mem"), 1u);
  EXPECT_NE(d->refused.at("mem").find("no GPU would have room"), std::string::npos)
      << d->refused.at("mem");
  EXPECT_TRUE(cache_->Nominations().empty());
  // Over the verb: an empty map (kube-scheduler evicts nothing) and an Event with the reason.
  json body = {{"Pod", huge},
               {"NodeNameToVictims", nullptr},
               {"NodeNameToMetaVictims",
                {{"mem", {{"Pods", {{{"UID", Uid("mem-g6-0")}}}}, {"NumPDBViolations", 0}}}}}};
  HttpReply r = preemptor_->Preempt(body.dump());
  EXPECT_EQ(r.code, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"NodeNameToMetaVictims":{}})"));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_NE(events_[0].find(std::string(reasons::kPreemptionNotHelpful)), std::string::npos);
  EXPECT_NE(events_[0].find("mem: even with every pod of lower priority gone"), std::string::npos)
      << events_[0];
}

TEST_F(PreemptTest, TheVerbRepliesWithOneNodeAndItsVictimsMostImportantFirst) {
  FullNode("a", 2);
  FullNode("b", 2);
  // Node b's pods matter less (priority -10): b is the better candidate.
  for (auto& [key, p] : pods_) {
    if (p.spec.node_name != "b") continue;
    p.spec.priority = -10;
    cache_->UpsertPod(p);
  }
  const json big = PriorityPod("serving", 22, 1000);
  json body = {{"Pod", big},
               {"NodeNameToVictims", nullptr},
               {"NodeNameToMetaVictims",
                {{"a", {{"Pods", {{{"UID", Uid("a-g0-0")}}}}, {"NumPDBViolations", 0}}},
                 {"b", {{"Pods", {{{"UID", Uid("b-g1-0")}}}}, {"NumPDBViolations", 0}}}}}};
  HttpReply r = preemptor_->Preempt(body.dump());
  ASSERT_EQ(r.code, 200) << r.body;
  json reply = json::parse(r.body)["NodeNameToMetaVictims"];
  ASSERT_EQ(reply.size(), 1u) << r.body;
  ASSERT_TRUE(reply.contains("b")) << r.body;
  EXPECT_EQ(reply["b"]["Pods"].size(), 7u);
  EXPECT_EQ(reply["b"]["NumPDBViolations"], 0);
  // kube-scheduler reads Pods[0] as the most important victim: the oldest of equals first.
  std::vector<std::string> uids;
  for (const json& p : reply["b"]["Pods"]) uids.push_back(p["UID"]);
  const std::set<int> gpus = GpusOf(uids);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(uids.front(), Uid("b-g" + std::to_string(*gpus.begin()) + "-0"));
  EXPECT_EQ(uids.back(), Uid("b-g" + std::to_string(*gpus.begin()) + "-6"));
}

TEST_F(PreemptTest, BudgetsSteerToTheGpuTheyAllowOrToNone) {
  Node("mem", 2);
  for (int k = 0; k < 7; ++k)
    Running(PriorityPod("prot-" + std::to_string(k), 3, 0, "2026-12-01T00:00:00Z",
                        {{"app", "protected"}}),
            "mem", 0);
  for (int k = 0; k < 7; ++k) Running(PriorityPod("free-" + std::to_string(k), 3, 0), "mem", 1);
  Budget("protected", {{"app", "protected"}}, 0);
  Result<PreemptDecision> d = DecideServing(Proposed({"prot-0"}));
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->node, "mem");
  EXPECT_EQ(GpusOf(d->victims), std::set<int>{1}) << "the GPU the budget allows";
}

TEST_F(PreemptTest, BudgetsThatAllowNoGpuMeanNoVictims) {
  FullNode("mem", 2);
  Budget("batch", {{"app", "batch"}}, 6);  // six of fourteen may go: no GPU frees with six
  Result<PreemptDecision> d = DecideServing(SpreadVictims("mem", 1, 2));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->node.empty());
  EXPECT_NE(d->refused.at("mem").find("PodDisruptionBudget"), std::string::npos)
      << d->refused.at("mem");
  EXPECT_TRUE(cache_->Nominations().empty());
}

TEST_F(PreemptTest, VictimsChosenForOtherResourcesStay) {
  FullNode("mem", 1);
  json sidecar = PriorityPod("cpu-hog", 0, 0);
  sidecar["spec"]["containers"][0]["resources"] = {{"requests", {{"cpu", "4"}}}};
  sidecar["spec"]["nodeName"] = "mem";
  sidecar["metadata"]["uid"] = "uid-cpu-hog";
  pods_["default/cpu-hog"] = DecodePodOrDie(sidecar);
  const json big = PriorityPod("serving", 22, 1000);
  NodeVictims proposed = {{"uid-cpu-hog", Uid("mem-g0-0")}, 0};
  Result<PreemptDecision> d =
      preemptor_->Decide(DecodePodOrDie(big), Req(big), {{"mem", proposed}});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->victims.size(), 8u);
  EXPECT_NE(std::find(d->victims.begin(), d->victims.end(), "uid-cpu-hog"), d->victims.end());
}

TEST_F(PreemptTest, TheHeldGpuIsTheNomineesAndNoLowerPriorityPodsTakesIt) {
  FullNode("mem", 2);
  const json big = PriorityPod("serving", 22, 1000);
  const kube::Pod serving = DecodePodOrDie(big);
  Result<PreemptDecision> d =
      preemptor_->Decide(serving, Req(big), {{"mem", SpreadVictims("mem", 1, 2)}});
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->node, "mem");
  const int held = d->gpus.at("main");
  // The victims go (kube-scheduler deletes them).
  DeleteVictims(d->victims);
  // Their replacements (priority 0) find no room: the freed GPU is held.
  const json replacement = PriorityPod("replacement", 3, 0);
  std::vector<NodeVerdict> v =
      cache_->Filter(Req(replacement), {"mem"}, Asker::Of(DecodePodOrDie(replacement)));
  EXPECT_EQ(v[0].kind, K::kFailed) << v[0].reason;
  EXPECT_NE(v[0].reason.find("held for pending pod default/serving"), std::string::npos)
      << v[0].reason;
  // The nominee fits, and binds to the GPU that was freed for it.
  v = cache_->Filter(Req(big), {"mem"}, Asker::Of(serving));
  EXPECT_EQ(v[0].kind, K::kFits) << v[0].reason;
  Result<Reservation> r = cache_->Reserve(serving, Req(big), "mem", now_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->demand_gpus[0], held);
  EXPECT_TRUE(cache_->Nominations().empty()) << "the hold became the booking";
}

TEST_F(PreemptTest, APodOfHigherPriorityIsNotHeldBack) {
  HoldTheOnlyGpuForServing();
  const json vip = PriorityPod("vip", 4, 2000);
  const kube::Pod vp = DecodePodOrDie(vip);
  std::vector<NodeVerdict> v = cache_->Filter(Req(vip), {"mem"}, Asker::Of(vp));
  EXPECT_EQ(v[0].kind, K::kFits) << v[0].reason;
  Result<Reservation> r = cache_->Reserve(vp, Req(vip), "mem", now_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(cache_->Nominations().empty()) << "the lower hold ends where its GPU is taken";
}

TEST_F(PreemptTest, APodOfEqualPriorityIsHeldBack) {
  HoldTheOnlyGpuForServing();
  const json peer = PriorityPod("peer", 4, 1000);
  const kube::Pod pp = DecodePodOrDie(peer);
  EXPECT_EQ(cache_->Filter(Req(peer), {"mem"}, Asker::Of(pp))[0].kind, K::kFailed);
  EXPECT_FALSE(cache_->Reserve(pp, Req(peer), "mem", now_).ok());
  EXPECT_EQ(cache_->Nominations().size(), 1u);
}

TEST_F(PreemptTest, HoldsEndWhenThePodGoesOrIsNominatedElsewhereOrTimesOut) {
  FullNode("mem", 2);
  const json big = PriorityPod("serving", 22, 1000);
  kube::Pod serving = DecodePodOrDie(big);
  const std::map<std::string, NodeVictims> proposed = {{"mem", SpreadVictims("mem", 1, 2)}};
  ASSERT_EQ(preemptor_->Decide(serving, Req(big), proposed)->node, "mem");
  ASSERT_EQ(cache_->Nominations().size(), 1u);
  // kube-scheduler nominates it there (seen), then moves it elsewhere: the hold ends.
  serving.status.nominated_node_name = "mem";
  cache_->UpsertPod(serving);
  ASSERT_EQ(cache_->Nominations().size(), 1u);
  EXPECT_TRUE(cache_->Nominations()[0].seen);
  serving.status.nominated_node_name = "other";
  cache_->UpsertPod(serving);
  EXPECT_TRUE(cache_->Nominations().empty());
  EXPECT_NE(log_.find("event=nomination_ended pod=default/serving"), std::string::npos);

  // Deleted: ends at once.
  serving.status.nominated_node_name.clear();
  ASSERT_EQ(preemptor_->Decide(serving, Req(big), proposed)->node, "mem");
  cache_->DeletePod(serving);
  EXPECT_TRUE(cache_->Nominations().empty());

  // Never nominated by kube-scheduler: ends after the timeout.
  ASSERT_EQ(preemptor_->Decide(serving, Req(big), proposed)->node, "mem");
  EXPECT_TRUE(
      cache_->ExpireNominations(now_ + 59'000'000'000, 60'000'000'000, 30'000'000'000).empty());
  EXPECT_EQ(cache_->ExpireNominations(now_ + 60'000'000'000, 60'000'000'000, 30'000'000'000).size(),
            1u);
  EXPECT_TRUE(cache_->Nominations().empty());

  // Nominated, victims still terminating: held however long; once they are gone, for the
  // timeout.
  ASSERT_EQ(preemptor_->Decide(serving, Req(big), proposed)->node, "mem");
  serving.status.nominated_node_name = "mem";
  cache_->UpsertPod(serving);
  const std::vector<std::string> victims = cache_->Nominations()[0].victims;
  EXPECT_TRUE(
      cache_->ExpireNominations(now_ + 3600'000'000'000, 60'000'000'000, 30'000'000'000).empty());
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (std::find(victims.begin(), victims.end(), it->second.metadata.uid) != victims.end()) {
      cache_->DeletePod(it->second);
      it = pods_.erase(it);
    } else {
      ++it;
    }
  }
  const int64_t gone = now_ + 3700'000'000'000;
  EXPECT_TRUE(cache_->ExpireNominations(gone, 60'000'000'000, 30'000'000'000).empty());
  EXPECT_TRUE(
      cache_->ExpireNominations(gone + 59'000'000'000, 60'000'000'000, 30'000'000'000).empty());
  EXPECT_EQ(cache_->ExpireNominations(gone + 60'000'000'000, 60'000'000'000, 30'000'000'000).size(),
            1u);
  EXPECT_TRUE(cache_->Nominations().empty());
}

TEST(PreemptionWire, DecodesBothFormsAndRefusesWhatIsMalformed) {
  json meta = {{"Pod", {{"metadata", {{"name", "p"}}}}},
               {"NodeNameToVictims", nullptr},
               {"NodeNameToMetaVictims",
                {{"n1", {{"Pods", {{{"UID", "a"}}, {{"UID", "b"}}}}, {"NumPDBViolations", 1}}}}}};
  Result<PreemptionArgs> a = DecodePreemptionArgs(meta);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->nodes.at("n1").uids, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a->nodes.at("n1").pdb_violations, 1);
  // Go matches keys case-insensitively; the full form carries whole pods.
  json full = json::parse(R"({"pod": {"metadata": {"name": "p"}},
      "nodeNameToVictims": {"n2": {"pods": [{"metadata": {"uid": "c"}}], "numPDBViolations": 0}},
      "NodeNameToMetaVictims": null})");
  a = DecodePreemptionArgs(full);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->nodes.at("n2").uids, std::vector<std::string>{"c"});
  for (const json& bad :
       {json{{"NodeNameToMetaVictims", nullptr}},
        json{{"Pod", {{"metadata", {}}}}, {"NodeNameToMetaVictims", {{"n", {{"Pods", "x"}}}}}},
        json{{"Pod", {{"metadata", {}}}}, {"NodeNameToMetaVictims", {{"n", {{"Pods", {{}}}}}}}},
        json{{"Pod", {{"metadata", {}}}},
             {"NodeNameToMetaVictims", {{"n", {{"NumPDBViolations", "1"}}}}}}}) {
    EXPECT_FALSE(DecodePreemptionArgs(bad).ok()) << bad.dump();
  }
  std::map<std::string, NodeVictims> reply;
  reply["n1"] = {{"a"}, 0};
  EXPECT_EQ(json::parse(EncodePreemptionResult(reply)),
            json::parse(
                R"({"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"a"}],"NumPDBViolations":0}}})"));
}

TEST(LabelSelectors, MatchAsTheApiReadsThem) {
  kube::LabelSelector s;
  EXPECT_TRUE(s.Empty());
  s.match_labels = {{"app", "x"}};
  EXPECT_TRUE(s.Matches({{"app", "x"}, {"tier", "1"}}));
  EXPECT_FALSE(s.Matches({{"app", "y"}}));
  s.match_expressions = {{"tier", "In", {"1", "2"}}, {"gone", "DoesNotExist", {}}};
  EXPECT_TRUE(s.Matches({{"app", "x"}, {"tier", "2"}}));
  EXPECT_FALSE(s.Matches({{"app", "x"}, {"tier", "3"}}));
  EXPECT_FALSE(s.Matches({{"app", "x"}, {"tier", "1"}, {"gone", ""}}));
  s.match_expressions = {{"tier", "Bogus", {}}};
  EXPECT_FALSE(s.Matches({{"app", "x"}, {"tier", "1"}})) << "an invalid selector matches nothing";
  kube::PodDisruptionBudget b;
  b.metadata.namespace_ = "ns";
  b.selector.match_labels = {{"app", "x"}};
  EXPECT_TRUE(b.Covers("ns", {{"app", "x"}}));
  EXPECT_FALSE(b.Covers("other", {{"app", "x"}}));
  b.selector = {};
  EXPECT_FALSE(b.Covers("ns", {{"app", "x"}}))
      << "an empty selector covers nothing (kube-scheduler)";
  Result<kube::PodDisruptionBudget> d = kube::DecodePodDisruptionBudget(json::parse(R"({
      "metadata": {"name": "b", "namespace": "ns"},
      "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}},
      "status": {"disruptionsAllowed": 2, "disruptedPods": {"p1": "2026-12-05T00:00:00Z"}}})"));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->disruptions_allowed, 2);
  EXPECT_EQ(d->disrupted_pods, std::set<std::string>{"p1"});
  EXPECT_TRUE(d->Covers("ns", {{"app", "x"}}));
}

}  // namespace
}  // namespace gpushare::scheduler
