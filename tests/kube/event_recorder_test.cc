// EventRecorder against the API-server double: created Events, repeats folded into one object
// (count), node events, a full queue, an Event deleted meanwhile, and client-go's correlator:
// similar events aggregated, the per-object spam filter (with a fake clock).
#include "kube/event_recorder.h"

#include <gtest/gtest.h>

#include <functional>

#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/kube/test_util.h"

namespace gpushare::kube {
namespace {

using fakes::FakeApiServer;
using fakes::Resource;
using nlohmann::json;
using testing::MakeClient;

Pod APod() {
  Pod p;
  p.metadata.name = "hello-1";
  p.metadata.namespace_ = "serving";
  p.metadata.uid = "uid-1";
  p.metadata.resource_version = "42";
  return p;
}

class EventRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    client_ = MakeClient(server_.url());
  }
  EventRecorderOptions Options() {
    EventRecorderOptions o;
    o.component = "gpushare-node";
    o.host = "gpu-node-1";
    return o;
  }
  FakeApiServer server_;
  std::shared_ptr<Client> client_;
};

TEST_F(EventRecorderTest, CreatesAnEventAboutThePod) {
  EventRecorder rec(client_, Options());
  rec.RecordPod(APod(), "Warning", "FailedAllocate", "units span GPUs 0 and 1");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  std::vector<json> events = server_.List(Resource::kEvents);
  ASSERT_EQ(events.size(), 1u);
  const json& e = events[0];
  EXPECT_EQ(e["metadata"]["namespace"], "serving");
  EXPECT_EQ(e["metadata"]["name"].get<std::string>().rfind("hello-1.", 0), 0u);
  EXPECT_EQ(e["involvedObject"]["kind"], "Pod");
  EXPECT_EQ(e["involvedObject"]["name"], "hello-1");
  EXPECT_EQ(e["involvedObject"]["uid"], "uid-1");
  EXPECT_EQ(e["reason"], "FailedAllocate");
  EXPECT_EQ(e["message"], "units span GPUs 0 and 1");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["source"]["component"], "gpushare-node");
  EXPECT_EQ(e["source"]["host"], "gpu-node-1");
  EXPECT_EQ(e["count"], 1);
  EXPECT_FALSE(e["firstTimestamp"].get<std::string>().empty());
  EXPECT_EQ(rec.stats().created, 1u);
}

TEST_F(EventRecorderTest, RepeatsIncrementTheCount) {
  EventRecorder rec(client_, Options());
  for (int i = 0; i < 3; ++i) rec.RecordPod(APod(), "Warning", "FailedAllocate", "same message");
  rec.RecordPod(APod(), "Warning", "FailedAllocate", "another message");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  std::vector<json> events = server_.List(Resource::kEvents);
  ASSERT_EQ(events.size(), 2u);
  int total = 0;
  for (const json& e : events) {
    if (e["message"] == "same message") {
      EXPECT_EQ(e["count"], 3);
    }
    total += e["count"].get<int>();
  }
  EXPECT_EQ(total, 4);
  EXPECT_EQ(rec.stats().created, 2u);
  EXPECT_EQ(rec.stats().updated, 2u);
  EXPECT_EQ(server_.CountRequests("PATCH", "/events/"), 2u);
}

TEST_F(EventRecorderTest, NodeEventsGoToTheDefaultNamespace) {
  EventRecorder rec(client_, Options());
  Node n;
  n.metadata.name = "gpu-node-1";
  rec.RecordNode(n, "Warning", "GPUUnhealthy", "GPU 3 (GPU-abc) has XID 79");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  std::vector<json> events = server_.List(Resource::kEvents);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["metadata"]["namespace"], "default");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "Node");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], "gpu-node-1");
  EXPECT_FALSE(events[0]["involvedObject"].contains("namespace"));
}

TEST_F(EventRecorderTest, RecreatesAnEventThatWasDeleted) {
  EventRecorder rec(client_, Options());
  rec.RecordPod(APod(), "Normal", "Assigned", "GPU 2");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  std::vector<json> events = server_.List(Resource::kEvents);
  ASSERT_EQ(events.size(), 1u);
  server_.Remove(Resource::kEvents, "serving", events[0]["metadata"]["name"].get<std::string>());
  rec.RecordPod(APod(), "Normal", "Assigned", "GPU 2");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  EXPECT_EQ(server_.List(Resource::kEvents).size(), 1u);
  EXPECT_EQ(rec.stats().created, 2u);
  EXPECT_EQ(rec.stats().failed, 0u);
}

