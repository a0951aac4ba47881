// Picks (GpuCache::Pick, --pick-hold): the GPUs the policy chooses for a pod, held from its
// scheduling cycle to its bind. kube-scheduler counts a pod on its node between the two only in
// the resources it knows; it ignores alibabacloud.com/gpu-milli and cannot know which GPU a share
// takes, so without the pick the next pods' filters saw the GPU free and their binds conflicted
// (1,285 BindConflicts in 15,000 binds of 3,000-pod bursts at 1,213 nodes; docs/benchmarks.md).
#include <gtest/gtest.h>

#include "kube/memshare_pod.h"
#include "scheduler/cache.h"
#include "scheduler/extender.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::scheduler {
namespace {

using namespace testing;
using K = NodeVerdict::Kind;

constexpr int64_t kSecond = 1'000'000'000;

class PickTest : public ::testing::Test {
 protected:
  PickTest() { cache_ = SyncedCache(&log_); }
  void Node(const std::string& name, int gpus, int64_t units) {
    cache_->UpsertNode(DecodeNodeOrDie(NodeJson(name, Uniform(gpus, units))));
  }
  static json WithPriority(json pod, int32_t priority) {
    pod["spec"]["priority"] = priority;
    return pod;
  }
  K Verdict(const json& pod, const std::string& node) {
    const kube::Pod p = DecodePodOrDie(pod);
    return cache_->Filter(Req(pod), {node}, Asker::Of(p))[0].kind;
  }
  Status Pick(const json& pod, const std::string& node, int64_t now = 0) {
    return cache_->Pick(DecodePodOrDie(pod), Req(pod), node, now);
  }
  Result<Reservation> Reserve(const json& pod, const std::string& node) {
    return cache_->Reserve(DecodePodOrDie(pod), Req(pod), node, 1);
  }
  std::vector<Nomination> Expire(int64_t now) {
    return cache_->ExpireNominations(now, 60 * kSecond, 30 * kSecond);
  }

