#include "core/placement/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/placement/test_cluster.h"

namespace gpushare::placement {
namespace {

using testing::Add;
using testing::BookShare;
using testing::Node;

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = Add(c_, Node("a", 32000, 4, "G2"));
    b_ = Add(c_, Node("b", 8000, 2, "T4"));
    cpu_ = Add(c_, Node("cpu", 64000, 0));
  }
  std::unique_ptr<Policy> Make(const std::string& name) {
    auto p = MakePolicy(name, c_, workload_, PolicyOptions{}, &rng_);
    EXPECT_TRUE(p.ok());
    return std::move(p).value();
  }
  ClusterState c_;
  TargetWorkload workload_;
  Rng rng_{9};
  NodeId a_ = -1, b_ = -1, cpu_ = -1;
};

TEST_F(EngineTest, EvaluateGivesAReasonOrAScorePerCandidate) {
  auto p = Make("bestfit");
  PlacementEngine e(c_, *p);
  auto pod = e.Intern(MakePodRequest(10000, 0, 1, 1000, "G2|T4"));
  ASSERT_TRUE(pod.ok());
  const auto v = e.Evaluate(*pod, {a_, b_, cpu_, 42});
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0].rejection, Rejection::kNone);
  EXPECT_EQ(v[1].rejection, Rejection::kCpu);
  EXPECT_EQ(v[2].rejection, Rejection::kNoGpus);
  EXPECT_EQ(v[3].rejection, Rejection::kUnknownNode);
  const auto scaled = PlacementEngine::ScaleScores(v, 10);
  EXPECT_EQ(scaled, (std::vector<int>{10, -1, -1, -1}));
}

TEST_F(EngineTest, ScaleScoresMapsToZeroToTen) {
  std::vector<Verdict> v(3);
  v[0].choice.score.value = 20;
  v[1].choice.score.value = 70;
  v[2].choice.score.value = 45;
  EXPECT_EQ(PlacementEngine::ScaleScores(v, 10), (std::vector<int>{0, 10, 5}));
}

// When every value ties, the tiebreak spreads the scores (GpuCache::Score relies on it); when
// both tie, every feasible verdict gets the maximum.
TEST_F(EngineTest, ScaleScoresFallsBackToTheTiebreak) {
  std::vector<Verdict> v(4);
  for (auto& x : v) x.choice.score.value = 3;
  v[0].choice.score.tiebreak = 1;
  v[1].choice.score.tiebreak = 5;
  v[2].choice.score.tiebreak = 2;
  v[3].rejection = Rejection::kCpu;
  EXPECT_EQ(PlacementEngine::ScaleScores(v, 10), (std::vector<int>{0, 10, 3, -1}));
  for (auto& x : v) x.choice.score.tiebreak = 7;
  EXPECT_EQ(PlacementEngine::ScaleScores(v, 10), (std::vector<int>{10, 10, 10, -1}));
}

TEST_F(EngineTest, ChooseTakesTheBestScoreThenTheSmallestTieRank) {
  auto p = Make("packing");
  PlacementEngine e(c_, *p);
  auto whole = e.Intern(MakePodRequest(1000, 0, 1, 1000));
  ASSERT_TRUE(whole.ok());
  // Both GPU nodes are idle: packing prefers the smaller node (33-2 > 33-4).
  Decision d = e.Choose(*whole);
  EXPECT_EQ(d.node, b_);
  EXPECT_EQ(d.feasible, 2);
  EXPECT_EQ(d.rejected[static_cast<int>(Rejection::kNoGpus)], 1);
  ASSERT_TRUE(e.Commit(*whole, d).ok());
  // Now b is used: 50-1 = 49 on b beats a's idle 29.
  d = e.Choose(*whole);
  EXPECT_EQ(d.node, b_);
  ASSERT_TRUE(e.Commit(*whole, d).ok());
  // b is full: a is the only candidate.
  d = e.Choose(*whole);
  EXPECT_EQ(d.node, a_);
  const std::string why = e.Explain(*whole, d);
  EXPECT_NE(why.find("placed"), std::string::npos);
  EXPECT_NE(why.find("on node a"), std::string::npos) << why;
  EXPECT_NE(why.find("whole_gpus"), std::string::npos) << why;

  // Ties go to the smallest rank.
  ClusterState c2;
  const NodeId x = Add(c2, Node("x", 8000, 2));
  const NodeId y = Add(c2, Node("y", 8000, 2));
  c2.set_tie_rank(x, 7);
  c2.set_tie_rank(y, 3);
  auto p2 = MakePolicy("packing", c2, workload_, PolicyOptions{}, nullptr);
  PlacementEngine e2(c2, **p2);
  auto w2 = e2.Intern(MakePodRequest(1000, 0, 1, 1000));
  const Decision tie = e2.Choose(*w2);
  EXPECT_EQ(tie.node, y);
  EXPECT_EQ(tie.tied, 2);
}

