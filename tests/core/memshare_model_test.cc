// The memory-share protocol's promise, checked on its model (core/memshare_model.h): no pod is
// ever refused at admission because of gpushare's own bookkeeping, for every order of binds,
// informer deliveries, admissions, Lists, confirmations and restarts.
//   - Exhaustive: every interleaving of small cases (a depth-first search over states; equal
//     states are explored once).
//   - Random: long random interleavings of larger cases.
//   - Not vacuous: the scheduler's count before issue 10's fix makes the same search find the
//     over-booking, with the events that lead to it.
#include "core/memshare_model.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <unordered_set>

namespace gpushare::memshare::model {
namespace {

struct Search {
  uint64_t states = 0;
  uint64_t transitions = 0;
  uint64_t terminal = 0;
  int max_admitted = 0;
  std::string violation;           // empty: none found
  std::vector<std::string> trace;  // the events that led to it
};

uint64_t Fnv(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

struct KeyHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& k) const {
    return k.first ^ (k.second * 31);
  }
};

// Depth-first over every reachable state; stops at the first violation.
class Explorer {
 public:
  explicit Explorer(uint64_t max_states) : max_states_(max_states) {}

  Search Run(const Config& c) {
    out_ = {};
    seen_.clear();
    std::vector<std::string> path;
    Visit(Model(c), &path);
    return out_;
  }

 private:
  void Visit(const Model& m, std::vector<std::string>* path) {
    if (!out_.violation.empty() || out_.states >= max_states_) return;
    const std::string key = m.Key();
    if (!seen_.insert({Fnv(key, 0), Fnv(key, 0x9e3779b97f4a7c15ull)}).second) return;
    ++out_.states;
    const std::vector<Event> events = m.Enabled();
    if (events.empty()) {
      ++out_.terminal;
      out_.max_admitted = std::max(out_.max_admitted, m.admitted());
      return;
    }
    for (const Event& e : events) {
      Model next = m;
      ++out_.transitions;
      path->push_back(e.Text());
      if (std::optional<std::string> v = next.Apply(e)) {
        out_.violation = *v;
        out_.trace = *path;
        return;
      }
      Visit(next, path);
      path->pop_back();
      if (!out_.violation.empty()) return;
    }
  }

