// base/signals.h: a blocked signal waits on the signalfd, in order, and nothing is read twice.
#include "base/signals.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace gpushare {
namespace {

TEST(Signals, BlockedSignalsAreReadFromTheDescriptor) {
  const UniqueFd fd = BlockSignals({SIGUSR1, SIGUSR2});
  ASSERT_TRUE(fd);
  EXPECT_EQ(ReadSignal(fd), 0) << "none pending";
  EXPECT_EQ(WaitSignal(fd, 0), 0) << "a zero timeout does not wait";
  ASSERT_EQ(::raise(SIGUSR2), 0);  // blocked: pending, not delivered (it would end the test)
  EXPECT_EQ(WaitSignal(fd, 1000), SIGUSR2);
  EXPECT_EQ(ReadSignal(fd), 0) << "read once";
  ASSERT_EQ(::raise(SIGUSR1), 0);
  EXPECT_EQ(ReadSignal(fd), SIGUSR1);
  EXPECT_EQ(ReadSignal(UniqueFd()), 0);
  EXPECT_EQ(WaitSignal(UniqueFd(), 0), 0);
}

}  // namespace
}  // namespace gpushare
