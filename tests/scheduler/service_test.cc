// SchedulerService in-process against the API-server double, driven over HTTP by the
// kube-scheduler double: readiness before sync, the bind protocol and its rollbacks under API
// faults, idempotency, confirmations, the assume timeout with its Event; PREFIX/inspect against
// what `gpushare inspect -o json` builds from the same objects, and PREFIX/debug/cache.
#include "scheduler/service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "kube/inspect_view.h"
#include "tests/datadriven.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/fakes/apiserver/kubeconfig_text.h"
#include "tests/fakes/scheduler/fake_kube_scheduler.h"
#include "tests/kube/test_util.h"
#include "tests/scheduler/fixtures.h"

namespace gpushare::scheduler {
namespace {

using namespace testing;
using fakes::ExtenderClient;
using fakes::ExtenderConfig;
using fakes::FakeApiServer;
using fakes::Resource;
using kube::testing::WaitUntil;
namespace ms = memshare;

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    client_ = kube::testing::MakeClient(api_.url());
    kubeconfig_ = tmp_.File("kubeconfig");
    kube::testing::WriteFile(kubeconfig_, fakes::PlainKubeconfig(api_.url()));
  }
  void TearDown() override {
    if (service_) service_->Stop();
  }
  void StartService(std::chrono::milliseconds assume_timeout = std::chrono::minutes(5)) {
    ServiceOptions o;
    o.kubeconfig = kubeconfig_;
    o.http.host = "127.0.0.1";
    o.http.port = 0;
    o.url_prefix = "/gpushare-scheduler";
    o.assume_timeout = assume_timeout;
    o.expiry_interval = std::chrono::milliseconds(50);
    service_ = std::make_unique<SchedulerService>(o);
    ASSERT_TRUE(service_->Start().ok());
    ExtenderConfig c;
    c.url_prefix = "http://127.0.0.1:" + std::to_string(service_->port()) + "/gpushare-scheduler";
    c.managed_resources = {{"aliyun.com/gpu-mem", false}};
    ext_ = std::make_unique<ExtenderClient>(c);
  }
  bool WaitReady() {
    return WaitUntil([&] { return service_->readiness().ready; });
  }
  json Pod(const std::string& name) { return *client_->Get(kube::kPods, "default", name); }
  Status Bind(const std::string& name, const std::string& node) {
    return ext_->Bind(Pod(name), node);
  }
  std::map<std::string, std::string> Annotations(const std::string& name) {
    return client_->GetPod("default", name)->metadata.annotations;
  }
  // The Events about pod `name` with `reason` (waits until there is one, or 10 s).
  std::vector<json> EventsFor(const std::string& name, const std::string& reason) {
    std::vector<json> out;
    WaitUntil([&] {
      out.clear();
      for (const json& e : api_.List(Resource::kEvents))
        if (e["involvedObject"].value("name", "") == name && e.value("reason", "") == reason)
          out.push_back(e);
      return !out.empty();
    });
    return out;
  }
  int64_t Used(const std::string& node, int gpu) {
    for (const GpuState& g : service_->cache().NodeGpus(node))
      if (g.index == gpu) return g.used;
    return -1;
  }

  FakeApiServer api_;
  std::shared_ptr<kube::Client> client_;
  kube::testing::TempDir tmp_;
  std::string kubeconfig_;
  std::unique_ptr<SchedulerService> service_;
  std::unique_ptr<ExtenderClient> ext_;
};

TEST_F(ServiceTest, AnswersCacheNotSyncedUntilBothInformersListed) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("p", 3));
  fakes::Fault f;
  f.count = 1000000;
  f.http_code = 503;
  f.method = "GET";
  f.path_contains = "/api/v1/pods";  // the informer's list and watch, not GETs of one pod
  api_.SetFaults({f});
  StartService();
  ASSERT_TRUE(WaitUntil([&] { return service_->cache().stats().nodes == 1; }));
  Readiness r = service_->readiness();
  EXPECT_FALSE(r.ready);
  EXPECT_NE(r.reason.find("pods not listed yet"), std::string::npos) << r.reason;
  httplib::Client http("127.0.0.1", service_->port());
  httplib::Result ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_NE(ready->body.find("not ready: cache not synced"), std::string::npos) << ready->body;
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  Result<fakes::FilterOutcome> filter = ext_->Filter(Pod("p"), {NodeJson("n", Uniform(1, 24))});
  ASSERT_FALSE(filter.ok());
  EXPECT_NE(filter.status().message().find("cache not synced"), std::string::npos);
  EXPECT_NE(Bind("p", "n").message().find("cache not synced"), std::string::npos);
  EXPECT_TRUE(Annotations("p").empty());
  api_.ClearFaults();
  ASSERT_TRUE(WaitReady());
  EXPECT_EQ(http.Get("/readyz")->status, 200);
  EXPECT_TRUE(Bind("p", "n").ok());
}

