// Informer<T> against the API-server double: sync and handlers, bookmarks, relist on 410 (as an
// ERROR event and as HTTP 410) with the right handler events, backoff on 500s, selectors,
// undecodable objects, and prompt Stop().
#include "kube/informer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "kube/errors.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/kube/test_util.h"

namespace gpushare::kube {
namespace {

using fakes::FakeApiServer;
using fakes::FakeApiServerOptions;
using fakes::Fault;
using fakes::Resource;
using nlohmann::json;
using testing::MakeClient;
using testing::TestPod;
using testing::WaitUntil;

// Records handler calls as "add a", "update a", "delete a", "synced".
class Recorder {
 public:
  InformerHandlers<Pod> Handlers(PodInformer* inf = nullptr) {
    InformerHandlers<Pod> h;
    h.on_add = [this, inf](const Pod& p) {
      Push("add " + p.metadata.name);
      if (inf != nullptr && !inf->Get(p.Key())) Push("cache-missing " + p.metadata.name);
    };
    h.on_update = [this](const Pod& o, const Pod& n) {
      Push("update " + n.metadata.name +
           (o.metadata.resource_version == n.metadata.resource_version ? " same-rv" : ""));
    };
    h.on_delete = [this](const Pod& p) { Push("delete " + p.metadata.name); };
    h.on_synced = [this] { Push("synced"); };
    return h;
  }
  void Push(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(std::move(s));
  }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    out.swap(log_);
    return out;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_.size();
  }
  bool Has(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::find(log_.begin(), log_.end(), s) != log_.end();
  }

 private:
  std::mutex mu_;
  std::vector<std::string> log_;
};

InformerOptions FastOptions() {
  InformerOptions o;
  o.backoff.initial = std::chrono::milliseconds(2);
  o.backoff.max = std::chrono::milliseconds(20);
  o.backoff.jitter = 0;
  o.watch_timeout_seconds = 30;
  o.seed = 7;
  o.log = [](const std::string&) {};
  return o;
}

std::vector<std::string> Names(const PodInformer& inf) {
  std::vector<std::string> out;
  for (const auto& p : inf.List()) out.push_back(p->metadata.name);
  std::sort(out.begin(), out.end());
  return out;
}

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    ClientOptions co;
    co.qps = 0;
    client_ = MakeClient(server_.url(), co);
  }
  FakeApiServer server_;
  std::shared_ptr<Client> client_;
};

TEST_F(InformerTest, SyncsThenFollowsChanges) {
  server_.Upsert(Resource::kPods, TestPod("a"));
  server_.Upsert(Resource::kPods, TestPod("b"));
  server_.Upsert(Resource::kPods, TestPod("c"));
  PodInformer inf(client_, FastOptions());
  Recorder rec;
  inf.SetHandlers(rec.Handlers(&inf));
  EXPECT_FALSE(inf.HasSynced());
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  std::vector<std::string> first = rec.Take();
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(first.back(), "synced");  // only after every listed object was handed over
  std::sort(first.begin(), first.end() - 1);
  EXPECT_EQ(first, (std::vector<std::string>{"add a", "add b", "add c", "synced"}));
  EXPECT_EQ(inf.size(), 3u);
  ASSERT_NE(inf.Get("default/a"), nullptr);
  EXPECT_EQ(inf.Get("default/a")->spec.containers[0].image, "busybox");
  EXPECT_EQ(inf.Get("a"), nullptr);

  ASSERT_TRUE(WaitUntil([&] { return server_.open_watches() == 1; }));
  server_.Upsert(Resource::kPods, TestPod("d"));
  ASSERT_TRUE(client_->PatchPodAnnotations("default", "a", {{"x", "1"}}).ok());
  ASSERT_TRUE(client_->Bind({"b", "default", "", "node-1", {}}).ok());
  server_.Remove(Resource::kPods, "default", "c");
  ASSERT_TRUE(WaitUntil([&] { return rec.size() >= 4; }));
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add d", "update a", "update b", "delete c"}));
  EXPECT_EQ(Names(inf), (std::vector<std::string>{"a", "b", "d"}));
  EXPECT_EQ(inf.Get("default/a")->metadata.annotations.at("x"), "1");
  EXPECT_EQ(inf.Get("default/b")->spec.node_name, "node-1");
  EXPECT_EQ(inf.stats().resource_version, std::to_string(server_.resource_version()));
  EXPECT_EQ(inf.stats().lists, 1u);
  EXPECT_EQ(inf.Start().code(), StatusCode::kFailedPrecondition);
}

