// base/clock.h: the simulated clock wakes waiters when it is advanced, and node/periodic.h
// runs its rounds on it; no test here waits for a timer in real time.
#include "base/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "node/periodic.h"

namespace gpushare::node {
namespace {

using namespace std::chrono_literals;

// Waits (a bounded real time) for another thread to get somewhere.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 5000 && !done(); ++i) std::this_thread::sleep_for(1ms);
  return done();
}

TEST(SimulatedClock, TimeMovesOnlyWhenAdvanced) {
  SimulatedClock c(100);
  EXPECT_EQ(c.NowMs(), 100);
  c.Advance(50);
  EXPECT_EQ(c.NowMs(), 150);
  c.Advance(-5);  // never backwards
  EXPECT_EQ(c.NowMs(), 150);
  EXPECT_EQ(c.PollTimeoutMs(150), 0);
  EXPECT_EQ(c.PollTimeoutMs(151), -1) << "a poll waits for a descriptor (OnAdvance wakes it)";
}

// The monotonic line in ms and ns and the wall time move together on Advance; the wall time can
// be set alone (a clock set back), the monotonic line never goes back.
TEST(SimulatedClock, MonotonicAndWallTimeMoveTogetherUnlessTheWallIsSet) {
  SimulatedClock c(1000, 5'000'000'000);
  EXPECT_EQ(c.NowNs(), 1'000'000'000);
  c.Advance(2);
  c.AdvanceNs(500);
  EXPECT_EQ(c.NowMs(), 1002);
  EXPECT_EQ(c.NowNs(), 1'002'000'500);
  EXPECT_EQ(c.UnixNs(), 5'002'000'500);
  c.SetUnixNs(1);
  EXPECT_EQ(c.UnixNs(), 1);
  EXPECT_EQ(c.NowNs(), 1'002'000'500);
  c.AdvanceNs(-5);
  EXPECT_EQ(c.NowNs(), 1'002'000'500) << "never backwards";
  EXPECT_GT(RealClock()->UnixNs(), int64_t{1'700'000'000} * 1'000'000'000) << "after 2023";
}

TEST(SimulatedClock, AdvancingWakesAWaiterAtItsDeadline) {
  SimulatedClock c(0);
  Mutex mu;
  CondVar cv;
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    MutexLock lock(&mu);
    while (c.NowMs() < 1000) c.WaitUntil(&mu, &cv, 1000);
    done = true;
  });
  c.Advance(999);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(done.load()) << "999 ms of 1000";
  c.Advance(1);
  EXPECT_TRUE(Eventually([&] { return done.load(); }));
  waiter.join();
}

TEST(SimulatedClock, OnAdvanceCallsUntilTheHandleGoes) {
  SimulatedClock c;
  int calls = 0;
  {
    std::shared_ptr<void> h = c.OnAdvance([&] { ++calls; });
    c.Advance(1);
    c.Advance(1);
  }
  c.Advance(1);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(RealClock()->OnAdvance([] {}), nullptr);
}

TEST(RealClock, WaitsAtMostUntilTheDeadline) {
  std::shared_ptr<Clock> c = RealClock();
  Mutex mu;
  CondVar cv;
  MutexLock lock(&mu);
  const int64_t start = c->NowMs();
  c->WaitUntil(&mu, &cv, start + 5);
  EXPECT_GE(c->NowMs(), start);  // returns (at the deadline or spuriously); liveness only
  EXPECT_EQ(c->PollTimeoutMs(start - 1), 0);
}

TEST(PeriodicThread, RoundsRunWhenTheSimulatedTimeComes) {
  auto c = std::make_shared<SimulatedClock>(0);
  std::atomic<int> rounds{0};
  std::atomic<int64_t> last_now{-1};
  {
    PeriodicThread t(
        [&](int64_t now) {
          last_now = now;
          rounds++;
          return now + 1000;
        },
        c);
    ASSERT_TRUE(Eventually([&] { return rounds.load() == 1; }));
    c->Advance(999);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(rounds.load(), 1);
    c->Advance(1);
    ASSERT_TRUE(Eventually([&] { return rounds.load() == 2; }));
    EXPECT_EQ(last_now.load(), 1000);
  }  // stops without the next round's time coming
  EXPECT_EQ(rounds.load(), 2);
}

}  // namespace
}  // namespace gpushare::node