TEST_F(ServiceTest, BindWritesTheContractInTheBindingAndIsIdempotent) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(2, 24)));
  api_.Upsert(Resource::kPods,
              PodJson("p", {{"user-container", 3}, {"queue-proxy", 0}}, "default", "uid-p"));
  StartService();
  ASSERT_TRUE(WaitReady());
  const int64_t before = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  ASSERT_TRUE(Bind("p", "n").ok());
  kube::Pod p = *client_->GetPod("default", "p");
  EXPECT_EQ(p.spec.node_name, "n");
  const auto& a = p.metadata.annotations;
  EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_POD"), "3");
  EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_DEV"), "24");
  EXPECT_EQ(a.at("ALIYUN_COM_GPU_MEM_ASSIGNED"), "false");
  const std::string idx = a.at("ALIYUN_COM_GPU_MEM_IDX");
  EXPECT_TRUE(idx == "0" || idx == "1") << idx;
  EXPECT_EQ(a.at("gpushare.io/gpu-mem-assumed"), "{\"user-container\":" + idx + "}");
  EXPECT_GE(*ms::DecodeAssumeTime(a.at("ALIYUN_COM_GPU_MEM_ASSUME_TIME")), before);
  // One write: the Binding carries the assignment and the pod's UID (issue 25); no patch.
  std::vector<fakes::RecordedRequest> reqs = api_.requests();
  int patches = 0, bindings = 0;
  for (const auto& r : reqs) {
    if (r.method == "PATCH" && r.path == "/api/v1/namespaces/default/pods/p") ++patches;
    if (r.method == "POST" && r.path == "/api/v1/namespaces/default/pods/p/binding") {
      ++bindings;
      const json b = json::parse(r.body);
      EXPECT_EQ(b["metadata"]["uid"], "uid-p") << r.body;
      EXPECT_EQ(b["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_IDX"], idx) << r.body;
      EXPECT_EQ(b["metadata"]["annotations"]["ALIYUN_COM_GPU_MEM_ASSIGNED"], "false") << r.body;
    }
  }
  EXPECT_EQ(patches, 0);
  EXPECT_EQ(bindings, 1);
  // A repeated bind (kube-scheduler retrying after a timeout) writes nothing.
  api_.ClearRequests();
  EXPECT_TRUE(Bind("p", "n").ok());
  EXPECT_EQ(api_.CountRequests("PATCH", "/pods/"), 0u);
  EXPECT_EQ(api_.CountRequests("POST", "/binding"), 0u);
  // Another node for the same pod is refused, with the reason: from the informer's copy once it
  // shows the binding ("already bound to node n"), from the cache's booking before that
  // ("already assigned to node n (bound)"); which one depends on how soon the watch delivers.
  api_.Upsert(Resource::kNodes, NodeJson("m", Uniform(1, 24)));
  Status other = Bind("p", "m");
  EXPECT_FALSE(other.ok());
  EXPECT_THAT(other.message(), ::testing::ContainsRegex("already (bound|assigned) to node n"));
  EXPECT_EQ(Used("n", std::stoi(idx)), 3);
}

