// Token bucket and backoff, on a fake clock: counts, never wall time.
#include "kube/rate_limiter.h"

#include <gtest/gtest.h>

namespace gpushare::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST(TokenBucketTest, BurstThenQps) {
  auto clock = std::make_shared<SimulatedClock>();
  TokenBucket b(/*qps=*/2, /*burst=*/3, clock);
  EXPECT_EQ(b.Reserve(), nanoseconds(0));
  EXPECT_EQ(b.Reserve(), nanoseconds(0));
  EXPECT_EQ(b.Reserve(), nanoseconds(0));
  EXPECT_EQ(b.Reserve(), milliseconds(500));   // 4th waits half a token period
  EXPECT_EQ(b.Reserve(), milliseconds(1000));  // reservations queue up
  EXPECT_FALSE(b.TryAcquire());
  clock->Advance(1000);  // +2 tokens pays the two outstanding ones
  EXPECT_FALSE(b.TryAcquire());
  EXPECT_EQ(b.Reserve(), milliseconds(500));
  clock->Advance(60'000);  // refills, but never above the burst
  int granted = 0;
  while (b.TryAcquire()) ++granted;
  EXPECT_EQ(granted, 3);
}

TEST(TokenBucketTest, CountsGrantsOverSimulatedTime) {
  auto clock = std::make_shared<SimulatedClock>();
  TokenBucket b(/*qps=*/10, /*burst=*/5, clock);
  int granted = 0;
  for (int step = 0; step < 100; ++step) {  // 10 simulated seconds, 100 ms apart
    while (b.TryAcquire()) ++granted;
    clock->Advance(100);
  }
  EXPECT_EQ(granted, 5 + 99);  // the burst, then one per 100 ms
}

TEST(TokenBucketTest, Unlimited) {
  TokenBucket b(0, 1);
  EXPECT_TRUE(b.unlimited());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(b.Reserve(), nanoseconds(0));
  TokenBucket one(5, 0);  // burst < 1 is 1
  EXPECT_TRUE(one.TryAcquire());
  EXPECT_FALSE(one.TryAcquire());
}

TEST(BackoffTest, ExponentialCappedAndReset) {
  BackoffOptions o;
  o.initial = milliseconds(10);
  o.max = milliseconds(100);
  o.factor = 2;
  o.jitter = 0;
  Backoff b(o, 1);
  std::vector<int64_t> got;
  for (int i = 0; i < 6; ++i) got.push_back(b.Next().count());
  EXPECT_EQ(got, (std::vector<int64_t>{10, 20, 40, 80, 100, 100}));
  EXPECT_EQ(b.attempts(), 6);
  b.Reset();
  EXPECT_EQ(b.Next().count(), 10);
}

TEST(BackoffTest, JitterStaysInRangeAndIsSeeded) {
  BackoffOptions o;
  o.initial = milliseconds(100);
  o.max = milliseconds(1000);
  o.jitter = 0.5;
  Backoff a(o, 42), b(o, 42), c(o, 43);
  bool differs = false;
  double base = 100;
  for (int i = 0; i < 8; ++i) {
    int64_t da = a.Next().count(), db = b.Next().count(), dc = c.Next().count();
    EXPECT_EQ(da, db);  // same seed, same delays
    differs |= da != dc;
    EXPECT_GE(da, static_cast<int64_t>(base));
    EXPECT_LE(da, static_cast<int64_t>(base * 1.5));
    base = std::min(base * 2, 1000.0);
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace gpushare::kube
