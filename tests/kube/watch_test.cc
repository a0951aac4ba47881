// kube::Client::Watch against the API-server double: event order and versions, the initial
// state, bookmarks, 410 (as an ERROR event and as HTTP 410), timeoutSeconds, selectors,
// broken streams, event size bounds and prompt cancellation.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "kube/client.h"
#include "kube/errors.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/kube/test_util.h"

namespace gpushare::kube {
namespace {

using fakes::FakeApiServer;
using fakes::FakeApiServerOptions;
using fakes::Resource;
using nlohmann::json;
using testing::MakeClient;
using testing::TestPod;
using testing::WaitUntil;

struct Seen {
  std::string type;
  std::string name;
  std::string rv;
};

// The event type as the API server spells it.
std::string_view WatchEventTypeName(WatchEventType t) {
  switch (t) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

// Runs a watch on a thread and records what it sees.
class WatchRunner {
 public:
  WatchRunner(std::shared_ptr<Client> c, WatchOptions o, std::string ns = "default")
      : client_(std::move(c)) {
    thread_ = std::thread([this, o, ns] {
      Status s = client_->Watch(
          kPods, ns, o,
          [this](WatchEvent&& e) {
            std::lock_guard<std::mutex> lock(mu_);
            Seen seen{std::string(WatchEventTypeName(e.type)), "", ""};
            if (e.object.contains("metadata")) {
              seen.name = e.object["metadata"].value("name", "");
              seen.rv = e.object["metadata"].value("resourceVersion", "");
            }
            if (e.type == WatchEventType::kError)
              seen.name = std::to_string(e.object.value("code", 0));
            events_.push_back(seen);
            objects_.push_back(e.object);
            return true;
          },
          &cancel_);
      std::lock_guard<std::mutex> lock(mu_);
      result_ = s;
      done_ = true;
    });
  }
  ~WatchRunner() {
    cancel_.Cancel();
    thread_.join();
  }
  std::vector<Seen> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::vector<json> objects() {
    std::lock_guard<std::mutex> lock(mu_);
    return objects_;
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.size();
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  Status result() {
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }
  void Cancel() { cancel_.Cancel(); }

 private:
  std::shared_ptr<Client> client_;
  Cancellation cancel_;
  std::mutex mu_;
  std::vector<Seen> events_;
  std::vector<json> objects_;
  Status result_;
  bool done_ = false;
  std::thread thread_;
};

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(FakeApiServerOptions{}); }
  void Start(FakeApiServerOptions o) {
    server_ = std::make_unique<FakeApiServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    client_ = MakeClient(server_->url());
  }
  std::unique_ptr<FakeApiServer> server_;
  std::shared_ptr<Client> client_;
};

TEST_F(WatchTest, EventsInOrderFromTheListVersion) {
  server_->Upsert(Resource::kPods, TestPod("before"));
  Result<RawList> list = client_->List(kPods, "default", {});
  ASSERT_TRUE(list.ok());
  WatchOptions o;
  o.resource_version = list->resource_version;
  WatchRunner w(client_, o);
  ASSERT_TRUE(WaitUntil([&] { return server_->open_watches() == 1; }));
  server_->Upsert(Resource::kPods, TestPod("a"));
  ASSERT_TRUE(client_->PatchPodAnnotations("default", "a", {{"k", "v"}}).ok());
  server_->Remove(Resource::kPods, "default", "a");
  server_->Upsert(Resource::kNodes, {{"metadata", {{"name", "n"}}}});  // not a pod: not seen
  server_->Upsert(Resource::kPods, TestPod("b"));
  ASSERT_TRUE(WaitUntil([&] { return w.count() >= 4; }));
  std::vector<Seen> ev = w.events();
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].type + " " + ev[0].name, "ADDED a");
  EXPECT_EQ(ev[1].type + " " + ev[1].name, "MODIFIED a");
  EXPECT_EQ(ev[2].type + " " + ev[2].name, "DELETED a");
  EXPECT_EQ(ev[3].type + " " + ev[3].name, "ADDED b");
  for (size_t i = 1; i < ev.size(); ++i)
    EXPECT_LT(std::stoull(ev[i - 1].rv), std::stoull(ev[i].rv));
  // Events carry kind and apiVersion, unlike list items.
  EXPECT_EQ(w.objects()[0]["kind"], "Pod");
}

TEST_F(WatchTest, NoVersionStartsWithTheCurrentStateAsAdded) {
  server_->Upsert(Resource::kPods, TestPod("x"));
  server_->Upsert(Resource::kPods, TestPod("y"));
  WatchRunner w(client_, WatchOptions{});
  ASSERT_TRUE(WaitUntil([&] { return w.count() >= 2; }));
  std::vector<Seen> ev = w.events();
  EXPECT_EQ(ev[0].type + " " + ev[0].name, "ADDED x");
  EXPECT_EQ(ev[1].type + " " + ev[1].name, "ADDED y");
}