TEST_F(ServiceTest, ApiFailuresRollBackTheReservation) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("a", 20));
  api_.Upsert(Resource::kPods, SimplePod("b", 20));
  StartService();
  ASSERT_TRUE(WaitReady());
  // The binding fails: nothing is booked, nothing is bound or annotated.
  fakes::Fault f;
  f.method = "POST";
  f.path_contains = "/binding";
  f.http_code = 500;
  api_.SetFaults({f});
  Status s = Bind("a", "n");
  EXPECT_NE(s.message().find("binding pod default/a to node n"), std::string::npos) << s.message();
  std::vector<json> ev = EventsFor("a", "BindApiError");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["type"], "Warning");
  EXPECT_NE(ev[0]["message"].get<std::string>().find(
                "binding to node n failed: binding pod default/a to node n"),
            std::string::npos)
      << ev[0].dump();
  EXPECT_EQ(Used("n", 0), 0);
  EXPECT_TRUE(client_->GetPod("default", "a")->spec.node_name.empty());
  EXPECT_EQ(Annotations("a").count("ALIYUN_COM_GPU_MEM_IDX"), 0u);
  EXPECT_EQ(api_.CountRequests("PATCH", "/pods/"), 0u);
  // The other pod gets the GPU; then the first one is refused for lack of room.
  ASSERT_TRUE(Bind("b", "n").ok());
  s = Bind("a", "n");
  EXPECT_NE(s.message().find("no GPU has 20 GiB free"), std::string::npos) << s.message();
  ASSERT_TRUE(WaitUntil([&] { return Used("n", 0) == 20; }));
  // Each failure is an Event with its code, and counted by it.
  ev = EventsFor("a", "BindConflict");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_NE(ev[0]["message"].get<std::string>().find("no GPU has 20 GiB free for container main"),
            std::string::npos)
      << ev[0].dump();
  ASSERT_TRUE(WaitUntil([&] { return EventsFor("a", "BindApiError").size() == 1; }));
  const std::string m = service_->Metrics();
  EXPECT_NE(m.find("gpushare_scheduler_bind_failures_total{reason=\"BindApiError\"} 1\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("gpushare_scheduler_bind_failures_total{reason=\"BindConflict\"} 1\n"),
            std::string::npos);
  EXPECT_NE(m.find("gpushare_scheduler_bind_duration_seconds_count 3\n"), std::string::npos);
}

TEST_F(ServiceTest, BindOfARecreatedPodIsBindPodChanged) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("a", 10));
  StartService();
  ASSERT_TRUE(WaitReady());
  json stale = Pod("a");
  stale["metadata"]["uid"] = "uid-of-an-earlier-a";
  EXPECT_NE(ext_->Bind(stale, "n").message().find("the pod was recreated"), std::string::npos);
  std::vector<json> ev = EventsFor("a", "BindPodChanged");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["involvedObject"]["uid"], "uid-of-an-earlier-a");
}