  std::string log_;
  std::unique_ptr<GpuCache> cache_;
};

TEST_F(PickTest, APickHoldsTheGpuForItsPodUntilTheBindBooksIt) {
  Node("n", 1, 10);
  const json a = SimplePod("a", 6), b = SimplePod("b", 6);
  const Status s = Pick(a, "n");
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cache_->stats().picks, 1);
  EXPECT_EQ(Verdict(b, "n"), K::kFailed) << "the GPU is held for a";
  EXPECT_EQ(Verdict(a, "n"), K::kFits) << "a is exempt from its own pick";
  Result<Reservation> r = Reserve(a, "n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->demand_gpus, std::vector<int>{0});
  EXPECT_EQ(cache_->stats().picks, 0) << "the bind took the pick over";
  EXPECT_EQ(Verdict(b, "n"), K::kFailed) << "now booked";
  EXPECT_FALSE(Reserve(b, "n").ok());
  EXPECT_EQ(log_.find("nomination_ended"), std::string::npos) << "a pick ends quietly:\n" << log_;
}

TEST_F(PickTest, APickChoosesTheGpuTheBindWillTake) {
  Node("n", 2, 10);
  const json a = SimplePod("a", 4), b = SimplePod("b", 4);
  ASSERT_TRUE(Reserve(SimplePod("first", 5), "n").ok());  // one GPU has 5 left, the other 10
  ASSERT_TRUE(Pick(a, "n").ok());
  const std::vector<Nomination> held = cache_->Nominations();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(held[0].pick);
  EXPECT_TRUE(held[0].victims.empty());
  Result<Reservation> r = Reserve(a, "n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->demand_gpus[0], held[0].gpus.begin()->second) << "booked where it was picked";
  EXPECT_TRUE(Reserve(b, "n").ok()) << "room is left for b";
}

TEST_F(PickTest, APickEndsWhenItsPodGoesElsewhereIsPickedAgainOrIsNotBoundInTime) {
  Node("n", 1, 10);
  Node("m", 1, 10);
  const json a = SimplePod("a", 6), b = SimplePod("b", 6);
  ASSERT_TRUE(Pick(a, "n").ok());
  ASSERT_TRUE(Pick(a, "m").ok()) << "picked again: the first pick ends";
  EXPECT_EQ(Verdict(b, "n"), K::kFits);
  EXPECT_EQ(Verdict(b, "m"), K::kFailed);
  ASSERT_TRUE(Reserve(a, "n").ok()) << "bound elsewhere than picked";
  EXPECT_EQ(Verdict(b, "m"), K::kFits) << "the pick on m ended with the bind on n";
  EXPECT_EQ(cache_->stats().picks, 0);

  // Never bound: the pick ends after --pick-hold (30 s here), whatever --nomination-timeout says.
  const json c = SimplePod("c", 6);
  ASSERT_TRUE(Pick(c, "m", 100 * kSecond).ok());
  EXPECT_TRUE(Expire(129 * kSecond).empty());
  EXPECT_EQ(Verdict(b, "m"), K::kFailed);
  const std::vector<Nomination> ended = Expire(130 * kSecond);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_TRUE(ended[0].pick);
  EXPECT_EQ(cache_->stats().picks_expired, 1u);
  EXPECT_NE(log_.find("event=pick_expired pod=default/c node=m "), std::string::npos) << log_;
  EXPECT_EQ(Verdict(b, "m"), K::kFits);

  // Deleted before its bind.
  ASSERT_TRUE(Pick(c, "m").ok());
  cache_->DeletePod(DecodePodOrDie(c));
  EXPECT_EQ(Verdict(b, "m"), K::kFits);
}

TEST_F(PickTest, APickHoldsOnlyForPodsOfLowerOrEqualPriorityAndNeverOverBooks) {
  Node("n", 1, 10);
  ASSERT_TRUE(Pick(WithPriority(SimplePod("low", 6), 0), "n").ok());
  EXPECT_EQ(Verdict(WithPriority(SimplePod("same", 6), 0), "n"), K::kFailed);
  const json high = WithPriority(SimplePod("high", 6), 100);
  EXPECT_EQ(Verdict(high, "n"), K::kFits) << "kube-scheduler would place it first anyway";
  ASSERT_TRUE(Reserve(high, "n").ok()) << "the lower pick gives way";
  EXPECT_EQ(cache_->stats().picks, 0);
  // No room: no pick (and nothing held).
  EXPECT_EQ(Pick(SimplePod("big", 6), "n").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cache_->stats().picks, 0);
  // A booked pod is not picked again.
  EXPECT_TRUE(Pick(high, "n").ok());
  EXPECT_EQ(cache_->stats().picks, 0);
}

// The defect through the extender: fractions of one GPU, one after the other, as kube-scheduler
// sends them in a burst (each pod's filter, and prioritize, before the previous pod's bind).
class PickExtenderTest : public PickTest {
 protected:
  // The nodes the filter passes for `pod` among x and y.
  std::vector<std::string> Passed(Extender& x, const json& pod) {
    const HttpReply r = x.Filter(json{{"Pod", pod}, {"NodeNames", {"x", "y"}}}.dump());
    EXPECT_EQ(r.code, 200) << r.body;
    std::vector<std::string> out;
    const json j = json::parse(r.body);
    if (j["NodeNames"].is_array())
      for (const auto& n : j["NodeNames"]) out.push_back(n.get<std::string>());
    return out;
  }
  std::string Top(Extender& x, const json& pod, const std::vector<std::string>& nodes) {
    const HttpReply r = x.Prioritize(json{{"Pod", pod}, {"NodeNames", nodes}}.dump());
    EXPECT_EQ(r.code, 200) << r.body;
    for (const auto& h : json::parse(r.body))
      if (h["Score"] == 10) return h["Host"];
    return "";
  }
};

TEST_F(PickExtenderTest, WithOneExchangeConsecutiveFractionsGoWhereTheirBindsSucceed) {
  Node("x", 1, 16);
  Node("y", 1, 16);
  const json f1 = MilliPod("f1", 600), f2 = MilliPod("f2", 600);  // 10 of 16 GiB each
  for (const bool pick : {false, true}) {
    SCOPED_TRACE(pick ? "with picks" : "without picks");
    cache_ = std::make_unique<GpuCache>(CacheOptions{});
    cache_->SetSynced(true);
    Node("x", 1, 16);
    Node("y", 1, 16);
    ExtenderOptions o;
    o.filter_keep_best = 1;
    o.pick = pick;
    Extender x(*cache_, nullptr, o);
    const std::vector<std::string> first = Passed(x, f1), second = Passed(x, f2);
    ASSERT_EQ(first.size(), 1u);
    ASSERT_EQ(second.size(), 1u);
    if (!pick) {
      // What happened before: both sent to the same GPU, the second bind a conflict.
      EXPECT_EQ(first, second);
      EXPECT_TRUE(Reserve(f1, first[0]).ok());
      EXPECT_EQ(Reserve(f2, second[0]).status().code(), StatusCode::kResourceExhausted);
      continue;
    }
    EXPECT_NE(first, second);
    EXPECT_TRUE(Reserve(f2, second[0]).ok()) << "binds may arrive in any order";
    EXPECT_TRUE(Reserve(f1, first[0]).ok());
    EXPECT_EQ(cache_->stats().picks, 0);
  }
}

TEST_F(PickExtenderTest, WithPrioritizeTheNodeScoredTenIsPicked) {
  Node("x", 1, 16);
  Node("y", 1, 16);
  ExtenderOptions o;
  o.pick = true;
  Extender x(*cache_, nullptr, o);
  const json f1 = MilliPod("f1", 600), f2 = MilliPod("f2", 600);
  ASSERT_EQ(Passed(x, f1).size(), 2u);
  const std::string chosen = Top(x, f1, {"x", "y"});
  ASSERT_FALSE(chosen.empty());
  const std::vector<std::string> left = Passed(x, f2);
  ASSERT_EQ(left.size(), 1u) << "the GPU of " << chosen << " is held for f1";
  EXPECT_NE(left[0], chosen);
  EXPECT_EQ(Top(x, f2, left), left[0]);
  EXPECT_TRUE(Reserve(f1, chosen).ok());
  EXPECT_TRUE(Reserve(f2, left[0]).ok());
}

}  // namespace
}  // namespace gpushare::scheduler