TEST_F(InformerTest, BookmarksKeepTheVersionFreshSoNoRelistIsNeeded) {
  server_.Upsert(Resource::kPods, TestPod("a"));
  PodInformer inf(client_, FastOptions());
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  ASSERT_TRUE(WaitUntil([&] { return server_.open_watches() == 1; }));
  // Other resources move the global version on; pods do not change.
  for (int i = 0; i < 5; ++i)
    server_.Upsert(Resource::kNodes, {{"metadata", {{"name", "n" + std::to_string(i)}}}});
  server_.SendBookmarks();
  std::string now = std::to_string(server_.resource_version());
  ASSERT_TRUE(WaitUntil([&] { return inf.stats().resource_version == now; }));
  EXPECT_EQ(inf.stats().bookmarks, 1u);
  // History is compacted and the watch ends: the bookmark's version is still servable.
  server_.Compact();
  server_.CloseWatches(FakeApiServer::CloseMode::kClean);
  ASSERT_TRUE(WaitUntil([&] { return inf.stats().watches >= 2 && server_.open_watches() == 1; }));
  server_.Upsert(Resource::kPods, TestPod("b"));
  ASSERT_TRUE(WaitUntil([&] { return inf.size() == 2; }));
  EXPECT_EQ(inf.stats().relists_after_expired, 0u);
  EXPECT_EQ(inf.stats().lists, 1u);
}

// Takes the informer's watch away (every new watch fails with 500) while `change` runs; the
// informer can then only learn about the changes by relisting.
void WhileDisconnected(FakeApiServer& server, const std::function<void()>& change) {
  Fault blocked;
  blocked.watch = 1;
  blocked.count = 1000000;
  server.SetFaults({blocked});
  server.CloseWatches(FakeApiServer::CloseMode::kDrop);
  ASSERT_TRUE(WaitUntil([&] { return server.open_watches() == 0; }));
  change();
}

TEST_F(InformerTest, RelistsAfterA410ErrorEventAndDiffsTheCache) {
  server_.Upsert(Resource::kPods, TestPod("keep"));
  server_.Upsert(Resource::kPods, TestPod("change"));
  server_.Upsert(Resource::kPods, TestPod("remove"));
  PodInformer inf(client_, FastOptions());
  Recorder rec;
  inf.SetHandlers(rec.Handlers(&inf));
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  ASSERT_TRUE(WaitUntil([&] { return server_.open_watches() == 1; }));
  rec.Take();
  WhileDisconnected(server_, [&] {
    ASSERT_TRUE(client_->PatchPodAnnotations("default", "change", {{"v", "2"}}).ok());
    server_.Remove(Resource::kPods, "default", "remove");
    server_.Upsert(Resource::kPods, TestPod("new"));
    server_.Compact();  // the informer's version is now older than the history
  });
  EXPECT_EQ(inf.size(), 3u);  // nothing seen yet
  uint64_t lists_before = inf.stats().lists;
  server_.ClearFaults();  // the next watch gets HTTP 200 + ERROR 410 "too old resource version"
  ASSERT_TRUE(WaitUntil([&] { return inf.stats().lists == lists_before + 1 && rec.size() >= 3; }));
  std::vector<std::string> ev = rec.Take();
  std::sort(ev.begin(), ev.end());
  EXPECT_EQ(ev, (std::vector<std::string>{"add new", "delete remove", "update change"}));
  EXPECT_EQ(Names(inf), (std::vector<std::string>{"change", "keep", "new"}));
  EXPECT_EQ(inf.Get("default/change")->metadata.annotations.at("v"), "2");
  InformerStats s = inf.stats();
  EXPECT_EQ(s.relists_after_expired, 1u);
  EXPECT_NE(s.last_error.find("410"), std::string::npos) << s.last_error;
  // And it is watching again afterwards.
  ASSERT_TRUE(WaitUntil([&] { return server_.open_watches() == 1; }));
  server_.Upsert(Resource::kPods, TestPod("later"));
  ASSERT_TRUE(WaitUntil([&] { return inf.Get("default/later") != nullptr; }));
  EXPECT_FALSE(rec.Has("synced"));  // synced is reported once only
}