// Events with reasons (issue 14 §5): a pod the filter leaves without a node gets one Warning
// Event whose reason is the dominant code and whose message says which GPU lacked what; the
// FailedNodes reasons lead with the same code (kube-scheduler's FailedScheduling shows them).
TEST_F(ServiceTest, FilterWithNoNodeLeftRecordsAnEventWithTheReason) {
  const json n = NodeJson("n", Uniform(1, 24));
  json one_client = NodeJson("c", Uniform(1, 24), /*max_clients=*/1);
  const json sick = NodeJson("sick", {{24, false}});
  const json sliced = NodeJson("sliced", {{24, true, "time-slicing"}});
  for (const json& node : {n, one_client, sick, sliced}) api_.Upsert(Resource::kNodes, node);
  api_.Upsert(Resource::kPods, SimplePod("a", 20));
  api_.Upsert(Resource::kPods, SimplePod("small", 1));
  api_.Upsert(Resource::kPods, SimplePod("b", 20));
  api_.Upsert(Resource::kPods, PodJson("pair", {{"x", 20}, {"y", 20}}));
  json invalid = SimplePod("invalid", 2);
  invalid["spec"]["containers"][0]["resources"]["requests"]["aliyun.com/gpu-mem"] = "1";
  api_.Upsert(Resource::kPods, invalid);
  StartService();
  ASSERT_TRUE(WaitReady());
  ASSERT_TRUE(Bind("a", "n").ok());
  ASSERT_TRUE(Bind("small", "c").ok());
  const json ghost = NodeJson("ghost", Uniform(1, 24));
  struct Case {
    std::string pod;
    std::vector<json> nodes;
    std::string reason, words;
  };
  const std::vector<Case> cases = {
      {"b",
       {n},
       "GpuMemoryInsufficient",
       "0/1 nodes can take the pod (1 GpuMemoryInsufficient): n: GpuMemoryInsufficient: no GPU "
       "has 20 GiB free for container main: the most free is GPU 0 "
       "(GPU-1000-0000-0000-0000-000000000000) with 4 GiB free of 24 GiB"},
      {"b", {one_client}, "ClientCeilingReached", "(maxClientsPerGpu)"},
      {"b", {sick}, "GpuUnhealthy", "sick: GpuUnhealthy: no GPU serves memory shares"},
      {"b", {sliced}, "NoSharedGpu", "GPU 0 in mode time-slicing"},
      {"b", {ghost}, "NodeUnknown", "ghost: NodeUnknown: node is not in gpushare-scheduler's"},
      {"pair",
       {n, ghost},
       "NoGpuFitsContainer",
       "0/2 nodes can take the pod (1 NoGpuFitsContainer, 1 NodeUnknown): n: "
       "NoGpuFitsContainer:"},
      {"invalid", {n}, "InvalidRequest", "request 1 differs from limit 2"},
  };
  for (const Case& c : cases) {
    Result<fakes::FilterOutcome> f = ext_->Filter(Pod(c.pod), c.nodes);
    if (c.reason == "InvalidRequest") {
      EXPECT_FALSE(f.ok());
    } else {
      ASSERT_TRUE(f.ok()) << f.status().message();
      EXPECT_TRUE(f->feasible.empty());
      for (const auto* m : {&f->failed, &f->unresolvable})
        for (const auto& [node, why] : *m)
          EXPECT_TRUE(why.rfind("GpuMemoryInsufficient: ", 0) == 0 ||
                      why.rfind(c.reason + ": ", 0) == 0 || why.rfind("NodeUnknown: ", 0) == 0)
              << node << ": " << why;
    }
    std::vector<json> ev = EventsFor(c.pod, c.reason);
    ASSERT_EQ(ev.size(), 1u) << c.reason;
    EXPECT_EQ(ev[0]["type"], "Warning");
    EXPECT_EQ(ev[0]["source"]["component"], "gpushare-scheduler");
    EXPECT_NE(ev[0]["message"].get<std::string>().find(c.words), std::string::npos)
        << c.reason << ": " << ev[0]["message"];
  }
  // The same refusal again is the same Event, counted (a PATCH, not a second object).
  ASSERT_TRUE(ext_->Filter(Pod("b"), {n}).ok());
  ASSERT_TRUE(
      WaitUntil([&] { return EventsFor("b", "GpuMemoryInsufficient").at(0)["count"] == 2; }));
  EXPECT_EQ(EventsFor("b", "GpuMemoryInsufficient").size(), 1u);
  const std::string m = service_->Metrics();
  EXPECT_NE(
      m.find("gpushare_scheduler_filter_rejections_total{reason=\"GpuMemoryInsufficient\"} 2\n"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("gpushare_scheduler_filter_rejections_total{reason=\"NodeUnknown\"} 2\n"),
            std::string::npos);
  EXPECT_NE(m.find("gpushare_scheduler_filter_duration_seconds_count 8\n"), std::string::npos);
}

TEST_F(ServiceTest, MetricsInspectAndTheCacheViewServe) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(2, 24)));
  api_.Upsert(Resource::kPods, SimplePod("a", 3));
  StartService();
  ASSERT_TRUE(WaitReady());
  ASSERT_TRUE(Bind("a", "n").ok());
  httplib::Client http("127.0.0.1", service_->port());
  // --metrics-auth=kubernetes (the default): a token the API server knows, of a user allowed to
  // GET the non-resource URL /metrics.
  const std::string prometheus = "system:serviceaccount:monitoring:prometheus";
  api_.SetIdentity("prom-token", {prometheus, "uid-prom", {"system:serviceaccounts"}});
  api_.SetIdentity("other-token", {"someone", "uid-someone", {}});
  api_.Grant({prometheus, "/metrics", "get"});
  httplib::Result anonymous = http.Get("/metrics");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401) << anonymous->body;
  httplib::Result forbidden = http.Get("/metrics", {{"Authorization", "Bearer other-token"}});
  ASSERT_TRUE(forbidden);
  EXPECT_EQ(forbidden->status, 403) << forbidden->body;
  httplib::Result metrics = http.Get("/metrics", {{"Authorization", "Bearer prom-token"}});
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200) << metrics->body;
  // The probes stay open.
  EXPECT_EQ(http.Get("/healthz")->status, 200);
  EXPECT_NE(metrics->body.find("# HELP gpushare_scheduler_gpu_memory_allocated_bytes "),
            std::string::npos);
  EXPECT_NE(metrics->body.find("gpushare_scheduler_gpu_memory_allocated_bytes{index=\"" +
                               Annotations("a").at("ALIYUN_COM_GPU_MEM_IDX") +
                               "\",node=\"n\",uuid=\"GPU-10"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("gpushare_scheduler_assumed_pods 1\n"), std::string::npos);
  // PREFIX/debug/cache: the cache's own state (the bind's booking, assumed).
  httplib::Result all = http.Get("/gpushare-scheduler/debug/cache");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200);
  EXPECT_EQ(all->get_header_value("Content-Type"), "application/json");
  const json view = json::parse(all->body);
  EXPECT_EQ(view["totals"]["units"]["allocated"], 3);
  EXPECT_EQ(view["nodes"][0]["pendingPods"][0]["name"], "a");
  httplib::Result one = http.Get("/gpushare-scheduler/debug/cache/n");
  ASSERT_TRUE(one);
  EXPECT_EQ(json::parse(one->body), view["nodes"][0]);
  httplib::Result ghost = http.Get("/gpushare-scheduler/debug/cache/ghost");
  ASSERT_TRUE(ghost);
  EXPECT_EQ(ghost->status, 404);
  EXPECT_NE(json::parse(ghost->body)["Error"].get<std::string>().find("node ghost is not in"),
            std::string::npos);
  // PREFIX/inspect: the API objects' view, once the informer has seen the bind's annotations.
  ASSERT_TRUE(WaitUntil([&] {
    httplib::Result r = http.Get("/gpushare-scheduler/inspect/n");
    if (!r || r->status != 200) return false;
    const json v = json::parse(r->body);
    return v["totals"]["memoryMiB"]["allocated"] == 3 * 1024;
  }));
  for (const char* path : {"/gpushare-scheduler/inspect", "/gpushare-scheduler/debug/cache"}) {
    httplib::Result post = http.Post(path, "{}", "application/json");
    ASSERT_TRUE(post);
    EXPECT_EQ(post->status, 405) << path;
  }
}

