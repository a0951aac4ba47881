// core/memshare_timing.h: memory mode's worker schedule, driven by a fake time in milliseconds.
#include "core/memshare_timing.h"

#include <gtest/gtest.h>

namespace gpushare::memshare {
namespace {

constexpr int64_t kT0 = 1000;

ScheduleTiming Timing() {
  return ScheduleTiming{10000, 50, 50, 100, 200};
}

// Runs the periodic round due at kT0 and reports a clean round at `at`.
WorkerSchedule AfterFirstRound(int64_t at = kT0) {
  WorkerSchedule s(Timing(), kT0);
  EXPECT_EQ(s.Next(kT0), WorkerStep::kReconcile);
  EXPECT_TRUE(s.MayList(at));
  s.Reconciled(false, at);
  return s;
}

TEST(WorkerSchedule, FirstReconcileAtOnceThenEveryInterval) {
  WorkerSchedule s = AfterFirstRound();
  EXPECT_EQ(s.NextWakeMs(), kT0 + 10000);
  EXPECT_EQ(s.Next(kT0 + 9999), WorkerStep::kWait);
  EXPECT_EQ(s.Next(kT0 + 10000), WorkerStep::kReconcile);
}

TEST(WorkerSchedule, AllocateBringsTheRoundForward) {
  WorkerSchedule s = AfterFirstRound();
  s.Allocated(kT0 + 500);
  EXPECT_EQ(s.NextWakeMs(), kT0 + 550);
  s.Allocated(kT0 + 520);  // a later one does not postpone it
  EXPECT_EQ(s.NextWakeMs(), kT0 + 550);
  EXPECT_EQ(s.Next(kT0 + 550), WorkerStep::kReconcile);
}

TEST(WorkerSchedule, ListsArePaced) {
  WorkerSchedule s = AfterFirstRound();
  s.ListWanted(kT0 + 10);
  ASSERT_EQ(s.Next(kT0 + 10), WorkerStep::kReconcile);
  EXPECT_FALSE(s.MayList(kT0 + 10)) << "a List 10 ms after the last";
  EXPECT_EQ(s.NextWakeMs(), kT0 + 50);
  ASSERT_EQ(s.Next(kT0 + 50), WorkerStep::kReconcile);
  EXPECT_TRUE(s.MayList(kT0 + 50));
}

TEST(WorkerSchedule, UnsyncedCacheAndLeftWorkComeBackSoon) {
  WorkerSchedule s(Timing(), kT0);
  ASSERT_EQ(s.Next(kT0), WorkerStep::kReconcile);
  s.NotSynced(kT0);
  EXPECT_EQ(s.NextWakeMs(), kT0 + 100);
  ASSERT_EQ(s.Next(kT0 + 100), WorkerStep::kReconcile);
  ASSERT_TRUE(s.MayList(kT0 + 100));
  s.Reconciled(true, kT0 + 110);
  EXPECT_EQ(s.NextWakeMs(), kT0 + 310);
}

TEST(WorkerSchedule, FailedListsBackOffByKind) {
  WorkerSchedule s(Timing(), kT0);
  int64_t now = kT0;
  std::vector<int64_t> limited, other;
  for (int i = 0; i < 7; ++i) {
    ASSERT_EQ(s.Next(now), WorkerStep::kReconcile);
    ASSERT_TRUE(s.MayList(now));
    s.ListFailed(true, now);
    limited.push_back(s.list_backoff_ms());
    now = s.NextWakeMs();
  }
  EXPECT_EQ(limited, (std::vector<int64_t>{100, 200, 400, 800, 1600, 2000, 2000}));
  ASSERT_EQ(s.Next(now), WorkerStep::kReconcile);
  ASSERT_TRUE(s.MayList(now));
  s.Reconciled(false, now);
  EXPECT_EQ(s.list_backoff_ms(), 0) << "a good List forgets the backoff";
  for (int i = 0; i < 8; ++i) {
    now = s.NextWakeMs();
    ASSERT_EQ(s.Next(now), WorkerStep::kReconcile);
    ASSERT_TRUE(s.MayList(now));
    s.ListFailed(false, now);
    other.push_back(s.list_backoff_ms());
  }
  EXPECT_EQ(other, (std::vector<int64_t>{500, 1000, 2000, 4000, 8000, 16000, 30000, 30000}));
}

TEST(WorkerSchedule, PublishComesFirstAndRetriesWithBackoff) {
  WorkerSchedule s = AfterFirstRound();
  s.PlanChanged(kT0 + 100);
  EXPECT_TRUE(s.publish_due());
  EXPECT_EQ(s.Next(kT0 + 100), WorkerStep::kPublish);
  EXPECT_EQ(s.Next(kT0 + 100), WorkerStep::kReconcile) << "a plan change also reconciles at once";
  s.Published(false, kT0 + 100);
  EXPECT_EQ(s.publish_backoff_ms(), 500);
  EXPECT_EQ(s.Next(kT0 + 599), WorkerStep::kWait);
  EXPECT_EQ(s.NextWakeMs(), kT0 + 600);
  ASSERT_EQ(s.Next(kT0 + 600), WorkerStep::kPublish);
  s.Published(false, kT0 + 600);
  EXPECT_EQ(s.publish_backoff_ms(), 1000);
  ASSERT_EQ(s.Next(kT0 + 1600), WorkerStep::kPublish);
  s.Published(true, kT0 + 1600);
  EXPECT_EQ(s.publish_backoff_ms(), 0);
  EXPECT_FALSE(s.publish_due());
}

TEST(WorkerSchedule, NodeThatDiffersIsPublishedOnce) {
  WorkerSchedule s = AfterFirstRound();
  EXPECT_TRUE(s.NodeDiffers());
  EXPECT_FALSE(s.NodeDiffers()) << "due already";
  EXPECT_EQ(s.Next(kT0 + 1), WorkerStep::kPublish);
  EXPECT_EQ(s.Next(kT0 + 1), WorkerStep::kWait);
}

TEST(WorkerSchedule, PublishBackoffCapsAt30s) {
  WorkerSchedule s(Timing(), kT0);
  s.PlanChanged(kT0);
  int64_t now = kT0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(s.Next(now), WorkerStep::kPublish);
    s.Published(false, now);
    now += s.publish_backoff_ms();
  }
  EXPECT_EQ(s.publish_backoff_ms(), 30000);
}

}  // namespace
}  // namespace gpushare::memshare
