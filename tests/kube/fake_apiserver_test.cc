// The API-server double's own behaviour (where it has to match the real server): selectors,
// resourceVersion semantics of list, no-op writes, graceful pod deletion, patch flavours and
// validation, routing errors, and the standalone fake-apiserver binary with its /_fake hooks.
#include "tests/fakes/apiserver/fake_apiserver.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kube/client.h"
#include "kube/errors.h"
#include "tests/fakes/apiserver/selectors.h"
#include "tests/kube/test_util.h"

namespace gpushare::fakes {
namespace {

using kube::Client;
using kube::HttpRequest;
using kube::kPods;
using kube::testing::MakeClient;
using kube::testing::TestPod;
using nlohmann::json;

TEST(SelectorTest, LabelSelectors) {
  std::map<std::string, std::string> l = {
      {"app", "x"}, {"tier", "gpu"}, {"n", "5"}, {"example.com/k", "v"}};
  auto m = [&](const char* s) {
    Result<LabelSelector> sel = LabelSelector::Parse(s);
    EXPECT_TRUE(sel.ok()) << s << ": " << sel.status().ToString();
    return sel.ok() && sel->Matches(l);
  };
  EXPECT_TRUE(m(""));
  EXPECT_TRUE(m("app=x"));
  EXPECT_TRUE(m("app==x"));
  EXPECT_FALSE(m("app=y"));
  EXPECT_TRUE(m("app!=y"));
  EXPECT_TRUE(m("missing!=y"));  // != matches objects without the label
  EXPECT_TRUE(m("app,tier"));
  EXPECT_FALSE(m("app,!tier"));
  EXPECT_TRUE(m("!missing"));
  EXPECT_TRUE(m("app in (x, y),tier notin (cpu)"));
  EXPECT_FALSE(m("app in (y,z)"));
  EXPECT_TRUE(m("missing notin (a)"));
  EXPECT_TRUE(m("n>4,n<6"));
  EXPECT_FALSE(m("n>5"));
  EXPECT_TRUE(m("example.com/k=v"));
  EXPECT_TRUE(m(" app = x , tier = gpu "));
  for (const char* bad : {"app=x=y", "app in x", "app in (x", "=x", "a b", "app=in valid", "n>x",
                          "app,,tier", "-bad=x"}) {
    EXPECT_FALSE(LabelSelector::Parse(bad).ok()) << bad;
  }
}

TEST(SelectorTest, FieldSelectors) {
  std::set<std::string> supported = {"spec.nodeName", "status.phase", "metadata.name"};
  std::map<std::string, std::string> f = {
      {"spec.nodeName", "n1"}, {"status.phase", "Pending"}, {"metadata.name", "a,b"}};
  auto m = [&](const char* s) {
    Result<FieldSelector> sel = FieldSelector::Parse(s, supported);
    EXPECT_TRUE(sel.ok()) << s << ": " << sel.status().ToString();
    return sel.ok() && sel->Matches(f);
  };
  EXPECT_TRUE(m("spec.nodeName=n1"));
  EXPECT_TRUE(m("spec.nodeName==n1,status.phase=Pending"));
  EXPECT_FALSE(m("spec.nodeName=n1,status.phase!=Pending"));
  EXPECT_TRUE(m("spec.nodeName!=n2"));
  EXPECT_TRUE(m("metadata.name=a\\,b"));  // escaped comma
  Result<FieldSelector> bad = FieldSelector::Parse("spec.foo=1", supported);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "field label not supported: spec.foo");
  EXPECT_FALSE(FieldSelector::Parse("spec.nodeName", supported).ok());
}

class FakeApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeApiServerOptions o;
    o.too_large_rv_wait = std::chrono::milliseconds(50);
    o.history_limit = 10;
    server_ = std::make_unique<FakeApiServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    client_ = MakeClient(server_->url());
  }
  kube::HttpResponse Raw(const std::string& method, const std::string& path,
                         const std::string& body = "",
                         const std::string& ctype = "application/json") {
    Result<kube::HttpResponse> r =
        client_->Do(HttpRequest{method, path, body, body.empty() ? "" : ctype});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : kube::HttpResponse{};
  }
  std::unique_ptr<FakeApiServer> server_;
  std::shared_ptr<Client> client_;
};