// YAML (as `kubectl get -o yaml` prints it) to JSON: quoted scalars stay strings, plain ones
// that read as booleans, null or numbers become those.
json YamlToJson(const YAML::Node& y) {
  switch (y.Type()) {
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const YAML::Node& e : y) a.push_back(YamlToJson(e));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : y) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string v = y.Scalar();
      if (y.Tag() == "!") return v;
      if (v == "true" || v == "false") return v == "true";
      if (v == "null" || v == "~") return nullptr;
      const json n = json::parse(v, nullptr, false);
      return !n.is_discarded() && n.is_number() ? n : json(v);
    }
    default:
      return nullptr;
  }
}

// The objects of the first case of tests/testdata/inspect/<file> (the CLI's data tests).
std::vector<json> InspectTestdata(const std::string& file) {
  const std::string path = std::string(GPUSHARE_SOURCE_DIR) + "/tests/testdata/inspect/" + file;
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  std::string error;
  std::optional<std::vector<datadriven::Case>> cases =
      datadriven::ParseCases(path, text.str(), &error);
  if (!cases || cases->empty()) {
    ADD_FAILURE() << path << ": " << error;
    return {};
  }
  std::vector<json> out;
  for (const YAML::Node& doc : YAML::LoadAll(cases->front().input)) {
    const json list = YamlToJson(doc);
    for (const json& item : list.value("items", json::array())) out.push_back(item);
  }
  EXPECT_FALSE(out.empty()) << path << ": no objects in the first case";
  return out;
}

// PREFIX/inspect serves, byte for byte, the document `gpushare inspect -o json` builds from the
// same API objects (kube/inspect_view.h Build + ToJson, here from what the API server lists, as
// the CLI reads it): every sharing mode (the CLI's modes.txt), pending pods with the reason of
// their PodScheduled condition (pending.txt; the scheduler watches no Events, so they are not
// given to either), per node, and 404 for a node the API server does not have.
TEST_F(ServiceTest, InspectServesWhatTheCliPrintsForTheSameObjects) {
  std::vector<json> objects = InspectTestdata("modes.txt");
  for (const json& o : InspectTestdata("pending.txt")) objects.push_back(o);
  ASSERT_GT(objects.size(), 10u);
  std::set<std::string> nodes, pods;  // the first of a name wins (both files have gpu-a)
  for (const json& o : objects) {
    const std::string kind = o.value("kind", "");
    const std::string key =
        o["metadata"].value("namespace", "default") + "/" + o["metadata"].value("name", "");
    if (kind == "Node" && nodes.insert(o["metadata"]["name"].get<std::string>()).second)
      api_.Upsert(Resource::kNodes, o);
    else if (kind == "Pod" && pods.insert(key).second)
      api_.Upsert(Resource::kPods, o);
  }
  ASSERT_GE(nodes.size(), 2u);
  StartService();
  ASSERT_TRUE(WaitReady());
  // What the CLI prints for `node` ("": all), from what the API server lists now (items carry no
  // kind of their own); no Events here.
  auto cli = [&](const std::string& node) {
    kube::inspect::Input in;
    for (Resource r : {Resource::kNodes, Resource::kPods}) {
      for (json item : api_.List(r)) {
        item["kind"] = r == Resource::kNodes ? "Node" : "Pod";
        EXPECT_TRUE(kube::inspect::AddObjects(item, &in, "item").ok()) << item.dump();
      }
    }
    kube::inspect::Filter f;
    f.node = node;
    return kube::inspect::ToJson(kube::inspect::Build(in, f)).dump();
  };
  httplib::Client http("127.0.0.1", service_->port());
  auto served = [&](const std::string& node) {
    httplib::Result r = http.Get("/gpushare-scheduler/inspect" + (node.empty() ? "" : "/" + node));
    return r && r->status == 200 ? r->body : std::string("no 200");
  };
  // The informers may lag a write of the scheduler's own (its sweep): wait for them to agree.
  WaitUntil([&] { return served("") == cli(""); });
  httplib::Result all = http.Get("/gpushare-scheduler/inspect");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200);
  EXPECT_EQ(all->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(all->body, cli(""));
  const json view = json::parse(all->body);
  EXPECT_GE(view["nodes"].size(), 2u) << view.dump(2);
  EXPECT_FALSE(view["pending"].empty());
  for (const std::string& node : nodes) EXPECT_EQ(served(node), cli(node)) << node;
  httplib::Result ghost = http.Get("/gpushare-scheduler/inspect/ghost");
  ASSERT_TRUE(ghost);
  EXPECT_EQ(ghost->status, 404);
  EXPECT_EQ(json::parse(ghost->body)["Error"],
            "node ghost is not in gpushare-scheduler's node informer (the API server has no such "
            "node)");
  // A node named like the debug path is just a node.
  EXPECT_EQ(http.Get("/gpushare-scheduler/inspect/cache")->status, 404);
}