TEST_F(EventRecorderTest, NeverBlocksAndDropsWhenTheQueueIsFull) {
  fakes::Fault slow;
  slow.kind = fakes::Fault::Kind::kDelay;
  slow.delay = std::chrono::milliseconds(300);
  slow.method = "POST";
  server_.InjectFault(slow);
  EventRecorderOptions o = Options();
  o.queue_limit = 1;
  // Only the queue limits here (the spam filter and aggregation have tests of their own).
  o.spam_burst = 1000;
  o.aggregate_max_events = 1000;
  EventRecorder rec(client_, o);
  for (int i = 0; i < 100; ++i) rec.RecordPod(APod(), "Warning", "R", "m" + std::to_string(i));
  EXPECT_GE(rec.stats().dropped, 98u);
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  EventRecorderStats s = rec.stats();
  EXPECT_EQ(s.created + s.dropped, 100u);
}

TEST_F(EventRecorderTest, FailuresAreCounted) {
  fakes::Fault down;
  down.count = 1;
  server_.InjectFault(down);
  EventRecorder rec(client_, Options());
  rec.RecordPod(APod(), "Warning", "R", "m");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  EXPECT_EQ(rec.stats().failed, 1u);
  EXPECT_EQ(server_.List(Resource::kEvents).size(), 0u);
}

// The wall time the tests start at (hours(490000) after the epoch, as before).
constexpr int64_t kStartUnixNs = int64_t{490000} * 3600 * 1'000'000'000;

TEST_F(EventRecorderTest, SimilarEventsAreAggregatedIntoOne) {
  auto clock = std::make_shared<SimulatedClock>(1000, kStartUnixNs);
  EventRecorderOptions o = Options();
  o.clock = clock;
  EventRecorder rec(client_, o);
  // 15 messages that differ (as a filter's free memory changes): the first 9 are Events of
  // their own, the 10th and later fold into one "(combined from similar events)" Event.
  for (int i = 0; i < 15; ++i)
    rec.RecordPod(APod(), "Warning", "GpuMemoryInsufficient",
                  "node-1: " + std::to_string(i) + " GiB free");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  std::vector<json> events = server_.List(Resource::kEvents);
  ASSERT_EQ(events.size(), 10u);
  int combined = 0;
  for (const json& e : events) {
    const std::string m = e["message"];
    if (m.rfind("(combined from similar events): ", 0) != 0) {
      EXPECT_EQ(e["count"], 1) << m;
      continue;
    }
    ++combined;
    EXPECT_EQ(e["count"], 6);                                             // 10th to 15th
    EXPECT_EQ(m, "(combined from similar events): node-1: 14 GiB free");  // the latest
  }
  EXPECT_EQ(combined, 1);
  EXPECT_EQ(rec.stats().created, 10u);
  EXPECT_EQ(rec.stats().updated, 5u);
  // Another reason is not similar; and after the window the count starts again.
  rec.RecordPod(APod(), "Warning", "BindConflict", "node-1: 3 GiB free");
  clock->Advance(11 * 60 * 1000);
  rec.RecordPod(APod(), "Warning", "GpuMemoryInsufficient", "node-1: 99 GiB free");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  EXPECT_EQ(server_.List(Resource::kEvents).size(), 12u);
}

TEST_F(EventRecorderTest, SpamFilterBoundsTheRatePerObject) {
  auto clock = std::make_shared<SimulatedClock>(1000, kStartUnixNs);
  EventRecorderOptions o = Options();
  o.clock = clock;
  EventRecorder rec(client_, o);
  // The same event 40 times: a burst of 25 gets through (1 Event, count 25), the rest is
  // filtered, creations and count updates alike.
  for (int i = 0; i < 40; ++i) rec.RecordPod(APod(), "Warning", "BindApiError", "same");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  std::vector<json> events = server_.List(Resource::kEvents);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 25);
  EXPECT_EQ(rec.stats().filtered, 15u);
  // Another object has its own budget.
  Pod other = APod();
  other.metadata.name = "hello-2";
  other.metadata.uid = "uid-2";
  rec.RecordPod(other, "Warning", "BindApiError", "same");
  // One token comes back every 5 minutes.
  clock->Advance(5 * 60 * 1000);
  rec.RecordPod(APod(), "Warning", "BindApiError", "same");
  rec.RecordPod(APod(), "Warning", "BindApiError", "same");
  ASSERT_TRUE(rec.Flush(std::chrono::seconds(20)));
  EXPECT_EQ(rec.stats().filtered, 16u);
  events = server_.List(Resource::kEvents);
  ASSERT_EQ(events.size(), 2u);
  for (const json& e : events)
    EXPECT_EQ(e["count"], e["involvedObject"]["name"] == "hello-1" ? 26 : 1) << e.dump();
  // Counts were PATCHed onto the one Event, as client-go does.
  EXPECT_EQ(server_.CountRequests("PATCH", "/events/"), 25u);
}

}  // namespace
}  // namespace gpushare::kube