TEST_F(FakeApiServerTest, ResourceVersionsAreGlobalAndNoOpsDoNotBumpThem) {
  uint64_t v0 = server_->resource_version();
  EXPECT_GE(v0, 1u);  // never "0", which means "any" to list and watch
  json p = server_->Upsert(Resource::kPods, TestPod("a"));
  json n = server_->Upsert(Resource::kNodes, {{"metadata", {{"name", "n"}}}});
  EXPECT_EQ(p["metadata"]["resourceVersion"], std::to_string(v0 + 1));
  EXPECT_EQ(n["metadata"]["resourceVersion"], std::to_string(v0 + 2));
  ASSERT_TRUE(client_->PatchPodAnnotations("default", "a", {{"k", "v"}}).ok());
  uint64_t v = server_->resource_version();
  ASSERT_TRUE(client_->PatchPodAnnotations("default", "a", {{"k", "v"}}).ok());
  ASSERT_TRUE(client_->MergePatch(kPods, "default", "a", json::object()).ok());
  EXPECT_EQ(server_->resource_version(), v);
}

TEST_F(FakeApiServerTest, ListResourceVersionSemantics) {
  server_->Upsert(Resource::kPods, TestPod("a"));
  std::string at = std::to_string(server_->resource_version());
  server_->Upsert(Resource::kPods, TestPod("b"));
  server_->Remove(Resource::kPods, "default", "a");
  // Exact: the state as it was.
  kube::ListOptions exact;
  exact.resource_version = at;
  exact.resource_version_match = "Exact";
  Result<kube::RawList> then = client_->List(kPods, "", exact);
  ASSERT_TRUE(then.ok()) << then.status().ToString();
  ASSERT_EQ(then->items.size(), 1u);
  EXPECT_EQ(then->items[0]["metadata"]["name"], "a");
  EXPECT_EQ(then->resource_version, at);
  // NotOlderThan (the default for a version): the current state.
  kube::ListOptions not_older;
  not_older.resource_version = at;
  Result<kube::RawList> now = client_->List(kPods, "", not_older);
  ASSERT_TRUE(now.ok());
  ASSERT_EQ(now->items.size(), 1u);
  EXPECT_EQ(now->items[0]["metadata"]["name"], "b");
  // A future version: 504 after a short wait, like the watch cache's "Too large resource version".
  not_older.resource_version = std::to_string(server_->resource_version() + 100);
  Result<kube::RawList> future = client_->List(kPods, "", not_older);
  ASSERT_FALSE(future.ok());
  EXPECT_EQ(future.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(future.status().message().find("Too large resource version"), std::string::npos);
  // Too old for Exact: 410.
  for (int i = 0; i < 12; ++i) server_->Upsert(Resource::kPods, TestPod("c" + std::to_string(i)));
  Result<kube::RawList> old = client_->List(kPods, "", exact);
  EXPECT_TRUE(kube::IsExpired(old.status())) << old.status().ToString();
  // List items carry no kind/apiVersion; the list does.
  Result<json> page = client_->ListPage(kPods, "", {});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ((*page)["kind"], "PodList");
  EXPECT_FALSE((*page)["items"][0].contains("kind"));
}

TEST_F(FakeApiServerTest, GracefulPodDeletion) {
  server_->Upsert(Resource::kPods,
                  TestPod("running", "default", "node-a", json::object(), "Running"));
  server_->Upsert(Resource::kPods, TestPod("unbound"));
  server_->Upsert(Resource::kPods,
                  TestPod("done", "default", "node-a", json::object(), "Succeeded"));
  ASSERT_TRUE(client_->Delete(kPods, "default", "running").ok());
  std::optional<json> r = server_->Get(Resource::kPods, "default", "running");
  ASSERT_TRUE(r.has_value());  // a bound running pod only gets a deletionTimestamp
  EXPECT_TRUE((*r)["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ((*r)["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_TRUE(client_->GetPod("default", "running")->IsBeingDeleted());
  // Binding a pod that is being deleted is refused.
  ASSERT_TRUE(client_->Delete(kPods, "default", "running", kube::DeleteOptions{0, ""}).ok());
  EXPECT_FALSE(server_->Get(Resource::kPods, "default", "running").has_value());
  ASSERT_TRUE(client_->Delete(kPods, "default", "unbound").ok());
  EXPECT_FALSE(server_->Get(Resource::kPods, "default", "unbound").has_value());
  ASSERT_TRUE(client_->Delete(kPods, "default", "done").ok());
  EXPECT_FALSE(server_->Get(Resource::kPods, "default", "done").has_value());

  server_->Upsert(Resource::kPods, TestPod("leaving"));
  json leaving = *server_->Get(Resource::kPods, "default", "leaving");
  leaving["metadata"]["deletionTimestamp"] = "2026-12-02T10:00:00Z";
  server_->Upsert(Resource::kPods, leaving);
  Status b = client_->Bind({"leaving", "default", "", "node-a", {}});
  EXPECT_TRUE(kube::IsConflict(b));
  EXPECT_NE(b.message().find("is being deleted"), std::string::npos);
}

TEST_F(FakeApiServerTest, PatchFlavoursAndValidation) {
  server_->Upsert(Resource::kPods, TestPod("p"));
  kube::HttpResponse jp = Raw("PATCH", "/api/v1/namespaces/default/pods/p",
                              R"([{"op":"add","path":"/metadata/labels","value":{"a":"b"}}])",
                              "application/json-patch+json");
  EXPECT_EQ(jp.code, 200) << jp.body;
  EXPECT_EQ((*server_->Get(Resource::kPods, "default", "p"))["metadata"]["labels"]["a"], "b");
  kube::HttpResponse badop =
      Raw("PATCH", "/api/v1/namespaces/default/pods/p", R"([{"op":"remove","path":"/nope"}])",
          "application/json-patch+json");
  EXPECT_EQ(badop.code, 422) << badop.body;
  kube::HttpResponse smp = Raw("PATCH", "/api/v1/namespaces/default/pods/p", R"({"metadata":{}})",
                               "application/strategic-merge-patch+json");
  EXPECT_EQ(smp.code, 415);
  kube::HttpResponse notjson =
      Raw("PATCH", "/api/v1/namespaces/default/pods/p", "{", "application/merge-patch+json");
  EXPECT_EQ(notjson.code, 400);
  kube::HttpResponse rename = Raw("PATCH", "/api/v1/namespaces/default/pods/p",
                                  R"({"metadata":{"name":"q"}})", "application/merge-patch+json");
  EXPECT_EQ(rename.code, 400);
  kube::HttpResponse uid = Raw("PATCH", "/api/v1/namespaces/default/pods/p",
                               R"({"metadata":{"uid":"other"}})", "application/merge-patch+json");
  // As kube-apiserver v1.37.2 answers (checked on the e2e cluster): 422 for a merge patch, 409
  // for a PUT carrying another UID.
  EXPECT_EQ(uid.code, 422) << uid.body;
  EXPECT_NE(
      uid.body.find(
          R"(Pod \"p\" is invalid: metadata.uid: Invalid value: \"other\": field is immutable)"),
      std::string::npos)
      << uid.body;
  json replaced = *server_->Get(Resource::kPods, "default", "p");
  replaced["metadata"]["uid"] = "other";
  kube::HttpResponse put_uid =
      Raw("PUT", "/api/v1/namespaces/default/pods/p", replaced.dump(), "application/json");
  EXPECT_EQ(put_uid.code, 409) << put_uid.body;
  EXPECT_NE(put_uid.body.find("Precondition failed: UID in precondition: other"),
            std::string::npos);
  // Image changes are allowed on a pod, nothing else in spec. A merge patch replaces whole
  // lists (RFC 7386), so this one also drops the container's resources: refused.
  kube::HttpResponse whole = Raw("PATCH", "/api/v1/namespaces/default/pods/p",
                                 R"({"spec":{"containers":[{"name":"main","image":"busybox:2"}]}})",
                                 "application/merge-patch+json");
  EXPECT_EQ(whole.code, 422) << whole.body;
  kube::HttpResponse image =
      Raw("PATCH", "/api/v1/namespaces/default/pods/p",
          R"([{"op":"replace","path":"/spec/containers/0/image","value":"busybox:2"}])",
          "application/json-patch+json");
  EXPECT_EQ(image.code, 200) << image.body;
  EXPECT_EQ((*server_->Get(Resource::kPods, "default", "p"))["spec"]["containers"][0]["image"],
            "busybox:2");
  // PUT with a stale resourceVersion conflicts.
  json stale = *server_->Get(Resource::kPods, "default", "p");
  ASSERT_TRUE(client_->PatchPodAnnotations("default", "p", {{"x", "y"}}).ok());
  kube::HttpResponse put = Raw("PUT", "/api/v1/namespaces/default/pods/p", stale.dump());
  EXPECT_EQ(put.code, 409);
  // Create validation.
  kube::HttpResponse nocont = Raw("POST", "/api/v1/namespaces/default/pods",
                                  R"({"metadata":{"name":"x"},"spec":{"containers":[]}})");
  EXPECT_EQ(nocont.code, 422);
  kube::HttpResponse noimage =
      Raw("POST", "/api/v1/namespaces/default/pods",
          R"({"metadata":{"name":"x"},"spec":{"containers":[{"name":"c"}]}})");
  EXPECT_EQ(noimage.code, 422);
  EXPECT_NE(noimage.body.find("spec.containers[0].image: Required value"), std::string::npos);
  kube::HttpResponse wrongns = Raw(
      "POST", "/api/v1/namespaces/default/pods",
      R"({"metadata":{"name":"x","namespace":"other"},"spec":{"containers":[{"name":"c","image":"i"}]}})");
  EXPECT_EQ(wrongns.code, 400);
  kube::HttpResponse gen = Raw(
      "POST", "/api/v1/namespaces/default/pods",
      R"({"metadata":{"generateName":"web-"},"spec":{"containers":[{"name":"c","image":"i"}]}})");
  ASSERT_EQ(gen.code, 201) << gen.body;
  EXPECT_EQ(json::parse(gen.body)["metadata"]["name"].get<std::string>().rfind("web-", 0), 0u);
  // The binding's name must match the URL.
  kube::HttpResponse mismatch = Raw("POST", "/api/v1/namespaces/default/pods/p/binding",
                                    R"({"metadata":{"name":"other"},"target":{"name":"n"}})");
  EXPECT_EQ(mismatch.code, 400);
  kube::HttpResponse notnode = Raw("POST", "/api/v1/namespaces/default/pods/p/binding",
                                   R"({"target":{"kind":"Pod","name":"n"}})");
  EXPECT_EQ(notnode.code, 422);
  // The older bindings collection works too.
  kube::HttpResponse legacy =
      Raw("POST", "/api/v1/namespaces/default/bindings",
          R"({"metadata":{"name":"p"},"target":{"kind":"Node","name":"n"}})");
  EXPECT_EQ(legacy.code, 201) << legacy.body;
}

TEST_F(FakeApiServerTest, RoutingErrorsAndLimits) {
  EXPECT_EQ(Raw("GET", "/api/v1/widgets").code, 404);
  EXPECT_EQ(Raw("GET", "/api/v1/namespaces/default/nodes").code, 404);
  EXPECT_EQ(Raw("GET", "/apis/apps/v1/deployments").code, 404);
  EXPECT_EQ(Raw("POST", "/api/v1/pods", TestPod("x").dump()).code, 405);
  EXPECT_EQ(Raw("GET", "/_fake/state").code, 404);  // hooks are off in-process unless asked for
  EXPECT_EQ(Raw("GET", "/version").code, 200);
  EXPECT_EQ(Raw("GET", "/healthz").code, 200);
  json big = TestPod("big");
  big["metadata"]["annotations"]["blob"] = std::string(4u << 20, 'x');
  EXPECT_EQ(Raw("POST", "/api/v1/namespaces/default/pods", big.dump()).code, 413);
  EXPECT_EQ(Raw("GET", "/api/v1/pods?resourceVersion=abc").code, 400);
  EXPECT_EQ(Raw("GET", "/api/v1/pods?watch=true&resourceVersion=abc").code, 400);
  EXPECT_EQ(Raw("GET", "/api/v1/pods?continue=zz").code, 400);
}

// An injected fault without a reason answers with the reason kube::StatusFromApi would assume.
TEST_F(FakeApiServerTest, FaultsWithoutAReasonTakeTheClientsDefaultReason) {
  for (int code : {406, 410, 412, 503}) {
    Fault f;
    f.http_code = code;
    server_->InjectFault(f);
    kube::HttpResponse r = Raw("GET", "/api/v1/nodes");
    EXPECT_EQ(r.code, code);
    EXPECT_EQ(json::parse(r.body).value("reason", "?"), kube::DefaultReason(code)) << code;
  }
  EXPECT_EQ(kube::DefaultReason(412), "PreconditionFailed");
}

TEST(FakeApiServerBinaryTest, ServesAndAnswersHooks) {
  kube::testing::TempDir d;
  std::string port_file = d.File("port");
  kube::testing::WriteFile(
      d.File("objects.json"),
      json{{"items", {{{"kind", "Node"}, {"metadata", {{"name", "gpu-1"}}}}}}}.dump());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string load = d.File("objects.json");
    execl(GPUSHARE_FAKE_APISERVER_BIN, "fake-apiserver", "--listen", "127.0.0.1:0", "--port-file",
          port_file.c_str(), "--token", "t0k", "--load", load.c_str(), "--bookmark-interval-ms",
          "100", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_TRUE(
      kube::testing::WaitUntil([&] { return !kube::testing::ReadFile(port_file).empty(); }));
  int port = std::stoi(kube::testing::ReadFile(port_file));
  kube::ClientConfig cfg;
  cfg.token = "t0k";
  auto c = MakeClient("http://127.0.0.1:" + std::to_string(port), {}, cfg);
  Result<kube::Node> n = c->GetNode("gpu-1");
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  json pod = TestPod("p");
  pod["kind"] = "Pod";
  Result<kube::HttpResponse> add =
      c->Do({"POST", "/_fake/objects", pod.dump(), "application/json"});
  ASSERT_TRUE(add.ok());
  EXPECT_EQ(add->code, 200) << add->body;
  EXPECT_TRUE(c->GetPod("default", "p").ok());
  Result<kube::HttpResponse> fault = c->Do(
      {"POST", "/_fake/faults", R"({"kind":"http","code":503,"count":1})", "application/json"});
  ASSERT_TRUE(fault.ok());
  EXPECT_EQ(c->GetPod("default", "p").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(c->GetPod("default", "p").ok());
  Result<kube::HttpResponse> reqs = c->Do({"GET", "/_fake/requests", "", ""});
  ASSERT_TRUE(reqs.ok());
  EXPECT_GE(json::parse(reqs->body)["requests"].size(), 4u);
  Result<kube::HttpResponse> state = c->Do({"GET", "/_fake/state", "", ""});
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(json::parse(state->body).contains("resourceVersion"));
  EXPECT_TRUE(c->Do({"POST", "/_fake/compact", "", ""}).ok());
  // A wrong token is refused by the API but the hooks stay reachable.
  auto anon = MakeClient("http://127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(anon->GetNode("gpu-1").status().code(), StatusCode::kPermissionDenied);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace gpushare::fakes