// --- bind refusals (issue 10 §2: the bind endpoint must not bind any pod anywhere) ---------------
// Every refusal leaves the pod as it was: unbound, unannotated, no Binding requested, nothing
// booked.

TEST_F(ServiceTest, BindRefusesAPodBoundBySomeoneElse) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("a", 10));
  StartService();
  ASSERT_TRUE(WaitReady());
  // The pod was bound by another binder (e.g. an ignorable extender fell through).
  ASSERT_TRUE(client_->Bind({"a", "default", "uid-a", "n", {}}).ok());
  ASSERT_TRUE(WaitUntil([&] { return service_->cache().stats().unassigned == 1; }));
  api_.ClearRequests();
  Status same = Bind("a", "n");
  EXPECT_NE(same.message().find("pod default/a is already bound to node n"), std::string::npos)
      << same.message();
  EXPECT_NE(same.message().find("not by gpushare-scheduler"), std::string::npos) << same.message();
  EXPECT_EQ(Annotations("a").count("ALIYUN_COM_GPU_MEM_IDX"), 0u);
  EXPECT_EQ(api_.CountRequests("PATCH", "/pods/"), 0u);
  EXPECT_EQ(Used("n", 0), 0);
  api_.Upsert(Resource::kNodes, NodeJson("m", Uniform(1, 24)));
  Status other = Bind("a", "m");
  EXPECT_NE(other.message().find("already bound to node n"), std::string::npos) << other.message();
}

TEST_F(ServiceTest, BindRetriesOfAPodThisExtenderBookedStayIdempotent) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("a", 10));
  StartService();
  ASSERT_TRUE(WaitReady());
  ASSERT_TRUE(Bind("a", "n").ok());
  // Right away (the informer may not have seen the Binding yet) and once it has.
  api_.ClearRequests();
  EXPECT_TRUE(Bind("a", "n").ok());
  ASSERT_TRUE(
      WaitUntil([&] { return service_->cache().stats().reserved == 0 && Used("n", 0) == 10; }));
  EXPECT_TRUE(Bind("a", "n").ok());
  EXPECT_EQ(api_.CountRequests("PATCH", "/pods/"), 0u);
  EXPECT_EQ(api_.CountRequests("POST", "/binding"), 0u);
  EXPECT_EQ(Used("n", 0), 10);
}