TEST_F(WatchTest, BookmarksCarryTheCurrentVersion) {
  WatchOptions o;
  o.resource_version = std::to_string(server_->resource_version());
  WatchRunner w(client_, o);
  ASSERT_TRUE(WaitUntil([&] { return server_->open_watches() == 1; }));
  server_->Upsert(Resource::kNodes, {{"metadata", {{"name", "n1"}}}});  // bumps the global version
  server_->Upsert(Resource::kNodes, {{"metadata", {{"name", "n2"}}}});
  server_->SendBookmarks();
  ASSERT_TRUE(WaitUntil([&] { return w.count() >= 1; }));
  std::vector<Seen> ev = w.events();
  EXPECT_EQ(ev[0].type, "BOOKMARK");
  EXPECT_EQ(ev[0].rv, std::to_string(server_->resource_version()));
  // The bookmark object is an empty Pod with null fields; it still decodes.
  json b = w.objects()[0];
  EXPECT_TRUE(b["spec"]["containers"].is_null());
  EXPECT_TRUE(DecodePod(b).ok());
}

TEST_F(WatchTest, NoBookmarksUnlessAllowed) {
  WatchOptions o;
  o.allow_bookmarks = false;
  o.resource_version = std::to_string(server_->resource_version());
  WatchRunner w(client_, o);
  ASSERT_TRUE(WaitUntil([&] { return server_->open_watches() == 1; }));
  server_->SendBookmarks();
  server_->Upsert(Resource::kPods, TestPod("after"));
  ASSERT_TRUE(WaitUntil([&] { return w.count() >= 1; }));
  EXPECT_EQ(w.events()[0].type, "ADDED");  // the bookmark was never sent
  EXPECT_EQ(w.count(), 1u);
}

TEST_F(WatchTest, PeriodicBookmarks) {
  FakeApiServerOptions so;
  so.bookmark_interval = std::chrono::milliseconds(50);
  Start(so);
  WatchOptions o;
  o.resource_version = "0";
  WatchRunner w(client_, o);
  ASSERT_TRUE(WaitUntil([&] { return w.count() >= 2; }));
  for (const Seen& s : w.events()) EXPECT_EQ(s.type, "BOOKMARK");
}

TEST_F(WatchTest, TooOldVersionIsAnErrorEventWith410) {
  FakeApiServerOptions so;
  so.history_limit = 2;
  Start(so);
  for (int i = 0; i < 5; ++i) server_->Upsert(Resource::kPods, TestPod("p" + std::to_string(i)));
  WatchOptions o;
  o.resource_version = "1";
  WatchRunner w(client_, o);
  ASSERT_TRUE(WaitUntil([&] { return w.done(); }));
  EXPECT_TRUE(w.result().ok()) << w.result().ToString();  // HTTP 200, then the ERROR event
  std::vector<Seen> ev = w.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, "ERROR");
  EXPECT_EQ(ev[0].name, "410");
  json st = w.objects()[0];
  EXPECT_EQ(st["reason"], "Expired");
  EXPECT_NE(st["message"].get<std::string>().find("too old resource version: 1"),
            std::string::npos);
  // Within the window it works.
  // Within the window (the last two events) it works.
  WatchOptions ok;
  ok.resource_version = std::to_string(server_->resource_version() - 2);
  WatchRunner w2(client_, ok);
  ASSERT_TRUE(WaitUntil([&] { return w2.count() >= 2; }));
  EXPECT_EQ(w2.events()[0].name, "p3");
  EXPECT_EQ(w2.events()[1].name, "p4");
  WatchOptions just_out;
  just_out.resource_version = std::to_string(server_->resource_version() - 3);
  WatchRunner w3(client_, just_out);
  ASSERT_TRUE(WaitUntil([&] { return w3.done(); }));
  ASSERT_EQ(w3.count(), 1u);
  EXPECT_EQ(w3.events()[0].type, "ERROR");
}

TEST_F(WatchTest, Http410IsExpired) {
  fakes::Fault f;
  f.http_code = 410;
  f.reason = "Gone";
  f.watch = 1;
  server_->InjectFault(f);
  Status s = client_->Watch(kPods, "", WatchOptions{}, [](WatchEvent&&) { return true; });
  EXPECT_TRUE(IsExpired(s)) << s.ToString();
  EXPECT_NE(s.message().find("watch pods"), std::string::npos);
}

TEST_F(WatchTest, StreamEndsAfterTimeoutSeconds) {
  WatchOptions o;
  o.timeout_seconds = 1;
  o.resource_version = "0";
  Status s = client_->Watch(kPods, "", o, [](WatchEvent&&) { return true; });
  EXPECT_TRUE(s.ok()) << s.ToString();
  // The server's handler thread drops its count after the client has seen the end of the stream.
  EXPECT_TRUE(WaitUntil([&] { return server_->open_watches() == 0; }));
}