  uint64_t max_states_;
  Search out_;
  std::unordered_set<std::pair<uint64_t, uint64_t>, KeyHash> seen_;
};

std::string Trace(const Search& s) {
  std::string out;
  for (const std::string& e : s.trace) out += "  " + e + "\n";
  return out;
}

void Report(const char* name, const Search& s) {
  std::cout << "[ model    ] " << name << ": " << s.states << " states, " << s.transitions
            << " transitions, " << s.terminal << " final states, up to " << s.max_admitted
            << " pods admitted\n";
}

constexpr uint64_t kMaxStates = 1'000'000;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// The larger exhaustive searches take tens of seconds (minutes under the sanitizers): they run
// in the normal build, and all of them with GPUSHARE_MODEL_LONG=1 (docs/reliability.md).
bool Long() {
  return std::getenv("GPUSHARE_MODEL_LONG") != nullptr;
}
#define SKIP_UNLESS(cond, why) \
  if (!(cond)) GTEST_SKIP() << "SKIPPED: " << why << " (set GPUSHARE_MODEL_LONG=1 to run it)"

// The case of issue 10 in miniature: two GPUs with room for one pod each and some slack, three
// identical pods. Binds overlap, kubelet admits in any order, a swap happens, and a third bind
// decided in the window must not find room.
TEST(MemshareModel, IdenticalPodsEveryInterleaving) {
  Config c;
  c.gpu_units = {3, 3};
  c.pods = {{{2}, {}}, {{2}, {}}, {{2}, {}}};
  Search s = Explorer(kMaxStates).Run(c);
  Report("3 pods of 2 on 3+3", s);
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
  EXPECT_LT(s.states, kMaxStates) << "the search was cut short";
  EXPECT_EQ(s.max_admitted, 2);
}

TEST(MemshareModel, TheCountBeforeTheFixOverBooks) {
  Config c;
  c.gpu_units = {3, 3};
  c.pods = {{{2}, {}}, {{2}, {}}, {{2}, {}}};
  c.count_current_only = true;
  Search s = Explorer(kMaxStates).Run(c);
  ASSERT_FALSE(s.violation.empty()) << "the old count should over-book";
  std::cout << "[ model    ] before the fix: " << s.violation << "\n" << Trace(s);
}

Config Identical() {
  Config c;
  c.gpu_units = {3, 3};
  c.pods = {{{2}, {}}, {{2}, {}}, {{2}, {}}};
  return c;
}

TEST(MemshareModel, IdenticalPodsWithASchedulerRestart) {
  SKIP_UNLESS(!kSanitized || Long(), "86,000 states: too slow under the sanitizers");
  Config c = Identical();
  c.scheduler_restarts = 1;
  Search s = Explorer(kMaxStates).Run(c);
  Report("3 pods of 2 on 3+3, scheduler restarted once", s);
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
  EXPECT_LT(s.states, kMaxStates) << "the search was cut short";
}

TEST(MemshareModel, IdenticalPodsWithAnAgentRestart) {
  Config c = Identical();
  c.agent_restarts = 1;
  Search s = Explorer(kMaxStates).Run(c);
  Report("3 pods of 2 on 3+3, agent restarted once", s);
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
  EXPECT_LT(s.states, kMaxStates) << "the search was cut short";
}

TEST(MemshareModel, IdenticalPodsWithADeletion) {
  SKIP_UNLESS(Long(), "363,000 states, about 25 s; the random walks below delete pods too");
  Config c = Identical();
  c.deletions = 1;
  Search s = Explorer(kMaxStates).Run(c);
  Report("3 pods of 2 on 3+3, one deleted", s);
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
  EXPECT_LT(s.states, kMaxStates) << "the search was cut short";
}

// Compute shares ride on the slot keys: identical pods swap GPUs with identical shares, and a
// pod of the same size with another share waits until the others are admitted, so every
// container's Allocate gives it its own share and no GPU holds more than 100 %.
TEST(MemshareModel, ComputeSharesEveryInterleaving) {
  SKIP_UNLESS(!kSanitized || Long(), "30,000 states: 40 s under the sanitizers");
  Config c;
  c.gpu_units = {3, 3};
  c.pods = {{{1}, {}, {60}}, {{1}, {}, {60}}, {{1}, {}, {30}}};
  Search s = Explorer(kMaxStates).Run(c);
  Report("pods of 1 at 60%, 60%, 30% on 3+3", s);
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
  EXPECT_LT(s.states, kMaxStates) << "the search was cut short";
  EXPECT_EQ(s.max_admitted, 3);
}

// Not vacuous: with the clash check blind to compute shares, a container gets another's share.
TEST(MemshareModel, AClashCheckBlindToComputeSharesGivesTheWrongShare) {
  Config c;
  c.gpu_units = {3, 3};
  c.pods = {{{1}, {}, {60}}, {{1}, {}, {30}}};
  c.core_blind_conflicts = true;
  Search s = Explorer(kMaxStates).Run(c);
  Report("core-blind: pods of 1 at 60%, 30% on 3+3", s);
  ASSERT_FALSE(s.violation.empty()) << "the checker found nothing";
  EXPECT_NE(s.violation.find("% compute, it asked"), std::string::npos) << s.violation;
  std::cout << "[ model    ] found: " << s.violation << "\n" << Trace(s);
}

TEST(MemshareModel, MixedSizesEveryInterleaving) {
  SKIP_UNLESS(Long(), "560,000 states, about 45 s; the random walks below mix sizes too");
  Config c;
  c.gpu_units = {3, 2};
  c.pods = {{{1}, {}}, {{2}, {}}, {{1}, {}}};
  Search s = Explorer(kMaxStates).Run(c);
  Report("pods of 1,2,1 on 3+2", s);
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
  EXPECT_LT(s.states, kMaxStates) << "the search was cut short";
}

TEST(MemshareModel, InitContainersAndTwoContainerPods) {
  SKIP_UNLESS(!kSanitized || Long(), "75,000 states: too slow under the sanitizers");
  Config c;
  c.gpu_units = {3, 3};
  // init 1 then app 2 (kubelet asks 1 first), a plain 1, and a pod of two 1-unit containers.
  c.pods = {{{2}, {1}}, {{1}, {}}, {{1, 1}, {}}};
  Search s = Explorer(kMaxStates).Run(c);
  Report("init 1 + app 2, 1, 1+1 on 3+3", s);
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
  EXPECT_LT(s.states, kMaxStates) << "the search was cut short";
}

// Larger cases by random walks: every enabled event equally likely.
Search RandomWalks(const Config& c, int walks, uint64_t seed) {
  Search out;
  std::mt19937_64 rng(seed);
  for (int w = 0; w < walks && out.violation.empty(); ++w) {
    Model m(c);
    std::vector<std::string> path;
    for (int step = 0; step < 2000; ++step) {
      std::vector<Event> events = m.Enabled();
      if (events.empty()) {
        ++out.terminal;
        out.max_admitted = std::max(out.max_admitted, m.admitted());
        break;
      }
      const Event& e = events[rng() % events.size()];
      path.push_back(e.Text());
      ++out.transitions;
      if (std::optional<std::string> v = m.Apply(e)) {
        out.violation = *v;
        out.trace = path;
        break;
      }
    }
    ++out.states;
  }
  return out;
}

// The random walks' seed: $GPUSHARE_MODEL_SEED added to each test's own.
uint64_t SeedOffset() {
  const char* env = std::getenv("GPUSHARE_MODEL_SEED");
  return env ? std::strtoull(env, nullptr, 10) : 0;
}

// $GPUSHARE_MODEL_WALKS, else 1,000 (100 under the sanitizers).
int Walks() {
  const char* env = std::getenv("GPUSHARE_MODEL_WALKS");
  return env ? std::max(1, std::atoi(env)) : kSanitized ? 100 : 1000;
}

// 9 pods of 3 on 3 GPUs of 7 (2 pods each, 1 unit left over), restarts and a deletion.
Config Burst() {
  Config c;
  c.gpu_units = {7, 7, 7};
  for (int i = 0; i < 9; ++i) c.pods.push_back({{3}, {}});
  c.scheduler_restarts = 2;
  c.agent_restarts = 2;
  c.deletions = 1;
  return c;
}

TEST(MemshareModel, RandomInterleavingsOfABurst) {
  Config c = Burst();
  Search s = RandomWalks(c, Walks(), 1 + SeedOffset());
  std::cout << "[ model    ] 9 pods of 3 on 7+7+7: " << s.states << " walks, " << s.transitions
            << " events, up to " << s.max_admitted << " admitted\n";
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
  EXPECT_EQ(s.max_admitted, 6);
}

// What the release guards and the hold after a start are for: without them, random
// interleavings with deletions and restarts find an over-booking.
TEST(MemshareModel, RandomInterleavingsOfMixedShapes) {
  Config c;
  c.gpu_units = {6, 5, 4};
  c.pods = {{{3}, {}}, {{2}, {}}, {{2}, {1}}, {{1, 2}, {}},
            {{3}, {}}, {{2}, {}}, {{1}, {}},  {{4}, {2}}};
  c.scheduler_restarts = 2;
  c.agent_restarts = 2;
  c.deletions = 2;
  Search s = RandomWalks(c, Walks(), 2 + SeedOffset());
  std::cout << "[ model    ] mixed shapes on 6+5+4: " << s.states << " walks, " << s.transitions
            << " events\n";
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
}

// Compute shares with restarts and deletions, at random.
TEST(MemshareModel, RandomInterleavingsWithComputeShares) {
  Config c;
  c.gpu_units = {6, 5, 4};
  c.pods = {{{3}, {}, {50}}, {{2}, {}, {40}}, {{2}, {}, {40}}, {{1, 2}, {}, {30, 20}},
            {{3}, {}, {50}}, {{1}, {}, {}},   {{4}, {}, {70}}};
  c.scheduler_restarts = 2;
  c.agent_restarts = 2;
  c.deletions = 2;
  Search s = RandomWalks(c, Walks(), 3 + SeedOffset());
  std::cout << "[ model    ] compute shares on 6+5+4: " << s.states << " walks, " << s.transitions
            << " events\n";
  EXPECT_TRUE(s.violation.empty()) << s.violation << "\n" << Trace(s);
}

}  // namespace
}  // namespace gpushare::memshare::model