TEST_F(EngineTest, CachedVerdictsFollowStateChanges) {
  auto p = Make("bestfit");
  PlacementEngine e(c_, *p);
  auto share = e.Intern(MakePodRequest(1000, 0, 1, 600));
  ASSERT_TRUE(share.ok());
  const Decision first = e.Choose(*share);
  ASSERT_TRUE(first.placed());
  auto id = e.Commit(*share, first);
  ASSERT_TRUE(id.ok());
  // The same shape again: the changed node is re-evaluated, never a stale cached GPU.
  const Decision second = e.Choose(*share);
  ASSERT_TRUE(second.placed());
  if (second.node == first.node) {
    EXPECT_NE(second.choice.gpus.gpu[0], first.choice.gpus.gpu[0]);
  }
  ASSERT_TRUE(e.Commit(*share, second).ok());
  ASSERT_TRUE(e.Release(*id).ok());
  const Decision third = e.Choose(*share);
  EXPECT_TRUE(e.Commit(*share, third).ok());
  EXPECT_FALSE(e.Release(*id).ok());
}

TEST_F(EngineTest, NothingFitsExplainsWhy) {
  auto p = Make("fgd");
  PlacementEngine e(c_, *p);
  auto huge = e.Intern(MakePodRequest(1000, 0, 8, 1000));
  ASSERT_TRUE(huge.ok());
  const Decision d = e.Choose(*huge);
  EXPECT_FALSE(d.placed());
  EXPECT_EQ(d.feasible, 0);
  const std::string why = e.Explain(*huge, d);
  EXPECT_NE(why.find("no node fits"), std::string::npos) << why;
  EXPECT_NE(why.find("2 whole_gpus"), std::string::npos) << why;
  EXPECT_FALSE(e.Commit(*huge, d).ok());
}

