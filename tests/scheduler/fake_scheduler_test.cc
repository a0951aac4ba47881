// The kube-scheduler double itself, against a scripted extender: the exact requests it sends
// and how it reads replies (§3.4 of the reference), so that tests using it can be trusted.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/fakes/scheduler/fake_kube_scheduler.h"
#include "tests/kube/test_util.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::fakes {
namespace {

using json = nlohmann::json;
using scheduler::testing::NodeJson;
using scheduler::testing::SimplePod;
using scheduler::testing::Uniform;

// An extender that records what it receives and answers from a script.
class ScriptedExtender {
 public:
  struct Seen {
    std::string method, path, content_type, body;
  };
  using Script =
      std::function<std::pair<int, std::string>(const std::string& verb, const std::string& body)>;

  explicit ScriptedExtender(Script script) : script_(std::move(script)) {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> l(mu_);
        seen_.push_back({req.method, req.path, req.get_header_value("Content-Type"), req.body});
      }
      const std::string verb = req.path.substr(req.path.rfind('/') + 1);
      auto [code, body] = script_(verb, req.body);
      res.status = code;
      res.set_content(body, "application/json");
    };
    server_.Post(".*", handler);
    server_.Get(".*", handler);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~ScriptedExtender() {
    server_.stop();
    thread_.join();
  }
  std::string url(const std::string& prefix = "/ext") const {
    return "http://127.0.0.1:" + std::to_string(port_) + prefix;
  }
  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }
  int Count(const std::string& verb) {
    int n = 0;
    for (const Seen& s : seen())
      if (s.path.size() >= verb.size() &&
          s.path.compare(s.path.size() - verb.size(), verb.size(), verb) == 0)
        ++n;
    return n;
  }

 private:
  Script script_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

ExtenderConfig Config(const std::string& url) {
  ExtenderConfig c;
  c.url_prefix = url;
  c.managed_resources = {{"aliyun.com/gpu-mem", false}};
  return c;
}

std::vector<json> Nodes(std::initializer_list<const char*> names) {
  std::vector<json> out;
  for (const char* n : names)
    out.push_back(json{{"kind", "Node"}, {"apiVersion", "v1"}, {"metadata", {{"name", n}}}});
  return out;
}

TEST(FakeKubeScheduler, PostsTheExactJsonInBothModes) {
  ScriptedExtender ext([](const std::string&, const std::string&) {
    return std::make_pair(
        200,
        std::string(
            R"({"Nodes":null,"NodeNames":["a"],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""})"));
  });
  json pod = {{"kind", "Pod"},
              {"apiVersion", "v1"},
              {"metadata", {{"name", "p"}, {"namespace", "ml"}, {"uid", "u"}}}};
  ExtenderClient cache_mode(Config(ext.url("/ext//")));  // trailing slashes are trimmed
  ASSERT_TRUE(cache_mode.Filter(pod, Nodes({"a", "b"})).ok());
  ExtenderConfig full = Config(ext.url());
  full.node_cache_capable = false;
  ExtenderClient full_mode(full);
  (void)full_mode.Filter(pod, Nodes({"a"}));
  ASSERT_TRUE(cache_mode.Bind(pod, "a").ok());
  std::vector<ScriptedExtender::Seen> s = ext.seen();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].method, "POST");
  EXPECT_EQ(s[0].path, "/ext/filter");
  EXPECT_EQ(s[0].content_type, "application/json");
  EXPECT_EQ(
      s[0].body,
      R"({"Pod":{"metadata":{"name":"p","namespace":"ml","uid":"u"}},"Nodes":null,"NodeNames":["a","b"]})");
  EXPECT_EQ(
      s[1].body,
      R"({"Pod":{"metadata":{"name":"p","namespace":"ml","uid":"u"}},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}}]},"NodeNames":null})");
  EXPECT_EQ(s[2].path, "/ext/bind");
  EXPECT_EQ(s[2].body, R"({"PodName":"p","PodNamespace":"ml","PodUID":"u","Node":"a"})");
}