TEST_F(ServiceTest, BindRefusesPodsThatDoNotRequestTheResource) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(1, 24)));
  // No GPU at all, in kube-system (the case of the issue).
  json plain = PodJson("coredns", {{"coredns", 0}}, "kube-system", "uid-dns");
  api_.Upsert(Resource::kPods, plain);
  // Another resource only.
  json other = PodJson("gpu-whole", {{"main", 0}}, "default", "uid-whole");
  other["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  api_.Upsert(Resource::kPods, other);
  // The resource in an init container only: that pod does ask for it.
  api_.Upsert(Resource::kPods,
              PodJson("init-only", {{"setup", 4, true}, {"main", 0}}, "default", "uid-init"));
  StartService();
  ASSERT_TRUE(WaitReady());
  api_.ClearRequests();
  for (const auto& [ns, name] :
       {std::pair<std::string, std::string>{"kube-system", "coredns"}, {"default", "gpu-whole"}}) {
    const json pod = *client_->Get(kube::kPods, ns, name);
    Status s = ext_->Bind(pod, "n");
    EXPECT_NE(s.message().find("pod " + ns + "/" + name + " does not request aliyun.com/gpu-mem"),
              std::string::npos)
        << s.message();
    EXPECT_TRUE(client_->GetPod(ns, name)->spec.node_name.empty());
  }
  EXPECT_EQ(api_.CountRequests("POST", "/binding"), 0u);
  EXPECT_EQ(api_.CountRequests("PATCH", "/pods/"), 0u);
  EXPECT_TRUE(Bind("init-only", "n").ok());
  EXPECT_EQ(client_->GetPod("default", "init-only")->spec.node_name, "n");
  // A pod that names the resource with 0 units is one kube-scheduler sends us (its interest
  // test is by name): bound as the default binder would, but only to a node that exists.
  json zero = PodJson("zero", {{"main", 0}}, "default", "uid-zero");
  zero["spec"]["containers"][0]["resources"] = {{"limits", {{"aliyun.com/gpu-mem", "0"}}}};
  api_.Upsert(Resource::kPods, zero);
  ASSERT_TRUE(WaitUntil([&] { return client_->GetPod("default", "zero").ok(); }));
  Status ghost = Bind("zero", "ghost");
  EXPECT_NE(ghost.message().find("node ghost: not seen by gpushare-scheduler's node informer"),
            std::string::npos)
      << ghost.message();
  EXPECT_TRUE(Bind("zero", "n").ok());
  EXPECT_EQ(client_->GetPod("default", "zero")->spec.node_name, "n");
}

TEST_F(ServiceTest, BindRefusesNodesThePodsFilterWouldReject) {
  api_.Upsert(Resource::kNodes, NodeJson("full", Uniform(1, 4)));
  json plain_node = NodeJson("cpu-only", Uniform(1, 24));
  plain_node["metadata"]["annotations"] = json::object();  // no gpushare.io/gpu-inventory
  api_.Upsert(Resource::kNodes, plain_node);
  api_.Upsert(Resource::kNodes, NodeJson("sick", {GpuSpec{24, false}}));
  api_.Upsert(Resource::kNodes, NodeJson("whole", {GpuSpec{24, true, "exclusive"}}));
  api_.Upsert(Resource::kPods, SimplePod("a", 10));
  StartService();
  ASSERT_TRUE(WaitReady());
  api_.ClearRequests();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ghost", "node ghost: not in gpushare-scheduler's cache"},
      {"cpu-only", "node cpu-only: no gpushare.io/gpu-inventory annotation"},
      {"sick", "node sick: no GPU serves memory shares"},
      {"whole", "node whole: no GPU serves memory shares"},
      {"full", "node full: container main asks 10 GiB, more than any GPU here has"},
  };
  for (const auto& [node, says] : cases) {
    Status s = Bind("a", node);
    EXPECT_NE(s.message().find(says), std::string::npos) << node << ": " << s.message();
  }
  // And a node with GPUs large enough but no room left.
  api_.Upsert(Resource::kNodes, NodeJson("busy", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("b", 20));
  ASSERT_TRUE(
      WaitUntil([&] { return service_->cache().stats().nodes >= 2 && Used("busy", 0) == 0; }));
  ASSERT_TRUE(Bind("b", "busy").ok());
  api_.ClearRequests();
  Status s = Bind("a", "busy");
  EXPECT_NE(s.message().find("node busy: no GPU has 10 GiB free"), std::string::npos)
      << s.message();
  EXPECT_TRUE(client_->GetPod("default", "a")->spec.node_name.empty());
  EXPECT_EQ(Annotations("a").count("ALIYUN_COM_GPU_MEM_IDX"), 0u);
  EXPECT_EQ(api_.CountRequests("POST", "/binding"), 0u);
  EXPECT_EQ(api_.CountRequests("PATCH", "/pods/"), 0u);
}