TEST_F(InformerTest, RelistsAfterHttp410) {
  server_.Upsert(Resource::kPods, TestPod("a"));
  PodInformer inf(client_, FastOptions());
  Recorder rec;
  inf.SetHandlers(rec.Handlers());
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  ASSERT_TRUE(WaitUntil([&] { return server_.open_watches() == 1; }));
  rec.Take();
  WhileDisconnected(server_, [&] {
    server_.Remove(Resource::kPods, "default", "a");
    server_.Upsert(Resource::kPods, TestPod("b"));
  });
  Fault gone;
  gone.watch = 1;
  gone.http_code = 410;
  gone.reason = "Gone";
  gone.message = "too old resource version";
  server_.SetFaults({gone});  // atomically replaces the 500s
  ASSERT_TRUE(WaitUntil([&] { return rec.size() >= 2; }));
  std::vector<std::string> ev = rec.Take();
  std::sort(ev.begin(), ev.end());
  EXPECT_EQ(ev, (std::vector<std::string>{"add b", "delete a"}));
  EXPECT_EQ(inf.stats().relists_after_expired, 1u);
  EXPECT_EQ(inf.stats().lists, 2u);
  EXPECT_EQ(Names(inf), (std::vector<std::string>{"b"}));
}

TEST_F(InformerTest, BacksOffExponentiallyOnServerErrors) {
  server_.Upsert(Resource::kPods, TestPod("a"));
  Fault e500;
  e500.watch = 0;
  e500.path_contains = "/pods";
  e500.count = 3;
  server_.InjectFault(e500);
  InformerOptions o = FastOptions();
  o.backoff.initial = std::chrono::milliseconds(1);
  o.backoff.max = std::chrono::milliseconds(1000);
  PodInformer inf(client_, o);
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  InformerStats s = inf.stats();
  EXPECT_EQ(s.lists, 4u);
  EXPECT_EQ(s.errors, 3u);
  using ms = std::chrono::milliseconds;
  EXPECT_EQ(s.backoff_delays, (std::vector<ms>{ms(1), ms(2), ms(4)}));
  EXPECT_EQ(server_.CountRequests("GET", "/pods", 0), 4u);
  EXPECT_NE(s.last_error.find("HTTP 500"), std::string::npos);
  EXPECT_EQ(inf.size(), 1u);

  // A broken watch backs off too, from the start again (the list reset it): the dropped
  // stream, then two 500s, then a working watch.
  ASSERT_TRUE(WaitUntil([&] { return server_.open_watches() == 1; }));
  Fault w500;
  w500.watch = 1;
  w500.count = 2;
  server_.SetFaults({w500});
  server_.CloseWatches(FakeApiServer::CloseMode::kDrop);
  ASSERT_TRUE(WaitUntil([&] { return inf.stats().watches >= 4 && server_.open_watches() == 1; }));
  s = inf.stats();
  EXPECT_EQ(s.backoff_delays, (std::vector<ms>{ms(1), ms(2), ms(4), ms(1), ms(2), ms(4)}));
  EXPECT_EQ(s.lists, 4u);  // a watch error is retried from the same version, no relist
  server_.Upsert(Resource::kPods, TestPod("b"));
  ASSERT_TRUE(WaitUntil([&] { return inf.size() == 2; }));
}

TEST_F(InformerTest, DroppedConnectionsResumeFromTheLastVersion) {
  PodInformer inf(client_, FastOptions());
  Recorder rec;
  inf.SetHandlers(rec.Handlers());
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(WaitUntil([&] { return server_.open_watches() == 1; }));
    server_.CloseWatches(FakeApiServer::CloseMode::kDrop);
    server_.Upsert(Resource::kPods, TestPod("p" + std::to_string(round)));
  }
  ASSERT_TRUE(WaitUntil([&] { return inf.size() == 3; }));
  std::vector<std::string> ev = rec.Take();
  EXPECT_EQ(ev, (std::vector<std::string>{"synced", "add p0", "add p1", "add p2"}));
  EXPECT_EQ(inf.stats().lists, 1u);
}