TEST(FakeKubeScheduler, ReadsFilterRepliesAsKubeSchedulerDoes) {
  std::string reply;
  int code = 200;
  ScriptedExtender ext(
      [&](const std::string&, const std::string&) { return std::make_pair(code, reply); });
  ExtenderClient c(Config(ext.url()));
  const json pod = {{"metadata", {{"name", "p"}}}};
  auto filter = [&](std::string r) {
    reply = std::move(r);
    return c.Filter(pod, Nodes({"a", "b", "c"}));
  };
  // Lower-case keys decode; FailedAndUnresolvableNodes wins over FailedNodes.
  Result<FilterOutcome> f = filter(
      R"({"nodenames":["a"],"failednodes":{"b":"full","c":"x"},"FAILEDANDUNRESOLVABLENODES":{"c":"never"},"error":""})");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->feasible, (std::vector<std::string>{"a"}));
  EXPECT_EQ(f->failed, (std::map<std::string, std::string>{{"b", "full"}}));
  EXPECT_EQ(f->unresolvable.at("c"), "never");
  // Both null: every node filtered out (not an error).
  f = filter(
      R"({"Nodes":null,"NodeNames":null,"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""})");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->feasible.empty());
  // In node-cache mode, Nodes is read when NodeNames is null.
  f = filter(R"({"Nodes":{"items":[{"metadata":{"name":"b"}}]},"NodeNames":null})");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->feasible, (std::vector<std::string>{"b"}));
  // A key spelled twice: the last one wins (Go decodes in document order).
  f = filter(R"({"NodeNames":["a"],"nodeNames":["c"]})");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->feasible, (std::vector<std::string>{"c"}));
  // Errors: a node that was not asked about, a non-empty Error, non-200, bad JSON, wrong types.
  EXPECT_NE(filter(R"({"NodeNames":["zzz"]})")
                .status()
                .message()
                .find("not found in the input node list"),
            std::string::npos);
  EXPECT_EQ(filter(R"({"NodeNames":["a"],"Error":"cache not synced"})").status().message(),
            "cache not synced");
  EXPECT_FALSE(filter("not json").ok());
  EXPECT_FALSE(filter(R"({"NodeNames":"a"})").ok());
  EXPECT_FALSE(filter(R"({"FailedNodes":{"a":1}})").ok());
  EXPECT_FALSE(filter("[]").ok());
  code = 500;
  EXPECT_NE(filter(R"({"NodeNames":["a"]})").status().message().find("HTTP 500"),
            std::string::npos);
}

TEST(FakeKubeScheduler, ReadsPrioritizeAndBindReplies) {
  std::string reply;
  ScriptedExtender ext(
      [&](const std::string&, const std::string&) { return std::make_pair(200, reply); });
  ExtenderClient c(Config(ext.url()));
  const json pod = {{"metadata", {{"name", "p"}}}};
  reply = R"([{"host":"a","score":3},{"Host":"b","Score":12}])";
  Result<std::map<std::string, int64_t>> s = c.Prioritize(pod, Nodes({"a", "b"}));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->at("a"), 3);
  EXPECT_EQ(s->at("b"), 12);  // not clamped
  reply = R"([{"Host":"a","Score":7.5}])";
  EXPECT_FALSE(c.Prioritize(pod, Nodes({"a"})).ok());
  reply = R"({"error":"no room"})";
  EXPECT_EQ(c.Bind(pod, "a").message(), "no room");
  reply = R"({"Error":""})";
  EXPECT_TRUE(c.Bind(pod, "a").ok());
}