TEST_F(WatchTest, HandlerCanEndTheWatch) {
  server_->Upsert(Resource::kPods, TestPod("a"));
  server_->Upsert(Resource::kPods, TestPod("b"));
  int n = 0;
  Status s = client_->Watch(kPods, "", WatchOptions{}, [&](WatchEvent&&) { return ++n < 1; });
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(n, 1);
}

TEST_F(WatchTest, SelectorsTurnNonMatchingChangesIntoDeleted) {
  server_->Upsert(Resource::kPods, TestPod("p", "default", "", {{"app", "gpu"}}));
  WatchOptions o;
  o.label_selector = "app=gpu";
  o.resource_version = std::to_string(server_->resource_version());
  WatchRunner w(client_, o);
  ASSERT_TRUE(WaitUntil([&] { return server_->open_watches() == 1; }));
  json moved = *server_->Get(Resource::kPods, "default", "p");
  std::string old_rv = moved["metadata"]["resourceVersion"];
  moved["metadata"]["labels"]["app"] = "cpu";
  server_->Upsert(Resource::kPods, moved);  // stops matching: DELETED
  moved["metadata"]["labels"]["app"] = "gpu";
  server_->Upsert(Resource::kPods, moved);  // matches again: ADDED
  server_->Upsert(Resource::kPods,
                  TestPod("other", "default", "", {{"app", "cpu"}}));  // never matches
  ASSERT_TRUE(WaitUntil([&] { return w.count() >= 2; }));
  std::vector<Seen> ev = w.events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].type, "DELETED");
  EXPECT_EQ(ev[1].type, "ADDED");
  // The DELETED event carries the previous content at the new version.
  json gone = w.objects()[0];
  EXPECT_EQ(gone["metadata"]["labels"]["app"], "gpu");
  EXPECT_NE(gone["metadata"]["resourceVersion"], old_rv);

  // Field selector on spec.nodeName: binding a pod makes it appear.
  WatchOptions fo;
  fo.field_selector = "spec.nodeName=node-a";
  fo.resource_version = std::to_string(server_->resource_version());
  WatchRunner fw(client_, fo);
  ASSERT_TRUE(WaitUntil([&] { return server_->open_watches() == 2; }));
  ASSERT_TRUE(client_->Bind({"other", "default", "", "node-a", {}}).ok());
  ASSERT_TRUE(WaitUntil([&] { return fw.count() >= 1; }));
  EXPECT_EQ(fw.events()[0].type + " " + fw.events()[0].name, "ADDED other");
}

TEST_F(WatchTest, DroppedStreamIsAnError) {
  WatchRunner w(client_, WatchOptions{.resource_version = "0"});
  ASSERT_TRUE(WaitUntil([&] { return server_->open_watches() == 1; }));
  server_->CloseWatches(FakeApiServer::CloseMode::kDrop);
  ASSERT_TRUE(WaitUntil([&] { return w.done(); }));
  EXPECT_EQ(w.result().code(), StatusCode::kUnavailable) << w.result().ToString();
}

TEST_F(WatchTest, ExpiredByTheServerMidStream) {
  WatchRunner w(client_, WatchOptions{.resource_version = "0"});
  ASSERT_TRUE(WaitUntil([&] { return server_->open_watches() == 1; }));
  server_->CloseWatches(FakeApiServer::CloseMode::kGone);
  ASSERT_TRUE(WaitUntil([&] { return w.done(); }));
  EXPECT_TRUE(w.result().ok());
  ASSERT_EQ(w.count(), 1u);
  EXPECT_EQ(w.events()[0].type + " " + w.events()[0].name, "ERROR 410");
}

TEST_F(WatchTest, OversizedEventIsRejected) {
  ClientOptions co;
  co.max_watch_event_bytes = 4096;
  auto c = MakeClient(server_->url(), co);
  json big = TestPod("big");
  big["metadata"]["annotations"]["blob"] = std::string(10000, 'x');
  server_->Upsert(Resource::kPods, big);
  WatchOptions o;
  o.timeout_seconds = 5;  // without the bound the event would be delivered and the watch run on
  Status s = c->Watch(kPods, "", o, [](WatchEvent&&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
}

TEST_F(WatchTest, CancelReturnsPromptlyWhileBlocked) {
  WatchOptions o;
  o.timeout_seconds = 600;
  o.resource_version = "0";
  o.allow_bookmarks = false;
  WatchRunner w(client_, o);
  ASSERT_TRUE(WaitUntil([&] { return server_->open_watches() == 1; }));
  auto start = std::chrono::steady_clock::now();
  w.Cancel();
  ASSERT_TRUE(WaitUntil([&] { return w.done(); }, std::chrono::milliseconds(10000)));
  // Generous: a blocked watch would otherwise run for 10 minutes.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(w.result().code(), StatusCode::kUnavailable);
  EXPECT_NE(w.result().message().find("cancelled"), std::string::npos);
}

}  // namespace
}  // namespace gpushare::kube