TEST_F(InformerTest, FieldSelectorForOneNode) {
  server_.Upsert(Resource::kPods, TestPod("mine", "default", "node-a"));
  server_.Upsert(Resource::kPods, TestPod("theirs", "default", "node-b"));
  server_.Upsert(Resource::kPods, TestPod("pending"));
  InformerOptions o = FastOptions();
  o.field_selector = "spec.nodeName=node-a";
  PodInformer inf(client_, o);
  Recorder rec;
  inf.SetHandlers(rec.Handlers());
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  EXPECT_EQ(Names(inf), (std::vector<std::string>{"mine"}));
  ASSERT_TRUE(WaitUntil([&] { return server_.open_watches() == 1; }));
  rec.Take();
  ASSERT_TRUE(client_->Bind({"pending", "default", "", "node-a", {}}).ok());
  ASSERT_TRUE(WaitUntil([&] { return inf.size() == 2; }));
  EXPECT_EQ(rec.Take(), (std::vector<std::string>{"add pending"}));
}

TEST_F(InformerTest, SkipsObjectsThatDoNotDecode) {
  server_.Upsert(Resource::kPods, TestPod("good"));
  json bad = TestPod("bad");
  bad["metadata"]["labels"] = {{"n", 1}};
  server_.Upsert(Resource::kPods, bad);
  PodInformer inf(client_, FastOptions());
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  EXPECT_EQ(Names(inf), (std::vector<std::string>{"good"}));
  EXPECT_EQ(inf.stats().decode_errors, 1u);
}

TEST_F(InformerTest, NodeInformer) {
  server_.Upsert(Resource::kNodes,
                 {{"metadata", {{"name", "gpu-1"}}},
                  {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
  NodeInformer inf(client_, FastOptions());
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  ASSERT_NE(inf.Get("gpu-1"), nullptr);
  EXPECT_TRUE(inf.Get("gpu-1")->IsReady());
  ASSERT_TRUE(client_->PatchNodeAnnotations("gpu-1", {{"gpushare.io/gpus", "[]"}}).ok());
  ASSERT_TRUE(WaitUntil(
      [&] { return inf.Get("gpu-1")->metadata.annotations.count("gpushare.io/gpus") == 1; }));
}

TEST_F(InformerTest, StopIsPromptWhileAWatchIsBlocked) {
  InformerOptions o = FastOptions();
  o.watch_timeout_seconds = 600;
  o.allow_bookmarks = false;
  auto inf = std::make_unique<PodInformer>(client_, o);
  ASSERT_TRUE(inf->Start().ok());
  ASSERT_TRUE(inf->WaitForSync(std::chrono::seconds(20)));
  ASSERT_TRUE(WaitUntil([&] { return server_.open_watches() == 1; }));
  auto start = std::chrono::steady_clock::now();
  inf->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));  // generous
  // (Like the real server, the double notices the departed client at its next write.)
  inf.reset();
}

TEST_F(InformerTest, StopIsPromptWhileBackingOff) {
  Fault down;
  down.count = 1000000;
  server_.InjectFault(down);
  InformerOptions o = FastOptions();
  o.backoff.initial = std::chrono::seconds(600);
  o.backoff.max = std::chrono::seconds(600);
  PodInformer inf(client_, o);
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return inf.stats().errors >= 1; }));
  EXPECT_FALSE(inf.WaitForSync(std::chrono::milliseconds(10)));
  auto start = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(inf.HasSynced());
  EXPECT_FALSE(inf.WaitForSync(std::chrono::seconds(1)));  // stopped: returns at once
}

TEST_F(InformerTest, ConcurrentReadersDuringChurn) {
  PodInformer inf(client_, FastOptions());
  ASSERT_TRUE(inf.Start().ok());
  ASSERT_TRUE(inf.WaitForSync(std::chrono::seconds(20)));
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      for (const auto& p : inf.List()) ASSERT_FALSE(p->metadata.name.empty());
      (void)inf.Get("default/p3");
    }
  });
  for (int i = 0; i < 50; ++i) server_.Upsert(Resource::kPods, TestPod("p" + std::to_string(i)));
  for (int i = 0; i < 50; i += 2)
    server_.Remove(Resource::kPods, "default", "p" + std::to_string(i));
  bool converged = WaitUntil([&] {
    return inf.size() == 25 &&
           inf.stats().resource_version == std::to_string(server_.resource_version());
  });
  done.store(true);
  reader.join();
  EXPECT_TRUE(converged) << "size=" << inf.size() << " rv=" << inf.stats().resource_version
                         << " server=" << server_.resource_version();
}

}  // namespace
}  // namespace gpushare::kube