TEST(FakeKubeScheduler, InterestAndValidation) {
  ExtenderClient c(Config("http://127.0.0.1:1/ext"));
  EXPECT_TRUE(c.IsInterested(SimplePod("p", 3)));
  json init_only = scheduler::testing::PodJson("i", {{"setup", 2, true}, {"app", 0}});
  EXPECT_TRUE(c.IsInterested(init_only));
  EXPECT_FALSE(c.IsInterested(scheduler::testing::PodJson("cpu", {{"app", 0}})));
  ExtenderConfig all;
  all.url_prefix = "http://x/e";
  EXPECT_TRUE(ExtenderClient(all).IsInterested(scheduler::testing::PodJson("cpu", {{"app", 0}})));
  EXPECT_EQ(
      PodResourceRequest(scheduler::testing::PodJson("x", {{"a", 3}, {"b", 2}, {"i", 4, true}}),
                         "aliyun.com/gpu-mem"),
      5);
  EXPECT_EQ(PodResourceRequest(scheduler::testing::PodJson("x", {{"a", 3}, {"i", 4, true}}),
                               "aliyun.com/gpu-mem"),
            4);
  ExtenderConfig bad = Config("http://x/e");
  bad.weight = 0;
  EXPECT_FALSE(ValidateExtenders({bad}).ok());
  EXPECT_FALSE(ValidateExtenders({Config("http://x/e"), Config("http://y/e")})
                   .ok());  // two binders, duplicate resource
  ExtenderConfig noscheme = Config("x/e");
  EXPECT_FALSE(ValidateExtenders({noscheme}).ok());
  ExtenderConfig k8s = Config("http://x/e");
  k8s.managed_resources = {{"kubernetes.io/gpu", false}};
  EXPECT_FALSE(ValidateExtenders({k8s}).ok());
  EXPECT_TRUE(ValidateExtenders({Config("http://x/e")}).ok());
}

// A whole cycle against the API-server double: in-tree fit, extender filter, prioritize only
// with two or more nodes, Score x weight x 10, the binder.
class CycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    client_ = kube::testing::MakeClient(api_.url());
  }
  FakeApiServer api_;
  std::shared_ptr<kube::Client> client_;
};

