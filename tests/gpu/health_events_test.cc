#include "gpu/health_events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace gpushare {
namespace {

using ::testing::HasSubstr;

const std::string kGpu = "GPU-0a100000-0000-4000-8000-000000000000";
const std::string kMig = "MIG-0c100000-0000-4000-8000-000000000001";

TEST(HealthEventLine, Forms) {
  auto e = ParseHealthEventLine("xid=79 uuid=" + kGpu);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(e->has_value());
  EXPECT_EQ((*e)->kind, HealthEventKind::kXid);
  EXPECT_EQ((*e)->xid, 79u);
  EXPECT_EQ((*e)->uuid, kGpu);

  e = ParseHealthEventLine("  uuid=" + kMig + "   xid=94  # a MIG instance");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->uuid, kMig);
  EXPECT_EQ((*e)->xid, 94u);

  e = ParseHealthEventLine("xid=48");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->uuid, "");

  e = ParseHealthEventLine("lost uuid=" + kGpu);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->kind, HealthEventKind::kDeviceLost);

  for (const char* blank : {"", "   ", "# comment"}) {
    auto b = ParseHealthEventLine(blank);
    ASSERT_TRUE(b.ok());
    EXPECT_FALSE(b->has_value());
  }
}

TEST(HealthEventLine, Malformed) {
  struct Case {
    std::string line, why;
  };
  for (const Case& c : std::vector<Case>{
           {"xid=abc", "xid must be a number"},
           {"uuid=" + kGpu, "needs xid=<n> or lost"},
           {"xid=79 uuid=GPU-12", "uuid must be GPU-<uuid> or MIG-<uuid>"},
           {"xid=79 gpu=0", "unknown key \"gpu\""},
           {"boom", "unknown word \"boom\""},
           {"lost xid=79", "more than one event kind"},
       }) {
    auto e = ParseHealthEventLine(c.line);
    ASSERT_FALSE(e.ok()) << c.line;
    EXPECT_THAT(e.status().message(), HasSubstr(c.why)) << c.line;
  }
}

class EventsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/gpushare_events_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::remove(path_.c_str());
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void Append(const std::string& text) { std::ofstream(path_, std::ios::app) << text; }
  std::string path_;
};

TEST_F(EventsFile, FollowsTheFile) {
  auto clock = std::make_shared<SimulatedClock>(5);
  auto src = MakeEventsFileSource(path_, clock);
  auto p = src->Wait(std::chrono::milliseconds(0));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->events.empty()) << "no file yet";

  Append("xid=79 uuid=" + kGpu + "\n# note\nxid=31 uuid=" + kMig + "\n");
  p = src->Wait(std::chrono::milliseconds(0));
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->events.size(), 2u);
  EXPECT_EQ(p->events[0].xid, 79u);
  EXPECT_EQ(p->events[0].time_ms, 5);
  EXPECT_THAT(p->events[0].detail, HasSubstr(":1"));
  EXPECT_EQ(p->events[1].uuid, kMig);
  EXPECT_THAT(p->events[1].detail, HasSubstr(":3"));

  // A line without its newline waits for the rest.
  clock->Advance(4);
  Append("xid=4");
  p = src->Wait(std::chrono::milliseconds(0));
  EXPECT_TRUE(p->events.empty());
  Append("8\nnonsense\n");
  p = src->Wait(std::chrono::milliseconds(0));
  ASSERT_EQ(p->events.size(), 1u);
  EXPECT_EQ(p->events[0].xid, 48u);
  EXPECT_EQ(p->events[0].time_ms, 9);
  ASSERT_EQ(p->problems.size(), 1u);
  EXPECT_THAT(p->problems[0], HasSubstr(":5: \"nonsense\": unknown word"));
  EXPECT_TRUE(src->Wait(std::chrono::milliseconds(0))->events.empty()) << "each line once";
}

TEST_F(EventsFile, ATruncatedFileIsReadAgainFromTheStart) {
  auto src = MakeEventsFileSource(path_);
  Append("xid=79\nxid=80\n");
  ASSERT_EQ(src->Wait(std::chrono::milliseconds(0))->events.size(), 2u);
  { std::ofstream truncate(path_, std::ios::trunc); }
  Append("lost\n");
  auto p = src->Wait(std::chrono::milliseconds(0));
  ASSERT_EQ(p->events.size(), 1u);
  EXPECT_EQ(p->events[0].kind, HealthEventKind::kDeviceLost);
}

TEST_F(EventsFile, WaitReturnsOnceSomethingArrives) {
  auto src = MakeEventsFileSource(path_);
  Append("xid=79\n");
  // Data is already there: Wait must not sit out its (long) timeout.
  auto p = src->Wait(std::chrono::hours(1));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->events.size(), 1u);
}

}  // namespace
}  // namespace gpushare