TEST_F(EngineTest, CommitRefusesWhatTheFilterRefuses) {
  auto p = Make("bestfit");
  PlacementEngine e(c_, *p);
  auto t4only = e.Intern(MakePodRequest(1000, 0, 1, 500, "T4"));
  ASSERT_TRUE(t4only.ok());
  GpuAssignment g0;
  g0.Add(0);
  auto bad = e.Commit(*t4only, a_, g0);
  EXPECT_EQ(bad.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(bad.status().message().find("GPU model G2"), std::string::npos);
  EXPECT_TRUE(e.Commit(*t4only, b_, g0).ok());
  EXPECT_FALSE(e.Commit(99, b_, g0).ok());
  EXPECT_FALSE(e.Commit(*t4only, 99, g0).ok());
}

TEST_F(EngineTest, InterningDeduplicatesAndValidates) {
  auto p = Make("fgd");
  PlacementEngine e(c_, *p);
  auto x = e.Intern(MakePodRequest(1000, 0, 1, 500));
  auto y = e.Intern(MakePodRequest(1000, 0, 1, 500));
  auto z = e.Intern(MakePodRequest(1000, 0, 1, 501));
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  EXPECT_EQ(*x, *y);
  EXPECT_NE(*x, *z);
  EXPECT_FALSE(e.Intern(MakePodRequest(-5, 0, 0, 0)).ok());
}

TEST_F(EngineTest, NodesAddedLaterAreSeen) {
  auto p = Make("fgd");
  PlacementEngine e(c_, *p);
  auto a100 = e.Intern(MakePodRequest(1000, 0, 1, 1000, "A100"));
  ASSERT_TRUE(a100.ok());
  EXPECT_FALSE(e.Choose(*a100).placed());
  const NodeId n = Add(c_, Node("new", 64000, 8, "A100"));
  e.NodesAdded();
  const Decision d = e.Choose(*a100);
  EXPECT_EQ(d.node, n);
  EXPECT_TRUE(e.Commit(*a100, d).ok());
}

TEST_F(EngineTest, CandidateListsRestrictChoose) {
  auto p = Make("bestfit");
  PlacementEngine e(c_, *p);
  auto pod = e.Intern(MakePodRequest(1000, 0, 1, 1000));
  const Decision d = e.Choose(*pod, {a_, 77});
  EXPECT_EQ(d.node, a_);
  EXPECT_EQ(d.feasible, 1);
}

TEST_F(EngineTest, RandomPolicyOnlyPicksFeasibleNodes) {
  auto p = Make("random");
  PlacementEngine e(c_, *p);
  auto pod = e.Intern(MakePodRequest(10000, 0, 1, 300));
  for (int i = 0; i < 50; ++i) EXPECT_EQ(e.Choose(*pod).node, a_);  // b lacks CPU, cpu has no GPU
}

// ChooseEvaluated (the scheduler's prioritize: one pass for scores and the winner) decides as
// Choose does, for every policy, on partly used clusters, with candidate lists that repeat
// nodes, name unknown ids and leave nodes out.
TEST(EngineChooseEvaluated, SameDecisionAsChooseForEveryPolicy) {
  std::mt19937 gen(7);
  for (int round = 0; round < 6; ++round) {
    ClusterState c;
    for (int n = 0; n < 40; ++n) {
      const int gpus = static_cast<int>(gen() % 9);
      Add(c, Node("n" + std::to_string(n), 8000 + 8000 * static_cast<int64_t>(gen() % 4), gpus,
                  gen() % 2 ? "G2" : "T4"));
    }
    for (int i = 0; i < 120; ++i) {
      const NodeId n = static_cast<NodeId>(gen() % 40);
      if (c.node(n).num_gpus == 0) continue;
      const int g = static_cast<int>(gen() % c.node(n).num_gpus);
      const int64_t share = 100 * static_cast<int64_t>(1 + gen() % 9);
      if (c.node(n).GpuTakesShare(g, share)) BookShare(c, n, g, share, 500);
    }
    TargetWorkload workload;
    workload.shapes = {ShapeOf(MakePodRequest(1000, 0, 1, 300)),
                       ShapeOf(MakePodRequest(4000, 0, 1, 1000))};
    workload.shapes[0].weight = 0.7;
    workload.shapes[1].weight = 0.3;
    workload.all_shapes = workload.shapes;
    workload.observed_pods = 10;
    const std::vector<PodRequest> pods = {
        MakePodRequest(1000, 0, 1, 300), MakePodRequest(2000, 0, 2, 500),
        MakePodRequest(4000, 0, 1, 1000, "T4"), MakePodRequest(500, 0, 0, 0)};
    for (const std::string& name : PolicyNames()) {
      Rng rng_a(round + 1), rng_b(round + 1);  // random's picks: the same stream for both
      auto pa = MakePolicy(name, c, workload, PolicyOptions{}, &rng_a);
      auto pb = MakePolicy(name, c, workload, PolicyOptions{}, &rng_b);
      ASSERT_TRUE(pa.ok() && pb.ok()) << name;
      PlacementEngine ea(c, **pa), eb(c, **pb);
      for (const PodRequest& r : pods) {
        auto sa = ea.Intern(r), sb = eb.Intern(r);
        ASSERT_TRUE(sa.ok() && sb.ok());
        for (int k = 0; k < 5; ++k) {
          std::vector<NodeId> candidates;
          for (NodeId n = 0; n < 40; ++n)
            if (gen() % 4 != 0) candidates.push_back(n);
          candidates.push_back(static_cast<NodeId>(gen() % 40));  // a repeat
          candidates.push_back(999);                              // not a node
          std::shuffle(candidates.begin(), candidates.end(), gen);
          const Decision want = ea.Choose(*sa, candidates);
          const std::vector<Verdict> verdicts = eb.Evaluate(*sb, candidates);
          const Decision got = eb.ChooseEvaluated(*sb, verdicts);
          SCOPED_TRACE(name + " round " + std::to_string(round) + " pod " +
                       std::to_string(&r - pods.data()));
          EXPECT_EQ(got.feasible, want.feasible);
          EXPECT_EQ(got.rejected, want.rejected);
          EXPECT_EQ(got.placed(), want.placed());
          if ((*pb)->picks()) {
            // Evaluate drew from random's stream, so the pick differs; it is a feasible node.
            EXPECT_TRUE(!got.placed() ||
                        std::any_of(verdicts.begin(), verdicts.end(), [&](const Verdict& v) {
                          return v.node == got.node && v.rejection == Rejection::kNone;
                        }));
            continue;
          }
          EXPECT_EQ(got.node, want.node);
          EXPECT_TRUE(got.choice.gpus == want.choice.gpus);
          EXPECT_EQ(got.choice.score.value, want.choice.score.value);
          EXPECT_EQ(got.tied, want.tied);
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpushare::placement