TEST_F(CycleTest, SkipsPrioritizeWithOneNodeAndBindsThroughTheExtender) {
  api_.Upsert(Resource::kNodes, NodeJson("a", Uniform(1, 24)));
  api_.Upsert(Resource::kNodes, NodeJson("b", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("p", 3));
  api_.Upsert(Resource::kPods, SimplePod("q", 3));
  std::atomic<int> binds{0};
  auto client = client_;
  ScriptedExtender ext(
      [&](const std::string& verb, const std::string& body) -> std::pair<int, std::string> {
        if (verb == "filter")
          return {200, R"({"NodeNames":["b"],"FailedNodes":{"a":"GPU 0 is full"}})"};
        if (verb == "bind") {
          json b = json::parse(body);
          ++binds;
          Status s = client->Bind({b["PodName"], b["PodNamespace"], b["PodUID"], b["Node"], {}});
          return {200, json{{"Error", s.ok() ? "" : s.message()}}.dump()};
        }
        return {200, R"([{"Host":"b","Score":10}])"};
      });
  FakeKubeScheduler sched(client_, {{Config(ext.url())}, 1});
  ASSERT_TRUE(sched.Validate().ok());
  ScheduleResult r = sched.ScheduleOne("default", "p");
  ASSERT_TRUE(r.bound()) << r.message;
  EXPECT_EQ(r.node, "b");
  EXPECT_FALSE(r.prioritize_called);
  EXPECT_EQ(ext.Count("/prioritize"), 0);
  EXPECT_EQ(binds.load(), 1);
  EXPECT_EQ(r.node_reasons.at("a"), "GPU 0 is full");
  EXPECT_EQ(client_->GetPod("default", "p")->spec.node_name, "b");
}

TEST_F(CycleTest, ScoresTimesWeightTimesTenAndFitErrors) {
  api_.Upsert(Resource::kNodes, NodeJson("a", Uniform(1, 24)));
  api_.Upsert(Resource::kNodes, NodeJson("b", Uniform(1, 24)));
  api_.Upsert(Resource::kNodes, NodeJson("small", Uniform(1, 2)));
  api_.Upsert(Resource::kPods, SimplePod("p", 3));
  ScriptedExtender ext([&](const std::string& verb,
                           const std::string& body) -> std::pair<int, std::string> {
    if (verb == "filter") {
      json names = json::parse(body)["NodeNames"];  // the in-tree fit removed "small"
      return {200, json{{"NodeNames", names}}.dump()};
    }
    return {200,
            R"([{"Host":"a","Score":3},{"Host":"b","Score":4},{"Host":"elsewhere","Score":10}])"};
  });
  ExtenderConfig c = Config(ext.url());
  c.weight = 2;
  c.bind_verb.clear();  // the default binder
  FakeKubeScheduler sched(client_, {{c}, 1});
  ScheduleResult r = sched.ScheduleOne("default", "p");
  ASSERT_TRUE(r.bound()) << r.message;
  EXPECT_TRUE(r.prioritize_called);
  EXPECT_EQ(r.scores.at("a"), 60);
  EXPECT_EQ(r.scores.at("b"), 80);
  EXPECT_EQ(r.scores.count("elsewhere"), 0u);
  EXPECT_EQ(r.node, "b");
  EXPECT_EQ(r.node_reasons.at("small"), "Insufficient aliyun.com/gpu-mem");
  // Everything full: the FitError text kube-scheduler would put in the event.
  api_.Upsert(Resource::kPods, SimplePod("big", 30));
  ScheduleResult full = sched.ScheduleOne("default", "big");
  EXPECT_EQ(full.kind, ScheduleResult::Kind::kUnschedulable);
  EXPECT_EQ(full.message, "0/3 nodes are available: 3 Insufficient aliyun.com/gpu-mem.");
}

TEST_F(CycleTest, ExtenderErrorsFailTheAttemptUnlessIgnorable) {
  api_.Upsert(Resource::kNodes, NodeJson("a", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("p", 3));
  ScriptedExtender ext([&](const std::string&, const std::string&) {
    return std::make_pair(200, std::string(R"({"Error":"cache not synced"})"));
  });
  ExtenderConfig c = Config(ext.url());
  FakeKubeScheduler strict(client_, {{c}, 1});
  ScheduleResult r = strict.ScheduleOne("default", "p");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kError);
  EXPECT_NE(r.message.find("cache not synced"), std::string::npos);
  c.ignorable = true;
  FakeKubeScheduler lenient(client_, {{c}, 1});
  r = lenient.ScheduleOne("default", "p");
  EXPECT_TRUE(r.bound()) << r.message;  // filter skipped, bind falls through to the default binder
}

}  // namespace
}  // namespace gpushare::fakes