TEST_F(ServiceTest, BindRefusesAUidThatIsNotTheApisPod) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("a", 10));
  StartService();
  ASSERT_TRUE(WaitReady());
  api_.ClearRequests();
  auto bind = [&](const std::string& uid_field) {
    Result<std::string> r = ext_->Post(
        "bind", R"({"PodName":"a","PodNamespace":"default",)" + uid_field + R"("Node":"n"})");
    return r.ok() ? *r : r.status().message();
  };
  EXPECT_NE(bind(R"("PodUID":"uid-other",)")
                .find("pod default/a has UID uid-a, the bind is for UID uid-other"),
            std::string::npos);
  EXPECT_NE(bind(R"("PodUID":"",)").find("PodUID: missing"), std::string::npos)
      << bind(R"("PodUID":"",)");
  EXPECT_NE(bind("").find("PodUID: missing"), std::string::npos) << bind("");
  EXPECT_TRUE(client_->GetPod("default", "a")->spec.node_name.empty());
  EXPECT_EQ(api_.CountRequests("POST", "/binding"), 0u);
  EXPECT_EQ(api_.CountRequests("PATCH", "/pods/"), 0u);
  EXPECT_TRUE(Bind("a", "n").ok());
}

TEST_F(ServiceTest, FollowsTheNodeAgentsConfirmationAndReleasesDeletedPods) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(2, 24)));
  api_.Upsert(Resource::kPods, SimplePod("a", 20));
  StartService();
  ASSERT_TRUE(WaitReady());
  ASSERT_TRUE(Bind("a", "n").ok());
  const int assumed = std::stoi(Annotations("a").at("ALIYUN_COM_GPU_MEM_IDX"));
  const int real = 1 - assumed;
  ms::PodRequest req = *ms::ComputePodRequest({{"main", false, 20, std::nullopt}});
  kube::AnnotationChanges confirm;
  for (const auto& [k, v] : ms::ConfirmAnnotations(req, {{"main", real}})) confirm[k] = v;
  ASSERT_TRUE(client_->PatchPodAnnotations("default", "a", confirm).ok());
  // Counted where it is, and where it was planned until the agent moves the plan (another pod
  // may still be bound for that slot: core/memshare_ledger.h).
  ASSERT_TRUE(WaitUntil([&] { return Used("n", real) == 20 && Used("n", assumed) == 20; }));
  ASSERT_TRUE(client_
                  ->PatchPodAnnotations("default", "a",
                                        {{std::string(ms::kAssumedAnnotation),
                                          ms::EncodeContainerGpus({{"main", real}})}})
                  .ok());
  ASSERT_TRUE(WaitUntil([&] { return Used("n", real) == 20 && Used("n", assumed) == 0; }));
  ASSERT_TRUE(client_->Delete(kube::kPods, "default", "a", {0, ""}).ok());
  ASSERT_TRUE(WaitUntil([&] { return Used("n", real) == 0; }));
}

TEST_F(ServiceTest, AssumedButNeverConfirmedIsReleasedWithAnEvent) {
  api_.Upsert(Resource::kNodes, NodeJson("n", Uniform(1, 24)));
  api_.Upsert(Resource::kPods, SimplePod("a", 20));
  api_.Upsert(Resource::kPods, SimplePod("b", 20));
  StartService(std::chrono::milliseconds(300));
  ASSERT_TRUE(WaitReady());
  ASSERT_TRUE(Bind("a", "n").ok());
  EXPECT_NE(Bind("b", "n").message().find("no GPU has 20 GiB free"), std::string::npos);
  ASSERT_TRUE(WaitUntil([&] { return Used("n", 0) == 0; }));
  ASSERT_TRUE(WaitUntil([&] {
    for (const json& e : api_.List(Resource::kEvents))
      if (e.value("reason", "") == "AssumeExpired" && e["involvedObject"].value("name", "") == "a")
        return true;
    return false;
  }));
  EXPECT_NE(service_->Metrics().find("gpushare_scheduler_assume_expired_total 1"),
            std::string::npos)
      << service_->Metrics();
  EXPECT_TRUE(Bind("b", "n").ok());
}

TEST_F(ServiceTest, ChunkedBodiesAreCappedToo) {
  StartService();
  ASSERT_TRUE(WaitReady());
  httplib::Client http("127.0.0.1", service_->port());
  size_t sent = 0;
  const std::string chunk(64 * 1024, ' ');
  httplib::Result r = http.Post(
      "/gpushare-scheduler/filter",
      [&](size_t, httplib::DataSink& sink) {
        if (sent >= (16u << 20)) {
          sink.done();
          return true;
        }
        sent += chunk.size();
        return sink.write(chunk.data(), chunk.size());
      },
      "application/json");
  if (r) {
    EXPECT_EQ(r->status, 413);
    EXPECT_NE(r->body.find("larger than 8388608 bytes"), std::string::npos) << r->body;
  }  // else the server closed the connection while we were still sending: also a refusal
  EXPECT_EQ(http.Get("/healthz")->status, 200);
}

}  // namespace
}  // namespace gpushare::scheduler