namespace gpushare::fakes {
namespace {

// DefaultPreemption in the double: the node-total dry run, the request the extender gets, and
// how its reply is checked.
TEST_F(CycleTest, PreemptsByTheNodeTotalAndAsksThePreemptVerb) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(2, 6)));  // 12 units
  for (int i = 0; i < 4; ++i) {
    json p = SimplePod("low-" + std::to_string(i), 3);
    p["spec"]["nodeName"] = "n";
    p["spec"]["priority"] = i;  // low-0 the least important
    p["status"]["phase"] = "Running";
    api_.Upsert(Resource::kPods, p);
  }
  json high = SimplePod("high", 6);
  high["spec"]["priority"] = 100;
  api_.Upsert(Resource::kPods, high);
  std::string preempt_body, reply;
  ScriptedExtender ext(
      [&](const std::string& verb, const std::string& body) -> std::pair<int, std::string> {
        if (verb == "filter") return {200, R"({"NodeNames":[],"FailedNodes":{"n":"full"}})"};
        preempt_body = body;
        return {200, reply};
      });
  ExtenderConfig c = Config(ext.url());
  c.preempt_verb = "preempt";
  FakeKubeScheduler sched(client_, {{c}, 1});
  // The extender keeps kube-scheduler's choice: the two least important pods (node total).
  reply =
      R"({"NodeNameToMetaVictims":{"n":{"Pods":[{"UID":"uid-low-1"},{"UID":"uid-low-0"}],"NumPDBViolations":0}}})";
  ScheduleResult r = sched.ScheduleOne("default", "high");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kUnschedulable);
  EXPECT_EQ(r.nominated_node, "n") << r.preemption_message;
  EXPECT_EQ(r.victims, (std::vector<std::string>{"uid-low-1", "uid-low-0"}));
  const json args = json::parse(preempt_body);
  EXPECT_TRUE(args["NodeNameToVictims"].is_null());
  ASSERT_EQ(args["NodeNameToMetaVictims"]["n"]["Pods"].size(), 2u);
  EXPECT_EQ(args["NodeNameToMetaVictims"]["n"]["Pods"][0]["UID"], "uid-low-1")
      << "most important first";
  EXPECT_EQ(args["NodeNameToMetaVictims"]["n"]["Pods"][1]["UID"], "uid-low-0");
  // Deleted gracefully (bound, 30 s): still listed, with a deletionTimestamp; nominated.
  Result<kube::Pod> v = client_->GetPod("default", "low-0");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->IsBeingDeleted());
  EXPECT_EQ(client_->GetPod("default", "high")->status.nominated_node_name, "n");
  // While they terminate on the nominated node, no more preemption.
  r = sched.ScheduleOne("default", "high");
  EXPECT_TRUE(r.victims.empty());
  EXPECT_NE(r.preemption_message.find("terminating pod on the nominated node"), std::string::npos);
}

TEST_F(CycleTest, PreemptRepliesAreCheckedAsKubeSchedulerChecksThem) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(1, 6)));
  json low = SimplePod("low", 6);
  low["spec"]["nodeName"] = "n";
  low["status"]["phase"] = "Running";
  api_.Upsert(Resource::kPods, low);
  json high = SimplePod("high", 6);
  high["spec"]["priority"] = 10;
  api_.Upsert(Resource::kPods, high);
  std::string reply;
  ScriptedExtender ext(
      [&](const std::string& verb, const std::string&) -> std::pair<int, std::string> {
        if (verb == "filter") return {200, R"({"NodeNames":[],"FailedNodes":{"n":"full"}})"};
        return {200, reply};
      });
  ExtenderConfig c = Config(ext.url());
  c.preempt_verb = "preempt";
  FakeKubeScheduler sched(client_, {{c}, 1});
  // A node kept without victims, a UID not on the node: errors (not ignorable).
  reply = R"({"NodeNameToMetaVictims":{"n":{"Pods":[],"NumPDBViolations":0}}})";
  ScheduleResult r = sched.ScheduleOne("default", "high");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kError);
  EXPECT_NE(r.message.find("expected at least one victim pod on node \"n\""), std::string::npos);
  reply = R"({"NodeNameToMetaVictims":{"n":{"Pods":[{"UID":"nobody"}]}}})";
  r = sched.ScheduleOne("default", "high");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kError);
  EXPECT_NE(r.message.find("the pod is not found on that node"), std::string::npos);
  // No node: nothing evicted.
  reply = R"({"NodeNameToMetaVictims":{}})";
  r = sched.ScheduleOne("default", "high");
  EXPECT_EQ(r.kind, ScheduleResult::Kind::kUnschedulable);
  EXPECT_EQ(r.preemption_message, "no candidate node for preemption");
  EXPECT_FALSE(client_->GetPod("default", "low")->IsBeingDeleted());
  // preemptionPolicy Never: not eligible at all.
  high["spec"]["preemptionPolicy"] = "Never";
  api_.Upsert(Resource::kPods, high);
  r = sched.ScheduleOne("default", "high");
  EXPECT_EQ(r.preemption_message, "not eligible due to preemptionPolicy=Never.");
}

}  // namespace
}  // namespace gpushare::fakes
